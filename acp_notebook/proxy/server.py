"""The proxy's agent side: sessions, probing, binding to a backend, and forwarding frames both ways.

Threads: a proxy runs on one asyncio loop (its process's main loop, or an in-memory transport's), and
everything here (the session table, bindings, probes, pending forwards) is read and mutated on that
loop alone; backends call back on it too (only their stderr echo has a thread of its own)."""

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
from pathlib import Path
from typing import Any

from acp.connection import Connection
from acp.exceptions import RequestError

from .._protocol import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION,
    RESOURCE_NOT_FOUND,
    client_version,
    join_agent_model,
    split_agent_model,
    unknown_session,
)
from .backend import DEFAULT_REQUEST_TIMEOUT, Backend, BackendConfig, BackendGone
from .ids import BindingStore, decode_session_id, encode_session_id
from .models import (
    DEFAULT_MODEL,
    META_KEY,
    AgentModels,
    agent_models,
    legacy_mode_option,
    model_option,
    modes_from_options,
    modes_option_id,
    rewrite_options,
)

__all__ = ["Candidate", "ProxyServer", "ProxySession"]

logger = logging.getLogger(__name__)

HELD_UPDATES_KEPT = 1000
# How long session/new (and initialize) wait for the agents; slower ones join later.
DEFAULT_PROBE_TIMEOUT = 5.0
# How long an agent may take to start and open its first session before it is left out.
DEFAULT_START_TIMEOUT = 60.0


def invalid_params(message: str, **data: Any) -> RequestError:
    return RequestError(INVALID_PARAMS, message, data or None)


def unknown_session_error(session_id: Any, known: list[str], how: str = "") -> RequestError:
    return RequestError(*unknown_session(session_id, known, how))


@dataclass
class ProbeOutcome:
    """What probing one agent for one session gave: its models, or why it is left out."""

    agent: str
    models: AgentModels | None = None
    error: str | None = None
    pending: bool = False  # still starting when session/new answered; it may join later

    def describe(self) -> dict[str, Any]:
        if self.models is not None:
            return {"ok": True, "models": [self.models.prefixed(v) for v in self.models.values]}
        return {"ok": False, "error": self.error, **({"pending": True} if self.pending else {})}


class Candidate:
    """One backend session a proxy session can use: a probe's, or the one it is bound to."""

    def __init__(self, session: ProxySession, backend: Backend, result: dict[str, Any],
                 backend_session_id: str) -> None:
        self.session = session
        self.backend = backend
        self.agent = backend.name
        self.backend_session_id = backend_session_id
        self.options: list[dict[str, Any]] | None = None
        # agent_models(self.options), kept until the list is replaced (absorb swaps it whole, never edits it):
        # every set_config_option and option update through the proxy reads it two or three times.
        self._models: tuple[Any, AgentModels] | None = None
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
        cached = self._models
        if cached is None or cached[0] is not self.options:
            cached = self._models = (self.options, agent_models(self.agent, self.options))
        return cached[1]

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
    shown_mode: str | None = None  # the mode clients that only know the old `modes` field were told

    @property
    def available(self) -> list[str]:
        return [agent for agent, probe in self.probes.items() if probe.models is not None]

    def failures(self) -> dict[str, str]:
        return {agent: probe.error or "unknown" for agent, probe in self.probes.items()
                if probe.models is None and not probe.pending}


class ProxyServer:
    """Serves one ACP client (on the connection given to `attach`) from several backend agents."""

    def __init__(self, backends: Sequence[BackendConfig], *, cwd: str, probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
                 start_timeout: float = DEFAULT_START_TIMEOUT, request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 tracer: Any = None, state_dir: Path | None = None) -> None:
        """``probe_timeout``: how long initialize and session/new wait for the agents (slower ones join
        the session's model list later); ``start_timeout``: how long an agent may take to start and
        open a session before it is left out; ``request_timeout``: every other request to an agent
        (prompts excepted: the client ends those with session/cancel); ``state_dir``: where the bindings
        of sessions are remembered for later proxy processes (see ids.py)."""
        if not backends:
            raise ValueError("the proxy needs at least one agent")
        self.order = [config.name for config in backends]
        self.probe_timeout = probe_timeout
        self.start_timeout = start_timeout
        self.tracer = tracer
        self.marker = uuid.uuid4().hex[:12]  # tells this process's rewritten options from anyone else's
        self.backends: dict[str, Backend] = {
            config.name: Backend(config, cwd=cwd, on_notification=self._from_backend_notification,
                                 on_request=self._from_backend_request, on_exit=self._backend_exited,
                                 on_frame=self._trace, start_timeout=start_timeout, request_timeout=request_timeout)
            for config in backends
        }
        self.client: Connection | None = None
        self.client_init: dict[str, Any] = {}
        self.sessions: dict[str, ProxySession] = {}
        self._hidden: dict[str, set[str]] = {name: set() for name in self.order}  # probe sessions, per agent
        self._forwarding: set[asyncio.Task[Any]] = set()
        self.bindings = BindingStore(state_dir)

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
                    auth_methods.append({**method, "id": join_agent_model(backend.name, method["id"]),
                                         "name": f"{backend.name}: {method.get('name') or method['id']}"})
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": agent_caps,
            "authMethods": auth_methods,
            "agentInfo": {"name": "acp-notebook-proxy", "title": f"acp-notebook proxy ({', '.join(self.order)})",
                          "version": client_version()},
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
        parsed = split_agent_model(params.get("methodId"), self.order)
        if parsed is not None:
            with contextlib.suppress(BackendGone):
                await self.backends[parsed[0]].ensure_ready(self.client_init)
        valid = [join_agent_model(b.name, m["id"]) for b in self._running() for m in b.auth_methods
                 if isinstance(m.get("id"), str)]
        if parsed is None or join_agent_model(*parsed) not in valid:
            raise invalid_params(f"unknown auth method {params.get('methodId')!r}; valid: {', '.join(valid) or 'none'}",
                                 valid=valid)
        agent, method_id = parsed
        try:
            return await self.backends[agent].authenticate(method_id, params)
        except BackendGone as exc:
            raise exc.to_request_error() from None

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
        """Probe every agent; answer within the probe deadline with those that are ready.

        An agent still starting then keeps going in the background and, once it has a session,
        joins this session's model list by a config_option_update (while the session is not yet
        tied to an agent by its first prompt)."""
        session = ProxySession(id=f"probing-{uuid.uuid4().hex}", params=dict(params))
        self.sessions[session.id] = session
        probes = {asyncio.ensure_future(self._probe(session, b)): b.name for b in self.backends.values()}
        done, pending = await asyncio.wait(probes, timeout=self.probe_timeout)
        self._name(session)
        outcomes = {outcome.agent: outcome for outcome in (task.result() for task in done)}
        for task in pending:
            name = probes[task]
            outcomes[name] = ProbeOutcome(name, error=f"agent '{name}' did not answer within {self.probe_timeout:g} s; "
                                                      "it joins this session's model list when it is ready",
                                          pending=True)
            task.add_done_callback(lambda finished, s=session: self._late_probe(s, finished))
        session.probes = {name: outcomes[name] for name in self.order}
        for outcome in session.probes.values():
            if outcome.error:
                logger.warning("session/new %s: %s", session.id, outcome.error)
        if len(decode_session_id(session.id)) > 1:
            self.bindings.record_unbound(session.id)  # a later proxy can then offer all of them again
        available = session.available
        if available:
            first = session.probes[available[0]].models
            assert first is not None
            session.selected = (first.agent, first.current)
        result: dict[str, Any] = {"sessionId": session.id}
        if available:
            result["configOptions"] = [self._unbound_option(session)]
        result["_meta"] = {META_KEY: self._probes_meta(session)}
        return result

    def _name(self, session: ProxySession) -> None:
        """The session's final id: the agents' own session ids it can be reopened from (see ids.py)."""
        candidates = [(agent, session.candidates[agent].backend_session_id) for agent in self.order
                      if agent in session.candidates]
        del self.sessions[session.id]
        session.id = encode_session_id(candidates) if candidates else f"acpnb-proxy-{uuid.uuid4().hex}"
        self.sessions[session.id] = session

    def _probes_meta(self, session: ProxySession) -> dict[str, Any]:
        meta: dict[str, Any] = {"agents": {name: outcome.describe() for name, outcome in session.probes.items()}}
        failed = session.failures()
        if failed:
            meta["failed"] = failed
        waiting = [name for name, outcome in session.probes.items() if outcome.pending]
        if waiting:
            meta["pending"] = waiting
        return meta

    def _late_probe(self, session: ProxySession, task: asyncio.Future[ProbeOutcome]) -> None:
        """A probe that outlived session/new's deadline has ended: add the agent, or name why not."""
        if task.cancelled():
            return
        outcome = task.result()
        session.probes = {name: outcome if name == outcome.agent else probe for name, probe in session.probes.items()}
        if outcome.models is None:
            logger.warning("agent '%s' is left out of session %s: %s", outcome.agent, session.id, outcome.error)
            return
        logger.info("agent '%s' joined session %s after the probe deadline", outcome.agent, session.id)
        if session.closed or session.prompted:
            candidate = session.candidates.get(outcome.agent)
            if candidate is not None and candidate is not session.bound:
                self._release(candidate, close=True)  # the session is tied to another agent by now
            return
        if session.selected is None:
            session.selected = (outcome.agent, outcome.models.current)
        self._send_options_update(session)

    async def _probe(self, session: ProxySession, backend: Backend) -> ProbeOutcome:
        stage = "initialize"
        try:
            async with _deadline(self.start_timeout):
                await backend.ensure_ready(self.client_init)
                stage = "session/new"
                candidate = await self._open_backend_session(session, backend, bind=False)
        except asyncio.TimeoutError:
            return ProbeOutcome(backend.name, error=f"agent '{backend.name}' did not answer {stage} within "
                                                    f"{self.start_timeout:g} s")
        except BackendGone as exc:
            return ProbeOutcome(backend.name, error=str(exc))
        except RequestError as exc:
            hint = self._auth_hint(backend) if exc.code == AUTH_REQUIRED else ""
            return ProbeOutcome(backend.name, error=f"agent '{backend.name}' refused session/new: {exc}{hint}")
        self._hidden[backend.name].add(candidate.backend_session_id)
        return ProbeOutcome(backend.name, models=candidate.models)

    def _auth_hint(self, backend: Backend) -> str:
        """What an agent that wants authentication needs, with the proxy's `agent:method` ids."""
        ids = [join_agent_model(backend.name, str(m.get("id"))) for m in backend.auth_methods]
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
        return model_option([g for g in groups if g is not None], join_agent_model(agent, bare), marker=self.marker)

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
        options = candidate.effective_options
        return rewrite_options(options, candidate.agent, marker=self.marker, others=others, order=self.order,
                               models=candidate.models if options is candidate.options else None)

    def _valid_models(self, session: ProxySession) -> list[str]:
        option = next((o for o in self._client_options(session) if o.get("id") == "model"), None)
        if option is None:
            return []
        return [entry["value"] for group in option["options"] for entry in group["options"]]

    # --- binding ---------------------------------------------------------------------
    def _bind_to(self, session: ProxySession, candidate: Candidate) -> None:
        """From here on the agent's frames for this session reach the client, options rewritten."""
        previous = session.bound
        if previous is not None and previous is not candidate and not session.prompted:
            # Moved to another agent before the first prompt: the old one is a probe again (deleted at that prompt).
            self._hidden[previous.agent].add(previous.backend_session_id)
        session.bound = candidate
        if session.last_backend != (candidate.agent, candidate.backend_session_id):
            self.bindings.record(session.id, candidate.agent, candidate.backend_session_id)
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
            self._hidden[previous.agent].discard(previous.backend_session_id)  # hidden by the failed move
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
        if not close or not backend.ready:
            return
        backend_id = candidate.backend_session_id
        if backend_id in self._hidden[candidate.agent] and backend.supports("delete"):
            # A probe's session the client never used: leave no trace of it in the agent's own store.
            self._hidden[candidate.agent].discard(backend_id)
            self._spawn(self._quiet(backend.request("session/delete", {"sessionId": backend_id})))
        elif backend.supports("close"):
            self._spawn(self._quiet(backend.request("session/close", {"sessionId": backend_id})))

    async def _quiet(self, awaitable: Any) -> None:
        with contextlib.suppress(BackendGone, RequestError, ConnectionError):
            await awaitable

    def _session(self, params: dict[str, Any]) -> ProxySession:
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.closed:
            raise unknown_session_error(session_id, [s.id for s in self.sessions.values() if not s.closed])
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
        parsed = split_agent_model(value, self.order)
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
            f"(agent '{split_agent_model(value)[0]}') cannot be picked here: start a new session to use it. "
            f"Valid ids in this session: {', '.join(valid)}",
            value=value, valid=valid, boundAgent=bound.agent)

    def _rewrite_result(self, session: ProxySession, result: Any, *, opening: bool = False) -> dict[str, Any]:
        """An agent's answer as the client sees it. ``opening`` (new/load/resume): it also carries the old
        `modes` field, in step with the mode option, for clients that know only that field."""
        out = dict(result) if isinstance(result, dict) else {}
        out.pop("models", None)  # the old `models` field: the model option replaces it
        if isinstance(out.get("configOptions"), list) or session.bound is not None:
            out["configOptions"] = self._client_options(session)
            if opening and "modes" not in out:
                modes = modes_from_options(out["configOptions"])
                if modes is not None:
                    out["modes"] = modes
            self._follow_mode(session, out["configOptions"], announce=not opening)
        return out

    def _follow_mode(self, session: ProxySession, options: list[dict[str, Any]], *, announce: bool = True) -> None:
        """Tell clients that only know `modes` when the mode option's value changed (current_mode_update)."""
        if session.bound is not None and session.bound.legacy:
            return  # such an agent sends current_mode_update itself
        modes = modes_from_options(options)
        current = modes["currentModeId"] if modes is not None else None
        if current is None or current == session.shown_mode:
            return
        before, session.shown_mode = session.shown_mode, current
        if announce and before is not None:
            self._send_to_client("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "current_mode_update", "currentModeId": current}})

    async def _set_mode(self, params: dict[str, Any]) -> Any:
        session = self._session(params)
        candidate = session.bound
        if candidate is None:
            raise invalid_params(f"session {session.id} is not bound to an agent yet; pick a model or send a "
                                 "prompt first", sessionId=session.id)
        mode_option = modes_option_id(candidate.effective_options)
        if not candidate.legacy and mode_option is not None:
            # Older clients pick modes with session/set_mode: it becomes the mode option's set_config_option.
            answer = await self._set_config_option({"sessionId": session.id, "configId": mode_option,
                                                    "value": params.get("modeId")})
            await self._push_options_now(session, answer["configOptions"])  # config-option clients follow too
            return {}
        result = await self._call(candidate.backend, "session/set_mode",
                                  {**params, "sessionId": candidate.backend_session_id})
        if candidate.legacy and candidate.modes.get("currentModeId") != params.get("modeId"):
            candidate.set_mode(params.get("modeId"))
            self._send_options_update(session)  # the `mode` option the proxy shows follows
        return result

    async def _set_model_unstable(self, params: dict[str, Any]) -> Any:
        """The unstable session/set_model of older clients: the `model` option's set_config_option (`agent:model`
        ids), so they switch models instead of silently running on the default one."""
        options = await self._set_config_option({"sessionId": params.get("sessionId"), "configId": "model",
                                                 "value": params.get("modelId")})
        await self._push_options_now(self._session(params), options["configOptions"])
        return {}

    async def _push_options_now(self, session: ProxySession, options: list[dict[str, Any]]) -> None:
        """The option list as a config_option_update, on the wire before the answer being computed."""
        if self.client is not None:
            await self._send_quietly("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "config_option_update", "configOptions": options}})

    def _push_options(self, session: ProxySession, options: list[dict[str, Any]]) -> None:
        self._send_to_client("session/update", {"sessionId": session.id, "update": {
            "sessionUpdate": "config_option_update", "configOptions": options}})

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
                if len(decode_session_id(session.id)) > 1:
                    self.bindings.record_prompted(session.id)  # later proxies keep it with this agent too
                # The client learns the bound agent's options (and that other agents are off the table).
                self._send_options_update(session)
                for other in list(session.candidates.values()):
                    if other is not candidate:
                        self._release(other, close=True)
        if session.cancels != cancels:
            return {"stopReason": "cancelled"}  # cancelled while the session was being bound
        try:
            result = await candidate.backend.request(
                "session/prompt", {**params, "sessionId": candidate.backend_session_id}, timeout=None)
        except BackendGone as exc:
            raise exc.to_request_error(f"the turn failed: {exc}") from None
        return result

    def _nothing_to_bind(self, session: ProxySession) -> RequestError:
        failures = {agent: probe.error or "unknown" for agent, probe in session.probes.items()
                    if probe.models is None} or {name: "not probed" for name in self.order}
        lines = "; ".join(f"{agent}: {error}" for agent, error in failures.items())
        return RequestError(INTERNAL_ERROR, f"no agent behind this proxy is available for session {session.id}. {lines}",
                            {"failures": failures})

    def _send_options_update(self, session: ProxySession) -> None:
        options = self._client_options(session)
        if options:
            self._push_options(session, options)

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
        seen: set[str] = set()
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
                client_id = self._client_id_for(backend.name, backend_id)
                if client_id is None or client_id in seen:
                    continue  # listed through the agent it is bound to
                seen.add(client_id)
                entry = dict(info)
                entry["sessionId"] = client_id
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

    def _client_id_for(self, agent: str, backend_id: str) -> str | None:
        """The id the client knows a backend session by; None when it belongs to a session bound to another
        agent (agents sharing one store, such as two demo agents, list each other's)."""
        owners = [s for s in self.sessions.values() if s.last_backend and s.last_backend[1] == backend_id]
        for session in owners:
            if session.last_backend == (agent, backend_id):
                return session.id
        if owners:
            return None
        remembered = self.bindings.session_id_for(agent, backend_id)  # bound by an earlier proxy process
        if remembered is not None:
            return remembered
        if self.bindings.bound_elsewhere(agent, backend_id):
            return None  # an earlier proxy bound it on another agent: it is listed through that one
        return join_agent_model(agent, backend_id)  # a session this proxy never saw bound

    def _locate(self, session_id: Any) -> list[tuple[str, str]]:
        """Where a session may live, most likely first: ``(agent, the agent's session id)`` pairs."""
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        places: list[tuple[str, str]] = []
        if session is not None and session.last_backend is not None:
            places.append(session.last_backend)
        remembered = self.bindings.lookup(session_id) if isinstance(session_id, str) else None
        places += [remembered] if remembered else []
        places += decode_session_id(session_id)
        parsed = split_agent_model(session_id, self.order)
        places += [parsed] if parsed else []
        places = [p for i, p in enumerate(places) if p[0] in self.backends and p not in places[:i]]
        if not places:
            known = [s.id for s in self.sessions.values() if not s.closed]
            raise unknown_session_error(session_id, known, "the proxy reopens the sessions it opened, those "
                                                           "session/list shows (agent:id) and those its state "
                                                           "directory remembers")
        return places

    async def _reopen(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """session/load or session/resume on the agent that has the session: each place it may live,
        in turn, until an agent knows it."""
        if self._never_prompted(params.get("sessionId")):
            return await self._reopen_unprompted(method, params)
        *others, last = self._locate(params.get("sessionId"))
        for agent, backend_id in others:
            try:
                return await self._reopen_on(method, params, agent, backend_id)
            except RequestError as exc:
                if exc.code not in (RESOURCE_NOT_FOUND, INVALID_PARAMS):  # -32602: agents older than -32002
                    raise
        return await self._reopen_on(method, params, *last)

    async def _reopen_on(self, method: str, params: dict[str, Any], agent: str, backend_id: str) -> dict[str, Any]:
        backend = self.backends[agent]
        try:
            await backend.ensure_ready(self.client_init)
        except BackendGone as exc:
            raise exc.to_request_error() from None
        capability = "load" if method == "session/load" else "resume"
        if not backend.supports(capability):
            raise RequestError(METHOD_NOT_FOUND, f"agent '{agent}' does not support {method}", {"agent": agent})
        session = self._reopened(params)
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
            return self._rewrite_result(session, result, opening=True)

    def _never_prompted(self, session_id: Any) -> bool:
        """A session offered by several agents and never prompted: it may still move to any of them."""
        if not isinstance(session_id, str) or len(decode_session_id(session_id)) < 2:
            return False
        known = self.sessions.get(session_id)
        if known is not None and known.prompted:
            return False
        return self.bindings.never_prompted(session_id)

    def _reopened(self, params: dict[str, Any]) -> ProxySession:
        """The proxy session a load or resume reopens: the one this process knows, or a new one under that id."""
        session_id = params["sessionId"]
        session = self.sessions.get(session_id)
        if session is None or session.closed:
            session = ProxySession(id=session_id, params={k: v for k, v in params.items() if k != "sessionId"})
            self.sessions[session_id] = session
        session.closed = False
        return session

    async def _reopen_unprompted(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Reopen a session that was never prompted: every agent in its id reopens its own session for it, as
        the probes of session/new did, and the remembered binding (a model picked) is restored, so the client
        can still pick any agent's model (clients such as acpx create a session in one process and pick its
        model in the next). Nothing to replay: no prompt yet."""
        session = self._reopened(params)
        session_id = session.id
        async with session.lock:
            for candidate in list(session.candidates.values()):
                self._release(candidate, close=False)
            session.bound = None
            places = [(agent, backend_id) for agent, backend_id in decode_session_id(session_id)
                      if agent in self.backends]
            outcomes = await asyncio.gather(*(self._reopen_probe(session, method, params, agent, backend_id)
                                              for agent, backend_id in places))
            session.probes = {outcome.agent: outcome for outcome in outcomes}
            if not session.available:
                session.closed = True
                failures = session.failures()
                raise RequestError(RESOURCE_NOT_FOUND, f"no agent could reopen session {session_id}: "
                                   + "; ".join(failures.values()), {"sessionId": session_id, "failures": failures})
            remembered = self.bindings.lookup(session_id)
            bound = session.candidates.get(remembered[0]) if remembered else None
            if bound is not None and bound.backend_session_id == remembered[1]:  # type: ignore[index]
                self._bind_to(session, bound)
                session.selected = (bound.agent, bound.models.current)
            else:
                first = session.probes[session.available[0]].models
                assert first is not None
                session.selected = (first.agent, first.current)
            result = self._rewrite_result(session, {"configOptions": []}, opening=True)
            return {**result, "_meta": {META_KEY: self._probes_meta(session)}}

    async def _reopen_probe(self, session: ProxySession, method: str, params: dict[str, Any], agent: str,
                            backend_id: str) -> ProbeOutcome:
        """One agent's own session of a never-bound session, reopened and held unbound (a probe again)."""
        backend = self.backends[agent]
        candidate: Candidate | None = None
        try:
            async with _deadline(self.start_timeout):
                await backend.ensure_ready(self.client_init)
                if not backend.supports("load" if method == "session/load" else "resume"):
                    return ProbeOutcome(agent, error=f"agent '{agent}' does not support {method}")
                candidate = Candidate(session, backend, {}, backend_id)
                earlier = backend.register(candidate)
                session.candidates[agent] = candidate
                for held_method, held in earlier:
                    self._deliver(candidate, held_method, held)
                result = await backend.request(method, {**params, "sessionId": backend_id})
        except (asyncio.TimeoutError, BackendGone, RequestError) as exc:
            if candidate is not None:
                self._release(candidate, close=False)
            reason = f"did not answer within {self.start_timeout:g} s" if isinstance(exc, asyncio.TimeoutError) \
                else f"refused {method}: {exc}"
            return ProbeOutcome(agent, error=f"agent '{agent}' {reason}")
        candidate.absorb(result)
        self._hidden[agent].add(backend_id)  # deleted at the first prompt unless the session binds to it
        return ProbeOutcome(agent, models=candidate.models)

    async def _load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen("session/load", params)

    async def _resume_session(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen("session/resume", params)

    async def _delete_session(self, params: dict[str, Any]) -> Any:
        agent, backend_id = self._locate(params.get("sessionId"))
        backend = self.backends[agent]
        if not backend.supports("delete"):
            raise RequestError(METHOD_NOT_FOUND, f"agent '{agent}' does not support session/delete", {"agent": agent})
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
                if exc.code != METHOD_NOT_FOUND:
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
        "session/set_model": _set_model_unstable,
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
        session = candidate.session
        out = {**params, "sessionId": session.id}
        update = params.get("update")
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if kind == "config_option_update":
            out["update"] = {**update, "configOptions": self._client_options(session)}
        elif kind == "current_mode_update" and not candidate.legacy:
            if update.get("currentModeId") == session.shown_mode:  # type: ignore[union-attr]
                return  # the client was told already (the proxy follows the mode option)
            session.shown_mode = update.get("currentModeId")  # type: ignore[union-attr]
        self._send_to_client("session/update", out)
        if kind == "config_option_update":
            self._follow_mode(session, out["update"]["configOptions"])

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
