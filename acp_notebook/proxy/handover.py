"""Moving a prompted session to another agent by handing its conversation over (set model=`b:x` after turns on `a`).

An agent session cannot move between agents, so the proxy opens a session on the new agent (with the
client's MCP servers, its ``kernel`` entry through a fresh relay: binder.py), binds the proxy session to
it, and releases the old agent's session (its relay closes before the client hears back). The
conversation so far (transcript.py) goes to the new agent as the context of the session's next prompt:
a first text block written as the client's own handovers write it (``branching.handover_text``: prompts,
replies, tool calls with their results, capped and said so), the prompt marked with a ``_meta`` entry
``acp-notebook/handover`` (``{"from": "a:model", "turns": N, ...}``) so the agent and any reader of the
frames can tell it from a normal turn. The client is told at once: the set_config_option answer and a
``session_info_update`` carry the same ``_meta`` entry, with "handed over from a:model after N turns".

Threads: the proxy's one event loop (called under the session's lock, from the options view).
"""

from __future__ import annotations

from typing import Any

from .._protocol import join_agent_model
from ..branching import HANDOVER_META, handover_text
from .binder import Binder
from .hub import Hub
from .options import OptionsView
from .relay import closing_relays
from .session import ProxySession

__all__ = ["HANDOVER_META", "HandOver", "with_handover"]


class HandOver:
    """set_config_option model=`agent:model` on a prompted session bound to another agent."""

    def __init__(self, hub: Hub, binder: Binder, view: OptionsView) -> None:
        self.hub = hub
        self.binder = binder
        self.view = view

    async def move(self, session: ProxySession, agent: str, bare: str) -> dict[str, Any]:
        old = session.bound
        assert old is not None
        pending = session.pending_handover
        if pending is not None:  # handed over again before any prompt: the conversation is still the first one's
            text, meta = pending
            source, exchanges = meta["from"], None
        else:
            source = join_agent_model(old.agent, session.selected[1] if session.selected else old.models.current)
            exchanges = session.transcript.so_far()
        await self.binder.bind(session, agent, bare)  # a failure puts the session back on `old`
        self.binder.release(old, close=True)
        await closing_relays()  # the old agent's way to the kernel is shut before the client hears back
        if exchanges is not None:
            text, capped = handover_text(exchanges, source)
            turns = len(exchanges)
            meta = {"from": source, "turns": turns, "capped": capped,
                    "description": f"handed over from {source} after {turns} {'turn' if turns == 1 else 'turns'}"}
        meta = {**meta, "to": join_agent_model(agent, bare)}
        session.pending_handover = (text, meta)
        self.hub.send_to_client("session/update", {"sessionId": session.id, "update": {
            "sessionUpdate": "session_info_update", "_meta": {HANDOVER_META: meta}}})
        return {"configOptions": self.view.client_options(session), "_meta": {HANDOVER_META: meta}}


def with_handover(params: dict[str, Any], pending: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A session/prompt request carrying a conversation handed over: its text as the first block, and the marker."""
    text, meta = pending
    meta_out = {**dict(params.get("_meta") or {}), HANDOVER_META: meta}
    return {**params, "prompt": [{"type": "text", "text": text}, *(params.get("prompt") or [])], "_meta": meta_out}
