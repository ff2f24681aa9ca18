"""The proxy's binder: probing the agents for a session, binding it to one agent session, releasing the rest.

It owns which agent sessions are probes the client never used (``hidden``: deleted from the agent
when released, left out of session/list) and keeps the bindings file (ids.py) in step with each
session's binding. Sessions change phase only through ``ProxySession``'s transition methods.

The client's MCP servers (its ``kernel`` entry above all: the user's kernel) go to the agent session
it is bound to and to no other: probes are opened without any, and binding to a probe opens a fresh
session on that agent with them (the probe is deleted). The ``kernel`` entry is relayed per bound
agent session (relay.py); moving to another agent before the first prompt releases the old agent
session, which closes its relay at once.

Threads: the proxy's one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from acp.exceptions import RequestError

from .._protocol import AUTH_REQUIRED, join_agent_model
from .._timeout import deadline
from .backend import Backend, BackendGone
from .hub import Hub
from .options import OptionsView, invalid_params
from .relay import KernelRelay, closing_relays
from .session import Candidate, Phase, ProbeOutcome, ProxySession

__all__ = ["Binder", "agent_params"]

logger = logging.getLogger(__name__)


class Binder:
    """Probe (session/new on every agent), bind (one agent session's frames reach the client), release;
    and the agents' notifications for their sessions, forwarded once bound (``deliver``)."""

    def __init__(self, hub: Hub, view: OptionsView) -> None:
        self.hub = hub
        self.view = view
        # Probe sessions the client never used, per agent: deleted when released, never listed.
        self.hidden: dict[str, set[str]] = {name: set() for name in hub.order}

    # --- probing -------------------------------------------------------------------------
    async def probe(self, session: ProxySession, backend: Backend[Candidate]) -> ProbeOutcome:
        """One agent's own session for a new proxy session, held unbound: its models, or why it is left out."""
        stage = "initialize"
        try:
            async with deadline(self.hub.start_timeout):
                await backend.ensure_ready(self.hub.client_init)
                stage = "session/new"
                candidate = await self.open(session, backend, bind=False)
        except asyncio.TimeoutError:
            return ProbeOutcome(backend.name, error=f"agent '{backend.name}' did not answer {stage} within "
                                                    f"{self.hub.start_timeout:g} s")
        except BackendGone as exc:
            return ProbeOutcome(backend.name, error=str(exc))
        except RequestError as exc:
            hint = self._auth_hint(backend) if exc.code == AUTH_REQUIRED else ""
            return ProbeOutcome(backend.name, error=f"agent '{backend.name}' refused session/new: {exc}{hint}")
        self.hidden[backend.name].add(candidate.backend_session_id)
        self.hub.note_models(candidate.models)
        return ProbeOutcome(backend.name, models=candidate.models)

    def late_probe(self, session: ProxySession, task: asyncio.Future[ProbeOutcome]) -> None:
        """A probe that outlived session/new's deadline has ended: add the agent, or name why not."""
        if task.cancelled():
            return
        outcome = task.result()
        session.probes = {name: outcome if name == outcome.agent else probe for name, probe in session.probes.items()}
        if outcome.models is None:
            logger.warning("agent '%s' is left out of session %s: %s", outcome.agent, session.id, outcome.error)
            return
        logger.info("agent '%s' joined session %s after the probe deadline", outcome.agent, session.id)
        if session.phase is Phase.CLOSED:
            return
        if session.phase is Phase.PROMPTED:
            candidate = session.candidates.get(outcome.agent)
            if candidate is not None and candidate is not session.bound:
                # Prompted on another agent by now: the probe is not needed (a pick of this agent's model hands the
                # conversation over to a session opened then), its models are listed all the same.
                self.release(candidate, close=True)
        if session.selected is None:
            session.selected = (outcome.agent, outcome.models.current)
        self.view.send_options_update(session)

    async def survey(self, session: ProxySession) -> None:
        """The agents whose models this proxy has not seen yet, probed once for a session reopened with its history
        on one agent (a new proxy process): a probe each, deleted at once, so that the session's model list names
        every agent's models (a pick of one hands the conversation over). Waits the probe deadline, as session/new
        does; an agent that answers later joins the list by a config_option_update, one that fails stays out."""
        unknown = [backend for name, backend in self.hub.backends.items()
                   if name not in self.hub.known_models and name not in session.probes]
        if not unknown:
            return
        tasks = [asyncio.ensure_future(self._survey_one(session, backend)) for backend in unknown]
        _done, pending = await asyncio.wait(tasks, timeout=self.hub.probe_timeout)
        for task in pending:
            task.add_done_callback(lambda finished, s=session: self._surveyed_late(s, finished))

    async def _survey_one(self, session: ProxySession, backend: Backend[Candidate]) -> ProbeOutcome:
        outcome = await self.probe(session, backend)  # notes the agent's models (Hub.note_models)
        candidate = session.candidates.get(backend.name)
        if candidate is not None and candidate is not session.bound:
            self.release(candidate, close=True)  # a probe the client never used: deleted on the agent
        return outcome

    def _surveyed_late(self, session: ProxySession, task: asyncio.Future[ProbeOutcome]) -> None:
        if task.cancelled() or task.result().models is None or session.closed or session.bound is None:
            return
        self.view.send_options_update(session)

    def _auth_hint(self, backend: Backend[Candidate]) -> str:
        """What an agent that wants authentication needs, with the proxy's `agent:method` ids."""
        ids = [join_agent_model(backend.name, str(m.get("id"))) for m in backend.auth_methods]
        needs = ""
        if backend.spec is not None and (backend.spec.login_hint or backend.spec.key_vars):
            needs = f"{backend.spec.needs_key_message()}; or "
        return f" ({needs}authenticate with one of: {', '.join(ids) or 'no advertised method'})"

    async def open(self, session: ProxySession, backend: Backend[Candidate], *, bind: bool) -> Candidate:
        """A new session on the agent with the client's session/new parameters, routed to `session`. A probe
        (not `bind`) gets no MCP servers; a bound one gets the client's, its kernel entry relayed."""
        params = {**session.params, "mcpServers": []}
        params.pop("systemPrompt", None)  # the system prompt too is for the agent the user picks
        relay = None
        if bind:
            params = agent_params(session.params, backend, [])
            params["mcpServers"], relay = await KernelRelay.grant(session.params.get("mcpServers") or [])
        try:
            result = await backend.request("session/new", params)
            backend_id = result.get("sessionId") if isinstance(result, dict) else None
            if not isinstance(backend_id, str):
                raise BackendGone(f"agent '{backend.name}' answered session/new without a sessionId",
                                  agent=backend.name)
        except BaseException:
            if relay is not None:
                relay.close_soon()
            raise
        candidate = Candidate(session, backend, result, backend_id, granted=bind or not session.asks_grant,
                              relay=relay)
        earlier = backend.register(candidate)
        if session.closed:
            backend.unregister(candidate)
            candidate.release()
            return candidate
        replaced = session.candidates.get(backend.name)
        if replaced is not None and replaced is not candidate:
            self.release(replaced, close=True)
        session.candidates[backend.name] = candidate
        if bind:
            self.bind_to(session, candidate)
        for method, params in earlier:  # what the agent sent before its answer, now that we know whose it is
            self.deliver(candidate, method, params)
        return candidate

    def adopt(self, session: ProxySession, backend: Backend[Candidate], backend_id: str, *, bind: bool, granted: bool,
              relay: KernelRelay | None = None) -> Candidate:
        """An agent session that already exists (a reopen), routed to `session` (bound and tied to it if
        `bind`, else held as a probe); what the agent sent for it before is delivered after. ``granted``: it
        is (being) reopened with the client's MCP servers, its kernel entry through ``relay``."""
        candidate = Candidate(session, backend, {}, backend_id, granted=granted or not session.asks_grant,
                              relay=relay)
        earlier = backend.register(candidate)
        session.candidates[backend.name] = candidate
        if bind:
            self.bind_to(session, candidate, tie=True)
        for method, params in earlier:
            self.deliver(candidate, method, params)
        return candidate

    # --- binding -------------------------------------------------------------------------
    def bind_to(self, session: ProxySession, candidate: Candidate, *, tie: bool = False) -> None:
        """From here on the agent's frames for this session reach the client, options rewritten."""
        previous = session.bound
        moved_from = None
        if previous is not None and previous is not candidate and not tie and not session.prompted:
            # Moved to another agent before the first prompt: the old one is a probe again (deleted at that prompt).
            self.hidden[previous.agent].add(previous.backend_session_id)
            moved_from = previous
        if session.bind(candidate, tie=tie):
            self.hub.bindings.record(session.id, candidate.agent, candidate.backend_session_id)
        self.hidden[candidate.agent].discard(candidate.backend_session_id)
        if moved_from is not None and moved_from.granted and session.asks_grant:
            # It holds the client's MCP servers: deleted now, its way to the kernel shut (a later move back
            # opens a fresh session there).
            self.release(moved_from, close=True)
        for params in candidate.held.take(candidate.backend_session_id):
            self.view.forward_update(candidate, params)

    async def bind(self, session: ProxySession, agent: str, bare: str) -> Candidate:
        """Bind the session to `agent`'s session (opened if it has none that is live) on model `bare`."""
        backend = self.hub.backends[agent]
        previous = session.bound
        candidate = session.candidates.get(agent)
        try:
            if candidate is None or candidate.released or not backend.ready or not candidate.granted or \
                    backend.routes.get(candidate.backend_session_id) is not candidate:
                # (A probe that was opened without the client's MCP servers is replaced by a session with them.)
                await backend.ensure_ready(self.hub.client_init)
                candidate = await self.open(session, backend, bind=True)
            else:
                self.bind_to(session, candidate)
            models = candidate.models
            if models.option_id is not None and bare != models.current:
                result = await backend.request(
                    "session/set_config_option",
                    {"sessionId": candidate.backend_session_id, "configId": models.option_id, "value": bare},
                )
                candidate.absorb(result)
        except BackendGone as exc:
            self._restore(session, previous)
            raise exc.within(f"cannot bind to agent '{agent}'") from None
        except BaseException:
            self._restore(session, previous)
            raise
        finally:
            await closing_relays()  # the client hears back once a released agent's way to the kernel is shut
        session.selected = (agent, bare)
        self.hub.note_models(candidate.models)
        return candidate

    def _restore(self, session: ProxySession, previous: Candidate | None) -> None:
        """After a failed move: back to the agent session bound before, or to nothing bound."""
        if previous is not None and not previous.released:
            if session.bound is not previous:
                self.bind_to(session, previous)
        elif session.bound is not None and session.bound is not previous:
            session.unbind()

    def release(self, candidate: Candidate, *, close: bool) -> None:
        """Stop routing a backend session; close it on the agent when the agent can."""
        if not candidate.release():
            return
        backend = candidate.backend
        backend.unregister(candidate)
        if candidate.session.candidates.get(candidate.agent) is candidate:
            del candidate.session.candidates[candidate.agent]
        if not close or not backend.ready:
            return
        backend_id = candidate.backend_session_id
        if backend_id in self.hidden[candidate.agent] and backend.supports("delete"):
            # A probe's session the client never used: leave no trace of it in the agent's own store.
            self.hidden[candidate.agent].discard(backend_id)
            self.hub.spawn(_quiet(backend.request("session/delete", {"sessionId": backend_id})))
        elif backend.supports("close"):
            self.hub.spawn(_quiet(backend.request("session/close", {"sessionId": backend_id})))

    def deliver(self, candidate: Candidate, method: str, params: dict[str, Any]) -> None:
        """An agent's notification for one of its sessions: forwarded if that session is bound, else held."""
        if candidate.released or candidate.session.closed:
            return
        if method != "session/update":
            if candidate.bound:
                self.hub.send_to_client(method, {**params, "sessionId": candidate.session.id})
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
            if isinstance(update, dict):
                candidate.session.transcript.see(update)
            self.view.forward_update(candidate, params)
            if mode_moved:  # the agent changed its mode by itself: the `mode` option the proxy shows follows
                self.view.send_options_update(candidate.session)
        elif kind != "config_option_update":
            candidate.hold(params)

    def release_all(self, session: ProxySession, *, close: bool) -> None:
        for candidate in list(session.candidates.values()):
            self.release(candidate, close=close)


def agent_params(params: dict[str, Any], backend: Backend[Candidate], servers: list[Any] | None) -> dict[str, Any]:
    """A session lifecycle request as one agent gets it: ``servers`` for mcpServers (when given), and the
    ``systemPrompt`` kept only where that agent advertises it (RequestError otherwise: never dropped
    silently)."""
    out = dict(params)
    if servers is not None:
        out["mcpServers"] = servers
    if out.get("systemPrompt") is None:
        out.pop("systemPrompt", None)
    elif not backend.supports("systemPrompt"):
        raise invalid_params(f"agent '{backend.name}' does not take a system prompt "
                             "(it does not advertise sessionCapabilities.systemPrompt); send none for it",
                             agent=backend.name)
    return out


async def _quiet(awaitable: Any) -> None:
    with contextlib.suppress(BackendGone, RequestError, ConnectionError):
        await awaitable
