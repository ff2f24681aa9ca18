"""session/fork (unstable ACP v1) through the proxy: the fork is made by the agent the session is bound to.

A session that is not bound yet has no conversation on any agent: the fork is refused (-32602) with what
to do first. An agent that does not advertise ``sessionCapabilities.fork`` is named in the refusal. The
new proxy session is bound and tied at once (it has a history) to the agent's new session, on the same
agent and model; it gets the client's MCP servers of the fork request, its ``kernel`` entry through a
relay of its own (relay.py), and the request's ``systemPrompt`` when that agent advertises it.

Threads: the proxy's one event loop.
"""

from __future__ import annotations

from typing import Any

from acp.exceptions import RequestError

from .._protocol import METHOD_NOT_FOUND
from .backend import BackendGone
from .binder import Binder, agent_params
from .hub import Hub
from .ids import encode_session_id
from .options import OptionsView, invalid_params
from .relay import KernelRelay, closing_relays
from .session import Candidate, ProbeOutcome, ProxySession

__all__ = ["Forker"]


class Forker:
    """Answers session/fork: a new proxy session bound to the bound agent's fork of the session."""

    def __init__(self, hub: Hub, binder: Binder, view: OptionsView) -> None:
        self.hub = hub
        self.binder = binder
        self.view = view

    async def fork(self, params: dict[str, Any]) -> dict[str, Any]:
        source = self.hub.session_of(params)
        bound = source.bound
        if bound is None or bound.released:
            raise invalid_params(f"session {source.id} is not with an agent yet: pick a model (set_config_option "
                                 "model) or send a prompt before forking it", sessionId=source.id)
        backend = bound.backend
        if not backend.supports("fork"):
            raise RequestError(METHOD_NOT_FOUND, f"agent '{backend.name}' does not support session/fork "
                               "(it does not advertise sessionCapabilities.fork)", {"agent": backend.name})
        request = agent_params({**params, "sessionId": bound.backend_session_id}, backend, None)
        servers, relay = await KernelRelay.grant(params.get("mcpServers") or [])
        if "mcpServers" in params or servers:
            request["mcpServers"] = servers
        try:
            result = await backend.request("session/fork", request)
            fork_id = result.get("sessionId") if isinstance(result, dict) else None
            if not isinstance(fork_id, str):
                raise BackendGone(f"agent '{backend.name}' answered session/fork without a sessionId",
                                  agent=backend.name)
        except BaseException:
            if relay is not None:
                relay.close_soon()
                await closing_relays()
            raise
        session = ProxySession(id=encode_session_id([(backend.name, fork_id)]),
                               params={k: v for k, v in params.items() if k != "sessionId"})
        # It shares the source's conversation: for a later handover, and a handover the source has not sent yet
        # (the agent's fork has not seen it either).
        session.transcript, session.pending_handover = source.transcript.copy(), source.pending_handover
        self.hub.sessions[session.id] = session
        candidate = self.binder.adopt(session, backend, fork_id, bind=True, granted=True, relay=relay)
        candidate.absorb(result)
        await self._same_model(candidate, source)
        session.selected = (backend.name, candidate.models.current)
        session.probes = {backend.name: ProbeOutcome(backend.name, models=candidate.models)}
        self.hub.note_models(candidate.models)
        out = self.view.rewrite_result(session, result, opening=True)
        out["sessionId"] = session.id
        return out

    @staticmethod
    async def _same_model(candidate: Candidate, source: ProxySession) -> None:
        """The fork runs on the model the source session is on (an agent may open a fork on its default)."""
        models = candidate.models
        wanted = source.selected[1] if source.selected is not None else None
        if wanted is None or models.option_id is None or wanted == models.current or wanted not in models.values:
            return
        result = await candidate.backend.request("session/set_config_option", {
            "sessionId": candidate.backend_session_id, "configId": models.option_id, "value": wanted})
        candidate.absorb(result)
