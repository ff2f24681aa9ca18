"""The proxy's agent side: the client's requests and notifications, and the agents' frames forwarded to it.

What a session goes through is split by job: ``session.py`` (its phase and the one table of
transitions), ``binder.py`` (probe, bind, release), ``options.py`` (the client's view of the
options, the requests that set them), ``reopen.py`` (locate, load, resume, list, delete). This
module answers initialize, authenticate, session/new, session/prompt, session/close and extension
methods, routes the agents' notifications and requests to the client, and is the one place where
an agent that cannot answer (``BackendGone``) becomes the client's ``RequestError``.

Threads: a proxy runs on one asyncio loop (its process's main loop, or an in-memory transport's), and
everything here (the session table, bindings, probes, pending forwards) is read and mutated on that
loop alone; backends call back on it too (only their stderr echo has a thread of its own)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acp.connection import Connection
from acp.exceptions import RequestError

from .._protocol import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION,
    client_version,
    join_agent_model,
    split_agent_model,
)
from .backend import DEFAULT_REQUEST_TIMEOUT, Backend, BackendConfig, BackendGone
from .binder import Binder
from .fork import Forker
from .handover import HandOver, with_handover
from .hub import Hub
from .ids import decode_session_id, encode_session_id
from .models import META_KEY
from .options import OptionsView, invalid_params
from .relay import closing_relays
from .reopen import Reopener
from .session import Candidate, ProbeOutcome, ProxySession

__all__ = ["Candidate", "ProxyServer", "ProxySession"]

logger = logging.getLogger(__name__)

# How long session/new (and initialize) wait for the agents; slower ones join later.
DEFAULT_PROBE_TIMEOUT = 5.0
# How long an agent may take to start and open its first session before it is left out.
DEFAULT_START_TIMEOUT = 60.0


def _system_prompt_capability(ready: Sequence[Backend[Candidate]]) -> dict[str, Any] | None:
    """``sessionCapabilities.systemPrompt`` (unstable) when an agent takes one; ``mode.override`` when one of
    those takes that mode too (a session bound to an agent without it hears that agent's refusal)."""
    takers = [(b.capabilities.get("sessionCapabilities") or {}).get("systemPrompt") for b in ready
              if b.supports("systemPrompt")]
    if not takers:
        return None
    if any(isinstance(t, dict) and isinstance(t.get("mode"), dict) and t["mode"].get("override") is not None
           for t in takers):
        return {"mode": {"override": {}}}
    return {}


class ProxyServer(Hub):
    """Serves one ACP client (on the connection given to `attach`) from several backend agents.

    It is the hub (hub.py: the shared tables) its parts are given; they never import this module."""

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
        self.tracer = tracer
        super().__init__({
            config.name: Backend(config, cwd=cwd, on_notification=self._from_backend_notification,
                                 on_request=self._from_backend_request, on_exit=self._backend_exited,
                                 on_frame=self._trace, start_timeout=start_timeout, request_timeout=request_timeout)
            for config in backends
        }, probe_timeout=probe_timeout, start_timeout=start_timeout, state_dir=state_dir)
        self.view = OptionsView(self, bind=self._bind, hand_over=self._hand_over)
        self.binder = Binder(self, self.view)
        self.handover = HandOver(self, self.binder, self.view)
        self.reopener = Reopener(self, self.binder, self.view)
        self.forker = Forker(self, self.binder, self.view)
        self._handlers = self._requests()

    async def _bind(self, session: ProxySession, agent: str, bare: str) -> Candidate:
        """The options view moves a session to another agent through the binder."""
        return await self.binder.bind(session, agent, bare)

    async def _hand_over(self, session: ProxySession, agent: str, bare: str) -> dict[str, Any]:
        """The options view moves a prompted session to another agent by handing its conversation over."""
        return await self.handover.move(session, agent, bare)

    def attach(self, client: Connection) -> None:
        self.client = client

    def _trace(self, link: str, direction: str, message: dict[str, Any]) -> None:
        if self.tracer is not None:
            self.tracer(link, direction, message)

    # =================================================================== client -> proxy
    async def handle_client(self, method: str, params: Any, is_notification: bool) -> Any:
        """The MethodHandler of the connection to the client; an agent that cannot answer becomes an error
        naming it here, and only here."""
        params = params if isinstance(params, dict) else {}
        try:
            if is_notification:
                await self._client_notification(method, params)
                return None
            handler = self._handlers.get(method)
            if handler is not None:
                return await handler(params)
            if method.startswith("_"):
                return await self._extension_request(method, params)
        except BackendGone as exc:
            raise exc.to_request_error() from None
        raise RequestError.method_not_found(method)

    def _requests(self) -> dict[str, Any]:
        view, reopener = self.view, self.reopener
        return {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "logout": self._logout,
            "session/new": self._new_session,
            "session/load": reopener.load,
            "session/resume": reopener.resume,
            "session/close": self._close_session,
            "session/delete": reopener.delete_session,
            "session/fork": self.forker.fork,
            "session/list": reopener.list_sessions,
            "session/set_config_option": view.set_config_option,
            "session/set_mode": view.set_mode,
            "session/set_model": view.set_model_unstable,
            "session/prompt": self._prompt,
        }

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
                for backend in self.running():
                    await backend.notify(method, params)
        # other notifications ($/cancel_request...) concern this hop only

    # --- initialize, authenticate --------------------------------------------------
    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.client_init = dict(params)
        starts = [asyncio.ensure_future(self._start_quietly(b)) for b in self.backends.values()]
        # Agents that take longer keep starting in the background; session/new waits for them.
        await asyncio.wait(starts, timeout=self.probe_timeout)
        ready = self.running()
        caps = [b.capabilities for b in ready]

        def every(getter: Any) -> bool:
            return bool(caps) and all(bool(getter(c)) for c in caps)

        def any_session(name: str) -> bool:
            return any(b.supports(name) for b in ready)

        prompt = {key: every(lambda c, k=key: (c.get("promptCapabilities") or {}).get(k))
                  for key in ("image", "audio", "embeddedContext")}
        mcp = {key: every(lambda c, k=key: (c.get("mcpCapabilities") or {}).get(k)) for key in ("http", "sse")}
        session_caps: dict[str, Any] = {"list": {}, "close": {}}
        for optional in ("resume", "delete", "fork"):  # fork: unstable, made by the session's bound agent
            if any_session(optional):
                session_caps[optional] = {}
        system_prompt = _system_prompt_capability(ready)
        if system_prompt is not None:
            session_caps["systemPrompt"] = system_prompt
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

    async def _start_quietly(self, backend: Backend[Candidate]) -> None:
        with contextlib.suppress(BackendGone):
            await backend.ensure_ready(self.client_init)

    def _agents_meta(self) -> dict[str, Any]:
        return {name: {k: v for k, v in backend.describe().items() if k in ("status", "error", "agentInfo")}
                for name, backend in self.backends.items()}

    async def _authenticate(self, params: dict[str, Any]) -> Any:
        """`agent:method` -> `authenticate {methodId: method}` on that agent (started first if it is not running)."""
        parsed = split_agent_model(params.get("methodId"), self.order)
        if parsed is not None:
            with contextlib.suppress(BackendGone):
                await self.backends[parsed[0]].ensure_ready(self.client_init)
        valid = [join_agent_model(b.name, m["id"]) for b in self.running() for m in b.auth_methods
                 if isinstance(m.get("id"), str)]
        if parsed is None or join_agent_model(*parsed) not in valid:
            raise invalid_params(f"unknown auth method {params.get('methodId')!r}; valid: {', '.join(valid) or 'none'}",
                                 valid=valid)
        agent, method_id = parsed
        return await self.backends[agent].authenticate(method_id, params)

    async def _logout(self, params: dict[str, Any]) -> Any:
        for backend in self.running():
            if (backend.capabilities.get("auth") or {}).get("logout") is not None:
                await backend.request("logout", params)
        return {}

    # --- sessions ---------------------------------------------------------------------------
    async def _new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        """Probe every agent; answer within the probe deadline with those that are ready.

        An agent still starting then keeps going in the background and, once it has a session,
        joins this session's model list by a config_option_update (while the session is not yet
        tied to an agent by its first prompt)."""
        session = ProxySession(id=f"probing-{uuid.uuid4().hex}", params=dict(params))
        self.sessions[session.id] = session
        probes = {asyncio.ensure_future(self.binder.probe(session, b)): b.name for b in self.backends.values()}
        done, pending = await asyncio.wait(probes, timeout=self.probe_timeout)
        self._name(session)
        outcomes = {outcome.agent: outcome for outcome in (task.result() for task in done)}
        for task in pending:
            name = probes[task]
            outcomes[name] = ProbeOutcome(name, error=f"agent '{name}' did not answer within {self.probe_timeout:g} s; "
                                                      "it joins this session's model list when it is ready",
                                          pending=True)
            task.add_done_callback(lambda finished, s=session: self.binder.late_probe(s, finished))
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
            result["configOptions"] = [self.view.unbound_option(session)]
        result["_meta"] = {META_KEY: session.probes_meta()}
        return result

    def _name(self, session: ProxySession) -> None:
        """The session's final id: the agents' own session ids it can be reopened from (see ids.py)."""
        candidates = [(agent, session.candidates[agent].backend_session_id) for agent in self.order
                      if agent in session.candidates]
        del self.sessions[session.id]
        session.id = encode_session_id(candidates) if candidates else f"acpnb-proxy-{uuid.uuid4().hex}"
        self.sessions[session.id] = session

    async def _prompt(self, params: dict[str, Any]) -> Any:
        session = self.session_of(params)
        cancels = session.cancels
        async with session.lock:
            first = not session.prompted
            if session.bound is None:
                if session.selected is None:
                    raise self._nothing_to_bind(session)
                agent, bare = session.selected
                await self.binder.bind(session, agent, bare)
            candidate = session.bound
            assert candidate is not None
            if first:
                session.tie()
                if len(decode_session_id(session.id)) > 1:
                    self.bindings.record_prompted(session.id)  # later proxies keep it with this agent too
                # The client learns the bound agent's options; other agents' models stay listed (a pick of one
                # hands the conversation over: handover.py), their probe sessions are released.
                self.view.send_options_update(session)
                for other in list(session.candidates.values()):
                    if other is not candidate:
                        self.binder.release(other, close=True)
            handed, session.pending_handover = session.pending_handover, None
        if session.cancels != cancels:
            session.pending_handover = handed  # not sent: the next prompt carries it
            return {"stopReason": "cancelled"}  # cancelled while the session was being bound
        request = {**params, "sessionId": candidate.backend_session_id}
        if handed is not None:  # the first prompt after a handover carries the conversation (handover.py)
            request = with_handover(request, handed)
        session.transcript.begin(params.get("prompt"))
        try:
            result = await candidate.backend.request("session/prompt", request, timeout=None)
        except BaseException as exc:
            if handed is not None and session.pending_handover is None:
                session.pending_handover = handed  # the turn failed: the next prompt carries the conversation again
            if isinstance(exc, BackendGone):
                raise exc.within("the turn failed") from None
            raise
        finally:
            session.transcript.end()
        if handed is not None and isinstance(result, dict):  # the client can tell this turn from a normal one
            result = {**result, "_meta": {**dict(result.get("_meta") or {}), **with_handover({}, handed)["_meta"]}}
        return result

    def _nothing_to_bind(self, session: ProxySession) -> RequestError:
        failures = {agent: probe.error or "unknown" for agent, probe in session.probes.items()
                    if probe.models is None} or {name: "not probed" for name in self.order}
        lines = "; ".join(f"{agent}: {error}" for agent, error in failures.items())
        return RequestError(INTERNAL_ERROR, f"no agent behind this proxy is available for session {session.id}. {lines}",
                            {"failures": failures})

    async def _close_session(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.session_of(params)
        bound = session.bound
        session.close()
        self.binder.release_all(session, close=True)
        if bound is not None:
            self.binder.release(bound, close=True)
        await closing_relays()  # its agent's way to the kernel is shut before the client hears back
        return {}

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
                                        "prompted": s.prompted, "phase": s.phase.value}
                                 for s in self.sessions.values() if not s.closed}}
        if "sessionId" in params:
            session = self.session_of(params)
            target = self._extension_target(session)
            if target is None:
                raise invalid_params(f"session {session.id} has no agent to send {method} to", sessionId=session.id)
            return await target.backend.request(method, {**params, "sessionId": target.backend_session_id})
        # No session: the first running agent that knows the method answers.
        for backend in self.running():
            try:
                return await backend.request(method, params)
            except RequestError as exc:
                if exc.code != METHOD_NOT_FOUND:
                    raise
            except BackendGone:
                continue
        raise RequestError.method_not_found(method)

    # =================================================================== backend -> proxy
    def _from_backend_notification(self, backend: Backend[Candidate], method: str, params: dict[str, Any]) -> None:
        """Runs in the backend connection's receive loop, in wire order; forwards at once."""
        session_id = params.get("sessionId")
        candidate = backend.routes.get(session_id) if isinstance(session_id, str) else None
        if candidate is not None:
            self.binder.deliver(candidate, method, params)
        elif method == "session/update" and isinstance(session_id, str):
            backend.hold_orphan(session_id, method, params)  # its session/new answer is still on the way
        elif "sessionId" not in params:
            self.send_to_client(method, params)  # session-less (extension) notifications

    async def _from_backend_request(self, backend: Backend[Candidate], method: str, params: dict[str, Any]) -> Any:
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

    def _backend_exited(self, backend: Backend[Candidate]) -> None:
        """The agent died: sessions bound to it become unbound (the next prompt binds them again)."""
        for candidate in backend.forget_sessions():
            candidate.release()
            session = candidate.session
            if session.candidates.get(candidate.agent) is candidate:
                del session.candidates[candidate.agent]
            if session.bound is candidate and not session.closed:
                session.unbind()
                self.view.send_options_update(session)

    # =================================================================== end
    async def shutdown(self) -> None:
        for session in self.sessions.values():  # every relay to the kernel closes with the proxy
            for candidate in list(session.candidates.values()):
                candidate.release()
        await asyncio.gather(*(backend.shutdown() for backend in self.backends.values()), return_exceptions=True)
        await closing_relays()
