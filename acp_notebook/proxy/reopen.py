"""The proxy's reopener: where a session lives, session/load and session/resume, session/list and its cursor.

A session is found by the binding this process knows, the one the state directory remembers, the
agents' session ids in its id (ids.py) and the `agent:id` form session/list gives. A session that
was offered by several agents and never prompted is reopened on all of them (a probe each, without
the client's MCP servers: only the agent session it is bound to gets those, its kernel entry
relayed, see relay.py), so any of their models can still be picked. A session reopened by a new
proxy process gets back the model
and option values the client set (the state directory remembers them): agents may reopen a session
on their default model.

Threads: the proxy's one event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from typing import Any

from acp.exceptions import RequestError

from .._protocol import INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, join_agent_model, split_agent_model
from .._timeout import deadline
from .backend import BackendGone
from .binder import Binder
from .hub import Hub
from .ids import decode_session_id
from .models import META_KEY, offers
from .options import OptionsView, invalid_params
from .relay import KernelRelay, closing_relays
from .session import Candidate, ProbeOutcome, ProxySession


__all__ = ["Reopener"]

logger = logging.getLogger(__name__)


class Reopener:
    """session/load, session/resume, session/list and session/delete across the agents."""

    def __init__(self, hub: Hub, binder: Binder, view: OptionsView) -> None:
        self.hub = hub
        self.binder = binder
        self.view = view

    # --- list --------------------------------------------------------------------------------
    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        cursors = _decode_cursor(params.get("cursor"))
        listed: list[dict[str, Any]] = []
        seen: set[str] = set()
        following: dict[str, str] = {}
        for backend in self.hub.running():
            if not backend.supports("list"):
                continue
            if cursors is not None and backend.name not in cursors:
                continue  # finished in an earlier page
            query = {k: v for k, v in params.items() if k != "cursor"}
            if cursors and cursors.get(backend.name):
                query["cursor"] = cursors[backend.name]
            try:
                result = await backend.request("session/list", query)
            except (BackendGone, RequestError) as exc:
                logger.info("session/list on %s failed: %s", backend.name, exc)
                continue
            for info in (result or {}).get("sessions") or []:
                entry = self._listed(backend.name, info, seen)
                if entry is not None:
                    listed.append(entry)
            if (result or {}).get("nextCursor"):
                following[backend.name] = result["nextCursor"]
        out: dict[str, Any] = {"sessions": listed}
        if following:
            out["nextCursor"] = _encode_cursor(following)
        return out

    def _listed(self, agent: str, info: Any, seen: set[str]) -> dict[str, Any] | None:
        """One agent's session/list entry as the client sees it, or None when it is not listed through `agent`."""
        if not isinstance(info, dict) or not isinstance(info.get("sessionId"), str):
            return None
        backend_id = info["sessionId"]
        if backend_id in self.binder.hidden[agent]:
            return None  # a probe's session, never used by the client
        client_id = self._client_id_for(agent, backend_id)
        if client_id is None or client_id in seen:
            return None  # listed through the agent it is bound to
        seen.add(client_id)
        entry = dict(info)
        entry["sessionId"] = client_id
        meta = dict(entry.get("_meta") or {})
        meta[META_KEY] = {"agent": agent, "sessionId": backend_id}
        entry["_meta"] = meta
        return entry

    def _client_id_for(self, agent: str, backend_id: str) -> str | None:
        """The id the client knows a backend session by; None when it belongs to a session bound to another
        agent (agents sharing one store, such as two demo agents, list each other's)."""
        owners = [s for s in self.hub.sessions.values() if s.last_backend and s.last_backend[1] == backend_id]
        for session in owners:
            if session.last_backend == (agent, backend_id):
                return session.id
        if owners:
            return None
        bindings = self.hub.bindings
        remembered = bindings.session_id_for(agent, backend_id)  # bound by an earlier proxy process
        if remembered is not None:
            return remembered
        if bindings.bound_elsewhere(agent, backend_id):
            return None  # an earlier proxy bound it on another agent: it is listed through that one
        return join_agent_model(agent, backend_id)  # a session this proxy never saw bound

    # --- locate, delete ------------------------------------------------------------------------
    def locate(self, session_id: Any) -> list[tuple[str, str]]:
        """Where a session may live, most likely first: ``(agent, the agent's session id)`` pairs."""
        hub = self.hub
        session = hub.sessions.get(session_id) if isinstance(session_id, str) else None
        places: list[tuple[str, str]] = []
        if session is not None and session.last_backend is not None:
            places.append(session.last_backend)
        remembered = hub.bindings.lookup(session_id) if isinstance(session_id, str) else None
        places += [remembered] if remembered else []
        places += decode_session_id(session_id)
        parsed = split_agent_model(session_id, hub.order)
        places += [parsed] if parsed else []
        places = [p for i, p in enumerate(places) if p[0] in hub.backends and p not in places[:i]]
        if not places:
            raise hub.unknown_session(session_id, "the proxy reopens the sessions it opened, those session/list "
                                                     "shows (agent:id) and those its state directory remembers")
        return places

    async def delete_session(self, params: dict[str, Any]) -> Any:
        agent, backend_id = self.locate(params.get("sessionId"))[0]
        backend = self.hub.backends[agent]
        if not backend.supports("delete"):
            raise RequestError(METHOD_NOT_FOUND, f"agent '{agent}' does not support session/delete", {"agent": agent})
        result = await backend.request("session/delete", {**params, "sessionId": backend_id})
        session = self.hub.sessions.pop(params["sessionId"], None)
        if session is not None and not session.closed:
            session.close()
            self.binder.release_all(session, close=False)
            await closing_relays()
        return result

    # --- load, resume ----------------------------------------------------------------------------
    async def load(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen("session/load", params)

    async def resume(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen("session/resume", params)

    async def _reopen(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """session/load or session/resume on the agent that has the session: each place it may live,
        in turn, until an agent knows it."""
        if self._never_prompted(params.get("sessionId")):
            return await self._reopen_unprompted(method, params)
        *others, last = self.locate(params.get("sessionId"))
        for agent, backend_id in others:
            try:
                return await self._reopen_on(method, params, agent, backend_id)
            except RequestError as exc:
                if exc.code not in (RESOURCE_NOT_FOUND, INVALID_PARAMS):  # -32602: agents older than -32002
                    raise
        return await self._reopen_on(method, params, *last)

    async def _reopen_on(self, method: str, params: dict[str, Any], agent: str, backend_id: str) -> dict[str, Any]:
        backend = self.hub.backends[agent]
        await backend.ensure_ready(self.hub.client_init)
        capability = "load" if method == "session/load" else "resume"
        if not backend.supports(capability):
            raise RequestError(METHOD_NOT_FOUND, f"agent '{agent}' does not support {method}", {"agent": agent})
        session, fresh = self._reopened(params)
        binder = self.binder
        async with session.lock:
            binder.release_all(session, close=False)
            servers, relay = await KernelRelay.grant(params.get("mcpServers") or [])
            # It has a history with this agent: bound and tied at once, other agents are off the table.
            candidate = binder.adopt(session, backend, backend_id, bind=True, granted=True, relay=relay)
            try:
                result = await backend.request(method, _with_servers(params, backend_id, servers))
            except BaseException:
                binder.release(candidate, close=False)
                if session.bound is not None:
                    session.unbind()
                raise
            candidate.absorb(result)
            models = candidate.models
            session.selected = (agent, models.current)
            session.probes = {agent: ProbeOutcome(agent, models=models)}
            self.hub.note_models(models)
            missing = await self._restore_choices(session, candidate) if fresh else []
            await binder.survey(session)  # other agents' models are listed too: a pick of one hands over
            out = self.view.rewrite_result(session, result, opening=True)
            if missing:
                out["_meta"] = {**dict(out.get("_meta") or {}), META_KEY: {"notRestored": missing}}
            return out

    async def _restore_choices(self, session: ProxySession, candidate: Candidate) -> list[dict[str, Any]]:
        """Put back the model and option values the client set on this session when a proxy process that
        did not see them set reopens it (an agent may reopen a session on its defaults), in the order they
        were set. A value the agent no longer offers is reported (logged, and returned for the answer's
        `_meta`), never replaced by a guess."""
        missing = []
        for config_id, value in self.hub.bindings.choices(session.id):
            reason = await self._put_back(session, candidate, config_id, value)
            if reason is not None:
                logger.warning("session %s: %s=%r not restored: %s", session.id, config_id, value, reason)
                missing.append({"configId": config_id, "value": value, "reason": reason})
        return missing

    async def _put_back(self, session: ProxySession, candidate: Candidate, config_id: str, value: Any) -> str | None:
        """Set one remembered value again on the agent; why not, or None when it is set (or was already)."""
        if config_id == "model":
            parsed = split_agent_model(value, self.hub.order)
            if parsed is None or parsed[0] != candidate.agent:
                return f"the session is with agent '{candidate.agent}' now"
            models = candidate.models
            if parsed[1] == models.current:
                return None
            if models.option_id is None or parsed[1] not in models.values:
                return f"agent '{candidate.agent}' no longer offers it"
            params = {"configId": models.option_id, "value": parsed[1]}
        else:
            option = next((o for o in candidate.effective_options or () if o.get("id") == config_id), None)
            if option is None:
                return f"agent '{candidate.agent}' has no option {config_id!r} in this session now"
            if option.get("currentValue") == value:
                return None
            if not offers(option, value):
                return f"agent '{candidate.agent}' no longer offers it"
            params = {"configId": config_id, "value": value}
        try:
            if candidate.legacy and config_id == "mode":
                await candidate.backend.request("session/set_mode",
                                                {"sessionId": candidate.backend_session_id, "modeId": value})
                candidate.set_mode(value)
                return None
            result = await candidate.backend.request("session/set_config_option",
                                                     {"sessionId": candidate.backend_session_id, **params})
        except RequestError as exc:
            return f"agent '{candidate.agent}' refused it: {exc}"
        candidate.absorb(result)
        if config_id == "model":
            session.selected = (candidate.agent, candidate.models.current)
        return None

    def _never_prompted(self, session_id: Any) -> bool:
        """A session offered by several agents and never prompted: it may still move to any of them."""
        if not isinstance(session_id, str) or len(decode_session_id(session_id)) < 2:
            return False
        known = self.hub.sessions.get(session_id)
        if known is not None and known.prompted:
            return False
        return self.hub.bindings.never_prompted(session_id)

    def _reopened(self, params: dict[str, Any]) -> tuple[ProxySession, bool]:
        """The proxy session a load or resume reopens: the one this process knows, or a new one under that id
        (then True: this process has not seen the values the client set on it)."""
        session_id = params["sessionId"]
        session = self.hub.sessions.get(session_id)
        if session is not None and not session.closed:
            return session, False
        session = ProxySession(id=session_id, params={k: v for k, v in params.items() if k != "sessionId"})
        self.hub.sessions[session_id] = session
        return session, True

    async def _reopen_unprompted(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Reopen a session that was never prompted: every agent in its id reopens its own session for it, as
        the probes of session/new did, and the remembered binding (a model picked) is restored, so the client
        can still pick any agent's model (clients such as acpx create a session in one process and pick its
        model in the next). Nothing to replay: no prompt yet."""
        hub = self.hub
        session, fresh = self._reopened(params)
        session_id = session.id
        async with session.lock:
            self.binder.release_all(session, close=False)
            if session.bound is not None:
                session.unbind()
            places = [(agent, backend_id) for agent, backend_id in decode_session_id(session_id)
                      if agent in hub.backends]
            remembered = hub.bindings.lookup(session_id)
            # Only the agent session it was bound to gets the client's MCP servers back.
            outcomes = await asyncio.gather(*(self._reopen_probe(session, method, params, agent, backend_id,
                                                                 grant=remembered == (agent, backend_id))
                                              for agent, backend_id in places))
            session.probes = {outcome.agent: outcome for outcome in outcomes}
            if not session.available:
                session.close()
                failures = session.failures()
                raise RequestError(RESOURCE_NOT_FOUND, f"no agent could reopen session {session_id}: "
                                   + "; ".join(failures.values()), {"sessionId": session_id, "failures": failures})
            bound = session.candidates.get(remembered[0]) if remembered else None
            missing: list[dict[str, Any]] = []
            if bound is not None and bound.backend_session_id == remembered[1]:  # type: ignore[index]
                self.binder.bind_to(session, bound)
                session.selected = (bound.agent, bound.models.current)
                missing = await self._restore_choices(session, bound) if fresh else []
            else:
                first = session.probes[session.available[0]].models
                assert first is not None
                session.selected = (first.agent, first.current)
            result = self.view.rewrite_result(session, {"configOptions": []}, opening=True)
            meta = session.probes_meta()
            return {**result, "_meta": {META_KEY: {**meta, "notRestored": missing} if missing else meta}}

    async def _reopen_probe(self, session: ProxySession, method: str, params: dict[str, Any], agent: str,
                            backend_id: str, *, grant: bool) -> ProbeOutcome:
        """One agent's own session of a never-bound session, reopened and held unbound (a probe again); with
        the client's MCP servers only if ``grant`` (the session was bound to it)."""
        hub = self.hub
        backend = hub.backends[agent]
        candidate: Candidate | None = None
        relay: KernelRelay | None = None
        try:
            async with deadline(hub.start_timeout):
                await backend.ensure_ready(hub.client_init)
                if not backend.supports("load" if method == "session/load" else "resume"):
                    return ProbeOutcome(agent, error=f"agent '{agent}' does not support {method}")
                servers: list[Any] = []
                if grant:
                    servers, relay = await KernelRelay.grant(params.get("mcpServers") or [])
                candidate = self.binder.adopt(session, backend, backend_id, bind=False, granted=grant, relay=relay)
                result = await backend.request(method, _with_servers(params, backend_id, servers))
        except (asyncio.TimeoutError, BackendGone, RequestError) as exc:
            if candidate is not None:
                self.binder.release(candidate, close=False)
            elif relay is not None:
                relay.close_soon()
            reason = f"did not answer within {hub.start_timeout:g} s" if isinstance(exc, asyncio.TimeoutError) \
                else f"refused {method}: {exc}"
            return ProbeOutcome(agent, error=f"agent '{agent}' {reason}")
        candidate.absorb(result)
        hub.note_models(candidate.models)
        self.binder.hidden[agent].add(backend_id)  # deleted at the first prompt unless the session binds to it
        return ProbeOutcome(agent, models=candidate.models)


def _with_servers(params: dict[str, Any], backend_id: str, servers: list[Any]) -> dict[str, Any]:
    """A load or resume request for the agent's own session id, with the MCP servers that agent session gets."""
    out = {**params, "sessionId": backend_id}
    if "mcpServers" in params or servers:
        out["mcpServers"] = servers
    return out


def _encode_cursor(cursors: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursors, sort_keys=True).encode()).decode()


def _decode_cursor(cursor: Any) -> dict[str, str] | None:
    if cursor in (None, ""):
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))
    except (ValueError, binascii.Error):
        raise invalid_params(f"not a cursor this proxy gave out: {cursor!r}", cursor=cursor) from None
    if not isinstance(decoded, dict):
        raise invalid_params(f"not a cursor this proxy gave out: {cursor!r}", cursor=cursor)
    return {str(k): str(v) for k, v in decoded.items()}
