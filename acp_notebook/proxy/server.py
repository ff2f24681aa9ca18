"""The proxy's agent side: sessions, probing, binding to a backend, and forwarding frames both ways."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from acp.connection import Connection
from acp.exceptions import RequestError
from acp.meta import PROTOCOL_VERSION

from .backend import Backend, BackendConfig, BackendGone
from .models import (
    DEFAULT_MODEL,
    META_KEY,
    SEPARATOR,
    AgentModels,
    agent_models,
    legacy_mode_option,
    model_option,
    rewrite_options,
    split_value,
)

__all__ = ["Candidate", "ProxyServer", "ProxySession"]

logger = logging.getLogger(__name__)

HELD_UPDATES_KEPT = 1000
AUTH_REQUIRED = -32000


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("acp-notebook")
    except PackageNotFoundError:
        return "0.0.0"


def invalid_params(message: str, **data: Any) -> RequestError:
    return RequestError(-32602, message, data or None)


@dataclass
class ProbeOutcome:
    """What probing one agent for one session gave: its models, or why it is left out."""

    agent: str
    models: AgentModels | None = None
    error: str | None = None

    def describe(self) -> dict[str, Any]:
        if self.models is not None:
            return {"ok": True, "models": [self.models.prefixed(v) for v in self.models.values]}
        return {"ok": False, "error": self.error}


class Candidate:
    """One backend session a proxy session can use: a probe's, or the one it is bound to."""

    def __init__(self, session: ProxySession, backend: Backend, result: dict[str, Any],
                 backend_session_id: str) -> None:
        self.session = session
        self.backend = backend
        self.agent = backend.name
        self.backend_session_id = backend_session_id
        self.options: list[dict[str, Any]] | None = None
        self.modes: Any = None
        self.held: list[dict[str, Any]] = []  # updates that arrived while the session was not bound to it
        self.released = False
        self.absorb(result)

    def absorb(self, result: Any) -> None:
        """Take the agent's state from a session/new, load, resume or set_config_option result."""
        if not isinstance(result, dict):
            return
        if isinstance(result.get("configOptions"), list):
            self.options = result["configOptions"]
        if result.get("modes") is not None:
            self.modes = result["modes"]
        if self.bound:  # the agent may change its model by itself (a fallback): follow it
            self.session.selected = (self.agent, self.models.current)

    def set_mode(self, mode_id: Any) -> None:
        """Follow a mode change (current_mode_update, or a session/set_mode the agent accepted)."""
        if isinstance(mode_id, str) and isinstance(self.modes, dict):
            self.modes = {**self.modes, "currentModeId": mode_id}

    @property
    def legacy(self) -> bool:
        """The agent sends only the old `modes` field (no configOptions): the proxy shows them as `mode`."""
        return self.options is None and legacy_mode_option(self.modes) is not None

    @property
    def effective_options(self) -> list[dict[str, Any]] | None:
        """The agent's options, or for an agent with only the old `modes` field, the `mode` option built from it."""
        if self.legacy:
            return [legacy_mode_option(self.modes)]  # type: ignore[list-item]
        return self.options

    def mode_ids(self) -> list[str]:
        option = legacy_mode_option(self.modes)
        return [entry["value"] for entry in option["options"]] if option is not None else []

    @property
    def models(self) -> AgentModels:
        return agent_models(self.agent, self.options)

    @property
    def bound(self) -> bool:
        return self.session.bound is self


@dataclass
class ProxySession:
    """A session as the proxy's client knows it; bound to at most one backend session at a time."""

    id: str
    params: dict[str, Any]
    probes: dict[str, ProbeOutcome] = field(default_factory=dict)
    candidates: dict[str, Candidate] = field(default_factory=dict)
    bound: Candidate | None = None
    selected: tuple[str, str] | None = None  # (agent, bare model) picked, or the default
    prompted: bool = False
    closed: bool = False
    cancels: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_backend: tuple[str, str] | None = None  # (agent, backend session id) of the last binding

    @property
    def available(self) -> list[str]:
        return [agent for agent, probe in self.probes.items() if probe.models is not None]

    def failures(self) -> dict[str, str]:
        return {agent: probe.error or "unknown" for agent, probe in self.probes.items() if probe.models is None}


class ProxyServer:
    """Serves one ACP client (on the connection given to `attach`) from several backend agents."""

    def __init__(self, backends: Sequence[BackendConfig], *, cwd: str, probe_timeout: float = 30.0,
                 tracer: Any = None) -> None:
        if not backends:
            raise ValueError("the proxy needs at least one agent")
        self.order = [config.name for config in backends]
        self.probe_timeout = probe_timeout
        self.tracer = tracer
        self.marker = uuid.uuid4().hex[:12]  # tells this process's rewritten options from anyone else's
        self.backends: dict[str, Backend] = {
            config.name: Backend(config, cwd=cwd, on_notification=self._from_backend_notification,
                                 on_request=self._from_backend_request, on_exit=self._backend_exited,
                                 on_frame=self._trace)
            for config in backends
        }
        self.client: Connection | None = None
        self.client_init: dict[str, Any] = {}
        self.sessions: dict[str, ProxySession] = {}
        self._hidden: dict[str, set[str]] = {name: set() for name in self.order}  # probe sessions, per agent
        self._forwarding: set[asyncio.Task[Any]] = set()
        self._counter = 0

    def attach(self, client: Connection) -> None:
        self.client = client

    def _trace(self, link: str, direction: str, message: dict[str, Any]) -> None:
        if self.tracer is not None:
            self.tracer(link, direction, message)

    # =================================================================== client -> proxy
    async def handle_client(self, method: str, params: Any, is_notification: bool) -> Any:
        """The MethodHandler of the connection to the client."""
        params = params if isinstance(params, dict) else {}
        if is_notification:
            await self._client_notification(method, params)
            return None
        handler = self._REQUESTS.get(method)
        if handler is not None:
            return await handler(self, params)
        if method.startswith("_"):
            return await self._extension_request(method, params)
        raise RequestError.method_not_found(method)

    async def _client_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/cancel":
            session = self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
            if session is None:
                return
            session.cancels += 1
            if session.bound is not None:
                await session.bound.backend.notify(method, {**params, "sessionId": session.bound.backend_session_id})
            return
        if method.startswith("_"):
            session = self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
            target = self._extension_target(session) if session is not None else None
            if target is not None:
                await target.backend.notify(method, {**params, "sessionId": target.backend_session_id})
            elif "sessionId" not in params:
                for backend in self._running():
                    await backend.notify(method, params)
        # other notifications ($/cancel_request...) concern this hop only

    # --- initialize, authenticate --------------------------------------------------
    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.client_init = dict(params)
        starts = [asyncio.ensure_future(self._start_quietly(b)) for b in self.backends.values()]
        # Agents that take longer keep starting in the background; session/new waits for them.
        await asyncio.wait(starts, timeout=self.probe_timeout)
        ready = self._running()
        caps = [b.capabilities for b in ready]

        def every(getter: Any) -> bool:
            return bool(caps) and all(bool(getter(c)) for c in caps)

        def any_session(name: str) -> bool:
            return any(b.supports(name) for b in ready)

        prompt = {key: every(lambda c, k=key: (c.get("promptCapabilities") or {}).get(k))
                  for key in ("image", "audio", "embeddedContext")}
        mcp = {key: every(lambda c, k=key: (c.get("mcpCapabilities") or {}).get(k)) for key in ("http", "sse")}
        session_caps: dict[str, Any] = {"list": {}, "close": {}}
        for optional in ("resume", "delete"):
            if any_session(optional):
                session_caps[optional] = {}
        if ready and all(b.supports("additionalDirectories") for b in ready):
            session_caps["additionalDirectories"] = {}
        agent_caps: dict[str, Any] = {
            "loadSession": any_session("load"),
            "promptCapabilities": prompt,
            "mcpCapabilities": mcp,
            "sessionCapabilities": session_caps,
        }
        if any(((b.capabilities.get("auth") or {}).get("logout") is not None) for b in ready):
            agent_caps["auth"] = {"logout": {}}
        auth_methods = []
        for backend in ready:
            for method in backend.init_result.get("authMethods") or []:
                if isinstance(method, dict) and isinstance(method.get("id"), str):
                    auth_methods.append({**method, "id": f"{backend.name}{SEPARATOR}{method['id']}",
                                         "name": f"{backend.name}: {method.get('name') or method['id']}"})
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": agent_caps,
            "authMethods": auth_methods,
            "agentInfo": {"name": "acp-notebook-proxy", "title": f"acp-notebook proxy ({', '.join(self.order)})",
                          "version": _version()},
            "_meta": {META_KEY: {"agents": self._agents_meta()}},
        }

    async def _start_quietly(self, backend: Backend) -> None:
        with contextlib.suppress(BackendGone):
            await backend.ensure_ready(self.client_init)

    def _agents_meta(self) -> dict[str, Any]:
        return {name: {k: v for k, v in backend.describe().items() if k in ("status", "error", "agentInfo")}
                for name, backend in self.backends.items()}

    def _running(self) -> list[Backend]:
        return [b for b in self.backends.values() if b.ready]

    async def _authenticate(self, params: dict[str, Any]) -> Any:
        """`agent:method` -> `authenticate {methodId: method}` on that agent (started first if it is not running)."""
        parsed = split_value(params.get("methodId"), self.order)
        if parsed is not None:
            with contextlib.suppress(BackendGone):
                await self.backends[parsed[0]].ensure_ready(self.client_init)
        valid = [f"{b.name}{SEPARATOR}{m['id']}" for b in self._running() for m in b.auth_methods
                 if isinstance(m.get("id"), str)]
        if parsed is None or f"{parsed[0]}{SEPARATOR}{parsed[1]}" not in valid:
            raise invalid_params(f"unknown auth method {params.get('methodId')!r}; valid: {', '.join(valid) or 'none'}",
                                 valid=valid)
        agent, method_id = parsed
        backend = self.backends[agent]
        result = await self._call(backend, "authenticate", {**params, "methodId": method_id})
        backend.auth_method = method_id
        return result

    async def _logout(self, params: dict[str, Any]) -> Any:
        for backend in self._running():
            if (backend.capabilities.get("auth") or {}).get("logout") is not None:
                await self._call(backend, "logout", params)
        return {}

    async def _call(self, backend: Backend, method: str, params: dict[str, Any]) -> Any:
        """A request to a backend whose failure to run becomes an error naming the agent."""
        try:
            return await backend.request(method, params)
        except BackendGone as exc:
            raise exc.to_request_error() from None

    # --- session/new: probe every agent --------------------------------------------
    async def _new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        self._counter += 1
        session = ProxySession(id=f"proxy-{self._counter}-{uuid.uuid4().hex[:8]}", params=dict(params))
        self.sessions[session.id] = session
        outcomes = await asyncio.gather(*(self._probe(session, b) for b in self.backends.values()))
        session.probes = {outcome.agent: outcome for outcome in outcomes}
        available = session.available
        if available:
            first = session.probes[available[0]].models
            assert first is not None
            session.selected = (first.agent, first.current)
        result: dict[str, Any] = {"sessionId": session.id}
        if available:
            result["configOptions"] = [self._unbound_option(session)]
        meta: dict[str, Any] = {"agents": {name: outcome.describe() for name, outcome in session.probes.items()}}
        failed = session.failures()
        if failed:
            meta["failed"] = failed
        result["_meta"] = {META_KEY: meta}
        return result

    async def _probe(self, session: ProxySession, backend: Backend) -> ProbeOutcome:
        stage = "initialize"
        try:
            async with _deadline(self.probe_timeout):
                await backend.ensure_ready(self.client_init)
                stage = "session/new"
                candidate = await self._open_backend_session(session, backend, bind=False)
        except asyncio.TimeoutError:
            return ProbeOutcome(backend.name, error=f"agent '{backend.name}' did not answer {stage} within "
                                                    f"{self.probe_timeout:g} s")
        except BackendGone as exc:
            return ProbeOutcome(backend.name, error=str(exc))
        except RequestError as exc:
            hint = self._auth_hint(backend) if exc.code == AUTH_REQUIRED else ""
            return ProbeOutcome(backend.name, error=f"agent '{backend.name}' refused session/new: {exc}{hint}")
        self._hidden[backend.name].add(candidate.backend_session_id)
        return ProbeOutcome(backend.name, models=candidate.models)

    def _auth_hint(self, backend: Backend) -> str:
        """What an agent that wants authentication needs, with the proxy's `agent:method` ids."""
        ids = [f"{backend.name}{SEPARATOR}{m.get('id')}" for m in backend.auth_methods]
        needs = ""
        if backend.spec is not None and (backend.spec.login_hint or backend.spec.key_vars):
            needs = f"{backend.spec.needs_key_message()}; or "
        return f" ({needs}authenticate with one of: {', '.join(ids) or 'no advertised method'})"

    async def _open_backend_session(self, session: ProxySession, backend: Backend, *, bind: bool) -> Candidate:
        """A new session on the agent, in the client's cwd, routed to `session` (bound to it if `bind`)."""
        result = await backend.request("session/new", {"mcpServers": [], **session.params})
        backend_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(backend_id, str):
            raise BackendGone(f"agent '{backend.name}' answered session/new without a sessionId", agent=backend.name)
        candidate = Candidate(session, backend, result, backend_id)
        earlier = backend.register(candidate)
        if session.closed:
            backend.unregister(candidate)
            return candidate
        replaced = session.candidates.get(backend.name)
        if replaced is not None and replaced is not candidate:
            self._release(replaced, close=True)
        session.candidates[backend.name] = candidate
        if bind:
            self._bind_to(session, candidate)
        for method, params in earlier:  # what the agent sent before its answer, now that we know whose it is
            self._deliver(candidate, method, params)
        return candidate

    def _unbound_option(self, session: ProxySession) -> dict[str, Any]:
        groups = [session.probes[a].models for a in session.available]
        agent, bare = session.selected or (session.available[0], DEFAULT_MODEL)
        return model_option([g for g in groups if g is not None], f"{agent}{SEPARATOR}{bare}", marker=self.marker)

    def _client_options(self, session: ProxySession) -> list[dict[str, Any]]:
        """The complete option list the client should see for this session now."""
        candidate = session.bound
        if candidate is None:
            return [self._unbound_option(session)] if session.available else []
        others: list[AgentModels] = []
        if not session.prompted:  # other agents may still be picked: keep their groups in the list
            for agent in session.available:
                if agent != candidate.agent:
                    other = session.candidates.get(agent)
                    models = other.models if other is not None else session.probes[agent].models
                    if models is not None:
                        others.append(models)
        return rewrite_options(candidate.effective_options, candidate.agent, marker=self.marker, others=others,
                               order=self.order)

    def _valid_models(self, session: ProxySession) -> list[str]:
        option = next((o for o in self._client_options(session) if o.get("id") == "model"), None)
        if option is None:
            return []
        return [entry["value"] for group in option["options"] for entry in group["options"]]

    # --- binding ---------------------------------------------------------------------
    def _bind_to(self, session: ProxySession, candidate: Candidate) -> None:
        """From here on the agent's frames for this session reach the client, options rewritten."""
        session.bound = candidate
        session.last_backend = (candidate.agent, candidate.backend_session_id)
        self._hidden[candidate.agent].discard(candidate.backend_session_id)
        held, candidate.held = candidate.held, []
        for params in held:
            self._forward_update(candidate, params)

    async def _bind(self, session: ProxySession, agent: str, bare: str) -> Candidate:
        backend = self.backends[agent]
        previous = session.bound
        candidate = session.candidates.get(agent)
        try:
            if candidate is None or candidate.released or not backend.ready or \
                    backend.routes.get(candidate.backend_session_id) is not candidate:
                await backend.ensure_ready(self.client_init)
                candidate = await self._open_backend_session(session, backend, bind=True)
            else:
                self._bind_to(session, candidate)
            models = candidate.models
            if models.option_id is not None and bare != models.current:
                result = await backend.request(
                    "session/set_config_option",
                    {"sessionId": candidate.backend_session_id, "configId": models.option_id, "value": bare},
                )
                candidate.absorb(result)
        except BackendGone as exc:
            self._restore(session, previous)
            raise exc.to_request_error(f"cannot bind to agent '{agent}': {exc}") from None
        except BaseException:
            self._restore(session, previous)
            raise
        session.selected = (agent, bare)
        return candidate

    def _restore(self, session: ProxySession, previous: Candidate | None) -> None:
        if previous is not None and not previous.released:
            session.bound = previous
        elif session.bound is not None and session.bound is not previous:
            session.bound = None

    def _release(self, candidate: Candidate, *, close: bool) -> None:
        """Stop routing a backend session; close it on the agent when the agent can."""
        if candidate.released:
            return
        candidate.released = True
        backend = candidate.backend
        backend.unregister(candidate)
        if candidate.session.candidates.get(candidate.agent) is candidate:
            del candidate.session.candidates[candidate.agent]
        if close and backend.ready and backend.supports("close"):
            self._spawn(self._quiet(backend.request("session/close", {"sessionId": candidate.backend_session_id})))

    async def _quiet(self, awaitable: Any) -> None:
        with contextlib.suppress(BackendGone, RequestError, ConnectionError):
            await awaitable

    def _session(self, params: dict[str, Any]) -> ProxySession:
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.closed:
            known = [s.id for s in self.sessions.values() if not s.closed]
            raise invalid_params(f"unknown session id {session_id!r}; open sessions: {', '.join(known) or 'none'}",
                                 sessionId=session_id)
        return session

    # --- config options ------------------------------------------------------------------
    async def _set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
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
            result = await self._call(candidate.backend, "session/set_config_option",
                                      {**params, "sessionId": candidate.backend_session_id})
            candidate.absorb(result)
            return self._rewrite_result(session, result)

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
        await self._call(candidate.backend, "session/set_mode", forwarded)
        candidate.set_mode(value)
        return {"configOptions": self._client_options(session)}

    async def _set_model(self, session: ProxySession, params: dict[str, Any]) -> dict[str, Any]:
        value = params.get("value")
        valid = self._valid_models(session)
        parsed = split_value(value, self.order)
        if parsed is None or not isinstance(value, str) or value not in valid:
            bound = session.bound
            if parsed is not None and bound is not None and session.prompted and parsed[0] != bound.agent \
                    and parsed[0] in session.available:
                raise self._rebind_refused(session, value)  # type: ignore[arg-type]
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
                result = await self._call(candidate.backend, "session/set_config_option", forwarded)
                candidate.absorb(result)
                session.selected = (agent, bare)
                return self._rewrite_result(session, result)
            return {"configOptions": self._client_options(session)}
        if candidate is not None and session.prompted:
            raise self._rebind_refused(session, value)
        candidate = await self._bind(session, agent, bare)
        return {"configOptions": self._client_options(session)}

    def _rebind_refused(self, session: ProxySession, value: str) -> RequestError:
        bound = session.bound
        assert bound is not None
        valid = self._valid_models(session)
        return invalid_params(
            f"session {session.id} is bound to agent '{bound.agent}' since its first prompt, so {value!r} "
            f"(agent '{value.partition(SEPARATOR)[0]}') cannot be picked here: start a new session to use it. "
            f"Valid ids in this session: {', '.join(valid)}",
            value=value, valid=valid, boundAgent=bound.agent)

    def _rewrite_result(self, session: ProxySession, result: Any) -> dict[str, Any]:
        out = dict(result) if isinstance(result, dict) else {}
        out.pop("models", None)  # the old `models` field: the model option replaces it
        if isinstance(out.get("configOptions"), list) or session.bound is not None:
            out["configOptions"] = self._client_options(session)
        return out

    async def _set_mode(self, params: dict[str, Any]) -> Any:
        session = self._session(params)
        candidate = session.bound
        if candidate is None:
            raise invalid_params(f"session {session.id} is not bound to an agent yet; pick a model or send a "
                                 "prompt first", sessionId=session.id)
        result = await self._call(candidate.backend, "session/set_mode",
                                  {**params, "sessionId": candidate.backend_session_id})
        if candidate.legacy and candidate.modes.get("currentModeId") != params.get("modeId"):
            candidate.set_mode(params.get("modeId"))
            self._send_options_update(session)  # the `mode` option the proxy shows follows
        return result

    # --- prompt --------------------------------------------------------------------------
    async def _prompt(self, params: dict[str, Any]) -> Any:
        session = self._session(params)
        cancels = session.cancels
        async with session.lock:
            first = not session.prompted
            if session.bound is None:
                if session.selected is None:
                    raise self._nothing_to_bind(session)
                agent, bare = session.selected
                await self._bind(session, agent, bare)
            candidate = session.bound
            assert candidate is not None
            session.prompted = True
            if first:
                # The client learns the bound agent's options (and that other agents are off the table).
                self._send_options_update(session)
                for other in list(session.candidates.values()):
                    if other is not candidate:
                        self._release(other, close=True)
        if session.cancels != cancels:
            return {"stopReason": "cancelled"}  # cancelled while the session was being bound
        try:
            result = await candidate.backend.request(
                "session/prompt", {**params, "sessionId": candidate.backend_session_id})
        except BackendGone as exc:
            raise exc.to_request_error(f"the turn failed: {exc}") from None
        return result

    def _nothing_to_bind(self, session: ProxySession) -> RequestError:
        failures = session.failures() or {name: "not probed" for name in self.order}
        lines = "; ".join(f"{agent}: {error}" for agent, error in failures.items())
        return RequestError(-32603, f"no agent behind this proxy is available for session {session.id}. {lines}",
                            {"failures": failures})

    def _send_options_update(self, session: ProxySession) -> None:
        options = self._client_options(session)
        if options:
            self._send_to_client("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "config_option_update", "configOptions": options}})

    # --- close, list, load, resume, delete ----------------------------------------------------
    async def _close_session(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        session.closed = True
        for candidate in list(session.candidates.values()):
            self._release(candidate, close=True)
        if session.bound is not None:
            self._release(session.bound, close=True)
        session.bound = None
        return {}

    async def _list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        cursors = _decode_cursor(params.get("cursor"))
        listed: list[dict[str, Any]] = []
        following: dict[str, str] = {}
        for backend in self._running():
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
                if not isinstance(info, dict) or not isinstance(info.get("sessionId"), str):
                    continue
                backend_id = info["sessionId"]
                if backend_id in self._hidden[backend.name]:
                    continue  # a probe's session, never used by the client
                entry = dict(info)
                entry["sessionId"] = self._client_id_for(backend.name, backend_id)
                meta = dict(entry.get("_meta") or {})
                meta[META_KEY] = {"agent": backend.name, "sessionId": backend_id}
                entry["_meta"] = meta
                listed.append(entry)
            if (result or {}).get("nextCursor"):
                following[backend.name] = result["nextCursor"]
        out: dict[str, Any] = {"sessions": listed}
        if following:
            out["nextCursor"] = _encode_cursor(following)
        return out

    def _client_id_for(self, agent: str, backend_id: str) -> str:
        for session in self.sessions.values():
            if session.last_backend == (agent, backend_id):
                return session.id
        return f"{agent}{SEPARATOR}{backend_id}"  # sessions from before this proxy ran

    def _locate(self, session_id: Any) -> tuple[str, str]:
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None and session.last_backend is not None:
            return session.last_backend
        parsed = split_value(session_id, self.order)
        if parsed is not None:
            return parsed
        raise invalid_params(f"unknown session id {session_id!r}: the proxy knows the sessions it opened and "
                             "those session/list shows (agent:id)", sessionId=session_id)

    async def _reopen(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """session/load or session/resume on the agent that owns the session."""
        agent, backend_id = self._locate(params.get("sessionId"))
        backend = self.backends[agent]
        try:
            await backend.ensure_ready(self.client_init)
        except BackendGone as exc:
            raise exc.to_request_error() from None
        capability = "load" if method == "session/load" else "resume"
        if not backend.supports(capability):
            raise RequestError(-32601, f"agent '{agent}' does not support {method}", {"agent": agent})
        session_id = params["sessionId"]
        session = self.sessions.get(session_id)
        if session is None or session.closed:
            session = ProxySession(id=session_id, params={k: v for k, v in params.items() if k != "sessionId"})
            self.sessions[session_id] = session
        session.closed = False
        async with session.lock:
            previous = session.bound
            for candidate in list(session.candidates.values()):
                self._release(candidate, close=False)
            candidate = Candidate(session, backend, {}, backend_id)
            earlier = backend.register(candidate)
            session.candidates[agent] = candidate
            session.prompted = True  # it has a history with this agent: other agents are off the table
            self._bind_to(session, candidate)
            for held_method, held in earlier:
                self._deliver(candidate, held_method, held)
            try:
                result = await backend.request(method, {**params, "sessionId": backend_id})
            except BackendGone as exc:
                self._release(candidate, close=False)
                session.bound = None
                raise exc.to_request_error() from None
            except BaseException:
                self._release(candidate, close=False)
                session.bound = previous if previous is not None and not previous.released else None
                raise
            candidate.absorb(result)
            models = candidate.models
            session.selected = (agent, models.current)
            session.probes = {agent: ProbeOutcome(agent, models=models)}
            return self._rewrite_result(session, result)

    async def _load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen("session/load", params)

    async def _resume_session(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen("session/resume", params)

    async def _delete_session(self, params: dict[str, Any]) -> Any:
        agent, backend_id = self._locate(params.get("sessionId"))
        backend = self.backends[agent]
        if not backend.supports("delete"):
            raise RequestError(-32601, f"agent '{agent}' does not support session/delete", {"agent": agent})
        result = await self._call(backend, "session/delete", {**params, "sessionId": backend_id})
        session = self.sessions.pop(params["sessionId"], None)
        if session is not None:
            session.closed = True
            for candidate in list(session.candidates.values()):
                self._release(candidate, close=False)
        return result

    # --- extensions -----------------------------------------------------------------------
    def _extension_target(self, session: ProxySession) -> Candidate | None:
        if session.bound is not None:
            return session.bound
        if session.selected is not None:
            return session.candidates.get(session.selected[0])
        return None

    async def _extension_request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "_proxy/status":
            return {"agents": {name: backend.describe() for name, backend in self.backends.items()},
                    "sessions": {s.id: {"agent": s.bound.agent if s.bound else None,
                                        "backendSessionId": s.bound.backend_session_id if s.bound else None,
                                        "prompted": s.prompted}
                                 for s in self.sessions.values() if not s.closed}}
        if "sessionId" in params:
            session = self._session(params)
            target = self._extension_target(session)
            if target is None:
                raise invalid_params(f"session {session.id} has no agent to send {method} to", sessionId=session.id)
            return await self._call(target.backend, method, {**params, "sessionId": target.backend_session_id})
        # No session: the first running agent that knows the method answers.
        for backend in self._running():
            try:
                return await backend.request(method, params)
            except RequestError as exc:
                if exc.code != -32601:
                    raise
            except BackendGone:
                continue
        raise RequestError.method_not_found(method)

    _REQUESTS: dict[str, Any] = {
        "initialize": _initialize,
        "authenticate": _authenticate,
        "logout": _logout,
        "session/new": _new_session,
        "session/load": _load_session,
        "session/resume": _resume_session,
        "session/close": _close_session,
        "session/delete": _delete_session,
        "session/list": _list_sessions,
        "session/set_config_option": _set_config_option,
        "session/set_mode": _set_mode,
        "session/prompt": _prompt,
    }

    # =================================================================== backend -> proxy
    def _from_backend_notification(self, backend: Backend, method: str, params: dict[str, Any]) -> None:
        """Runs in the backend connection's receive loop, in wire order; forwards at once."""
        session_id = params.get("sessionId")
        candidate = backend.routes.get(session_id) if isinstance(session_id, str) else None
        if candidate is not None:
            self._deliver(candidate, method, params)
        elif method == "session/update" and isinstance(session_id, str):
            backend.hold_orphan(session_id, method, params)  # its session/new answer is still on the way
        elif "sessionId" not in params:
            self._send_to_client(method, params)  # session-less (extension) notifications

    def _deliver(self, candidate: Candidate, method: str, params: dict[str, Any]) -> None:
        if candidate.released or candidate.session.closed:
            return
        if method != "session/update":
            if candidate.bound:
                self._send_to_client(method, {**params, "sessionId": candidate.session.id})
            return
        update = params.get("update")
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if kind == "config_option_update":
            candidate.absorb(update)
        mode_moved = False
        if kind == "current_mode_update":
            assert isinstance(update, dict)
            mode_moved = candidate.legacy and candidate.modes.get("currentModeId") != update.get("currentModeId")
            candidate.set_mode(update.get("currentModeId"))
        if candidate.bound:
            self._forward_update(candidate, params)
            if mode_moved:  # the agent changed its mode by itself: the `mode` option the proxy shows follows
                self._send_options_update(candidate.session)
        elif not (isinstance(update, dict) and update.get("sessionUpdate") == "config_option_update"):
            if len(candidate.held) < HELD_UPDATES_KEPT:
                candidate.held.append(params)

    def _forward_update(self, candidate: Candidate, params: dict[str, Any]) -> None:
        out = {**params, "sessionId": candidate.session.id}
        update = params.get("update")
        if isinstance(update, dict) and update.get("sessionUpdate") == "config_option_update":
            out["update"] = {**update, "configOptions": self._client_options(candidate.session)}
        self._send_to_client("session/update", out)

    async def _from_backend_request(self, backend: Backend, method: str, params: dict[str, Any]) -> Any:
        """Permission, fs/*, terminal/*, elicitation and extension requests: to the client, ids translated."""
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            candidate = backend.routes.get(session_id)
            if candidate is None or not candidate.bound:
                raise invalid_params(f"session {session_id!r} of agent '{backend.name}' is not in use by the client",
                                     sessionId=session_id)
            params = {**params, "sessionId": candidate.session.id}
        if self.client is None:
            raise RequestError.internal_error({"details": "no client is connected"})
        try:
            return await self.client.send_request(method, params)
        except ConnectionError:
            raise RequestError.internal_error({"details": "the client disconnected"}) from None

    def _backend_exited(self, backend: Backend) -> None:
        """The agent died: sessions bound to it become unbound (the next prompt binds them again)."""
        for candidate in backend.forget_sessions():
            candidate.released = True
            session = candidate.session
            if session.candidates.get(candidate.agent) is candidate:
                del session.candidates[candidate.agent]
            if session.bound is candidate and not session.closed:
                session.bound = None
                session.prompted = False
                self._send_options_update(session)

    # =================================================================== plumbing
    def _send_to_client(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification to the client now, so notifications keep the order they are queued in.

        The SDK's send enqueues its frame in the first step of the task, and tasks take their
        first step in creation order: frames leave in the order of these calls, and before any
        response computed after them."""
        if self.client is None:
            return
        self._spawn(self._send_quietly(method, params))

    async def _send_quietly(self, method: str, params: dict[str, Any]) -> None:
        assert self.client is not None
        with contextlib.suppress(ConnectionError):
            await self.client.send_notification(method, params)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._forwarding.add(task)
        task.add_done_callback(self._forwarding.discard)

    async def shutdown(self) -> None:
        await asyncio.gather(*(backend.shutdown() for backend in self.backends.values()), return_exceptions=True)


@contextlib.asynccontextmanager
async def _deadline(seconds: float) -> Any:
    """`asyncio.timeout` for Python 3.10 too: cancels the body after `seconds`, raising TimeoutError."""
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        yield
    except asyncio.CancelledError:
        if expired:
            raise asyncio.TimeoutError from None
        raise
    finally:
        handle.cancel()


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
