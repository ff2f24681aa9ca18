"""The proxy's options view: the config options its client sees, and the requests that set them.

The client sees one `model` option with `agent:model` values (every agent's, before the first prompt and
after it: picking another agent's model moves an unprompted session to it, and hands a prompted session's
conversation over to it, handover.py), the bound agent's other options, and for agents that
send only the old `modes` field a `mode` option built from it. This module rewrites the agents'
answers and updates into that view, follows the mode option for clients that know only `modes`
(current_mode_update), and serves set_config_option, session/set_mode and session/set_model.
Each value the client sets is remembered (ids.py) so that a later proxy process can put it back.

Threads: the proxy's one event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acp.exceptions import RequestError

from .._protocol import INVALID_PARAMS, join_agent_model, split_agent_model
from .models import (
    DEFAULT_MODEL,
    AgentModels,
    model_option,
    modes_from_options,
    modes_option_id,
    rewrite_options,
)
from .hub import Hub
from .session import Candidate, ProxySession

# Moves a session to (agent, bare model): the binder's ``bind``, given by the server that owns both.
BindTo = Callable[[ProxySession, str, str], Awaitable[Candidate]]
# Hands a prompted session's conversation over to another agent's model; the set_config_option answer.
HandTo = Callable[[ProxySession, str, str], Awaitable[dict[str, Any]]]

__all__ = ["OptionsView", "invalid_params"]


def invalid_params(message: str, **data: Any) -> RequestError:
    return RequestError(INVALID_PARAMS, message, data or None)


class OptionsView:
    """The client's view of a session's options; set_config_option, set_mode and set_model."""

    def __init__(self, hub: Hub, *, bind: BindTo, hand_over: HandTo | None = None) -> None:
        self.hub = hub
        self._bind = bind
        self._hand_over = hand_over

    # --- the view -----------------------------------------------------------------------
    def unbound_option(self, session: ProxySession) -> dict[str, Any]:
        groups = [session.probes[a].models for a in session.available]
        agent, bare = session.selected or (session.available[0], DEFAULT_MODEL)
        return model_option([g for g in groups if g is not None], join_agent_model(agent, bare),
                            marker=self.hub.marker)

    def client_options(self, session: ProxySession) -> list[dict[str, Any]]:
        """The complete option list the client should see for this session now."""
        candidate = session.bound
        if candidate is None:
            return [self.unbound_option(session)] if session.available else []
        options = candidate.effective_options
        return rewrite_options(options, candidate.agent, marker=self.hub.marker, others=self.other_models(session),
                               order=self.hub.order,
                               models=candidate.models if options is candidate.options else None)

    def other_models(self, session: ProxySession) -> list[AgentModels]:
        """The models of every agent but the bound one, listed whether or not the session was prompted: before
        the first prompt picking one moves the session, after it hands its conversation over (handover.py). An
        agent this session never probed (a fork, a reopen) is listed as it was last seen; one whose probe for
        this session failed is left out."""
        bound = session.bound
        others: list[AgentModels] = []
        for agent in self.hub.order:
            if bound is not None and agent == bound.agent:
                continue
            other = session.candidates.get(agent)
            probe = session.probes.get(agent)
            if other is not None and not other.released:
                models: AgentModels | None = other.models
            elif probe is not None:
                models = probe.models
            else:
                models = self.hub.known_models.get(agent)
            if models is not None:
                others.append(models)
        return others

    def valid_models(self, session: ProxySession) -> list[str]:
        option = next((o for o in self.client_options(session) if o.get("id") == "model"), None)
        if option is None:
            return []
        return [entry["value"] for group in option["options"] for entry in group["options"]]

    def rewrite_result(self, session: ProxySession, result: Any, *, opening: bool = False) -> dict[str, Any]:
        """An agent's answer as the client sees it. ``opening`` (new/load/resume): it also carries the old
        `modes` field, in step with the mode option, for clients that know only that field."""
        out = dict(result) if isinstance(result, dict) else {}
        out.pop("models", None)  # the old `models` field: the model option replaces it
        if isinstance(out.get("configOptions"), list) or session.bound is not None:
            out["configOptions"] = self.client_options(session)
            if opening and "modes" not in out:
                modes = modes_from_options(out["configOptions"])
                if modes is not None:
                    out["modes"] = modes
            self.follow_mode(session, out["configOptions"], announce=not opening)
        return out

    def follow_mode(self, session: ProxySession, options: list[dict[str, Any]], *, announce: bool = True) -> None:
        """Tell clients that only know `modes` when the mode option's value changed (current_mode_update)."""
        if session.bound is not None and session.bound.legacy:
            return  # such an agent sends current_mode_update itself
        modes = modes_from_options(options)
        current = modes["currentModeId"] if modes is not None else None
        if current is None or current == session.shown_mode:
            return
        before, session.shown_mode = session.shown_mode, current
        if announce and before is not None:
            self.hub.send_to_client("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "current_mode_update", "currentModeId": current}})

    def forward_update(self, candidate: Candidate, params: dict[str, Any]) -> None:
        """A bound agent session's update, to the client: option lists rewritten, mode changes followed."""
        session = candidate.session
        out = {**params, "sessionId": session.id}
        update = params.get("update")
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if kind == "config_option_update":
            out["update"] = {**update, "configOptions": self.client_options(session)}
        elif kind == "current_mode_update" and not candidate.legacy:
            if update.get("currentModeId") == session.shown_mode:  # type: ignore[union-attr]
                return  # the client was told already (the proxy follows the mode option)
            session.shown_mode = update.get("currentModeId")  # type: ignore[union-attr]
        self.hub.send_to_client("session/update", out)
        if kind == "config_option_update":
            self.follow_mode(session, out["update"]["configOptions"])

    def send_options_update(self, session: ProxySession) -> None:
        options = self.client_options(session)
        if options:
            self.hub.send_to_client("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "config_option_update", "configOptions": options}})

    async def _push_options_now(self, session: ProxySession, options: list[dict[str, Any]]) -> None:
        """The option list as a config_option_update, on the wire before the answer being computed."""
        await self.hub.send_now("session/update", {"sessionId": session.id, "update": {
            "sessionUpdate": "config_option_update", "configOptions": options}})

    # --- setting -------------------------------------------------------------------------
    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.hub.session_of(params)
        config_id = params.get("configId")
        async with session.lock:
            if config_id == "model":
                return await self._set_model(session, params)
            candidate = session.bound
            if candidate is None:
                ids = ["model"] if session.available else []
                raise invalid_params(
                    f"no config option {config_id!r} in this session yet: the session is not bound to an agent. "
                    f"Options now: {', '.join(ids) or 'none'}; pick a model (agent:model) or send a prompt first.",
                    configId=config_id, valid=ids)
            if candidate.legacy and config_id == "mode":
                return await self._set_legacy_mode(session, candidate, params)
            result = await candidate.backend.request("session/set_config_option",
                                                     {**params, "sessionId": candidate.backend_session_id})
            candidate.absorb(result)
            self.hub.bindings.record_option(session.id, str(config_id), params.get("value"))
            return self.rewrite_result(session, result)

    async def _set_legacy_mode(self, session: ProxySession, candidate: Candidate,
                               params: dict[str, Any]) -> dict[str, Any]:
        """set_config_option `mode` on an agent with only the old `modes` field: session/set_mode."""
        value = params.get("value")
        valid = candidate.mode_ids()
        if value not in valid:
            raise invalid_params(f"unknown value {value!r} for config option 'mode'; valid: {', '.join(valid)}",
                                 configId="mode", value=value, valid=valid)
        forwarded = {"sessionId": candidate.backend_session_id, "modeId": value}
        if "_meta" in params:
            forwarded["_meta"] = params["_meta"]
        await candidate.backend.request("session/set_mode", forwarded)
        candidate.set_mode(value)
        self.hub.bindings.record_option(session.id, "mode", value)
        return {"configOptions": self.client_options(session)}

    async def _set_model(self, session: ProxySession, params: dict[str, Any]) -> dict[str, Any]:
        value = params.get("value")
        valid = self.valid_models(session)
        parsed = split_agent_model(value, self.hub.order)
        if parsed is None or not isinstance(value, str) or value not in valid:
            offered = next((m for m in self.other_models(session) if parsed is not None and m.agent == parsed[0]), None)
            if offered is not None and parsed is not None:
                others = [offered.prefixed(v) for v in offered.values]
                raise invalid_params(f"agent '{parsed[0]}' offers no model {parsed[1]!r}; its models: "
                                     f"{', '.join(others)}", value=value, valid=valid)
            raise invalid_params(
                f"unknown model {value!r} for session {session.id}; valid ids: {', '.join(valid) or 'none'}",
                value=value, valid=valid)
        agent, bare = parsed
        candidate = session.bound
        if candidate is not None and candidate.agent == agent:
            models = candidate.models
            if models.option_id is not None:
                forwarded = {**params, "sessionId": candidate.backend_session_id, "configId": models.option_id,
                             "value": bare}
                result = await candidate.backend.request("session/set_config_option", forwarded)
                candidate.absorb(result)
                session.selected = (agent, bare)
                self.hub.bindings.record_model(session.id, value)
                return self.rewrite_result(session, result)
            return {"configOptions": self.client_options(session)}
        if candidate is not None and session.prompted:
            if self._hand_over is None:
                raise self._rebind_refused(session, value)
            # Prompted on another agent: its conversation is handed over to this one (handover.py).
            answer = await self._hand_over(session, agent, bare)
            self.hub.bindings.record_model(session.id, value)
            return answer
        await self._bind(session, agent, bare)
        self.hub.bindings.record_model(session.id, value)
        return {"configOptions": self.client_options(session)}

    def _rebind_refused(self, session: ProxySession, value: str) -> RequestError:
        bound = session.bound
        assert bound is not None
        valid = self.valid_models(session)
        return invalid_params(
            f"session {session.id} is bound to agent '{bound.agent}' since its first prompt, so {value!r} "
            f"(agent '{split_agent_model(value)[0]}') cannot be picked here: start a new session to use it. "
            f"Valid ids in this session: {', '.join(valid)}",
            value=value, valid=valid, boundAgent=bound.agent)

    async def set_mode(self, params: dict[str, Any]) -> Any:
        session = self.hub.session_of(params)
        candidate = session.bound
        if candidate is None:
            raise invalid_params(f"session {session.id} is not bound to an agent yet; pick a model or send a "
                                 "prompt first", sessionId=session.id)
        mode_option = modes_option_id(candidate.effective_options)
        if not candidate.legacy and mode_option is not None:
            # Older clients pick modes with session/set_mode: it becomes the mode option's set_config_option.
            answer = await self.set_config_option({"sessionId": session.id, "configId": mode_option,
                                                   "value": params.get("modeId")})
            await self._push_options_now(session, answer["configOptions"])  # config-option clients follow too
            return {}
        result = await candidate.backend.request("session/set_mode",
                                                 {**params, "sessionId": candidate.backend_session_id})
        if candidate.legacy and candidate.modes.get("currentModeId") != params.get("modeId"):
            candidate.set_mode(params.get("modeId"))
            self.send_options_update(session)  # the `mode` option the proxy shows follows
        return result

    async def set_model_unstable(self, params: dict[str, Any]) -> Any:
        """The unstable session/set_model of older clients: the `model` option's set_config_option (`agent:model`
        ids), so they switch models instead of silently running on the default one."""
        options = await self.set_config_option({"sessionId": params.get("sessionId"), "configId": "model",
                                                "value": params.get("modelId")})
        await self._push_options_now(self.hub.session_of(params), options["configOptions"])
        return {}
