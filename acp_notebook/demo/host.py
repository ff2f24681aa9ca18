"""What the demo agent's work modules (filework.py, notices.py, dispatch.py, kernelwork.py) may use of the
agent that runs them: its connection to the client, its updates, what the client said it can do.

``DemoAgent`` (agent.py) is the one ``TurnHost``; the work modules name this protocol instead of the
agent class, so that agent.py imports them and none of them imports agent.py. Plain typing: no state.
"""

from __future__ import annotations

from typing import Any, Protocol

from .session import DemoSession

__all__ = ["Deferred", "TurnHost"]


class Deferred(Protocol):
    """Updates kept until a session's running prompt is answered (notices.py's AfterAnswers)."""

    def add(self, session_id: str, updates: list[dict[str, Any]]) -> None: ...


class TurnHost(Protocol):
    """The agent as a prompt turn's work sees it."""

    delay: float  # the pause between streamed pieces
    client_reads: bool  # fs.readTextFile
    client_writes: bool  # fs.writeTextFile
    client_forms: bool  # elicitation (form)
    client_notices: bool  # session.notices
    client_compaction: bool  # session.compaction
    after_answers: Deferred

    def wire(self) -> Any:
        """The SDK's Connection to the client (requests and notifications of our own)."""

    async def update(self, session: DemoSession, update: dict[str, Any]) -> None:
        """Send one session/update for ``session``."""

    def save(self, session: DemoSession) -> None:
        """Write the session to the agent's store."""

    async def push_options(self, session: DemoSession) -> None:
        """Send the session's config options again (a config_option_update)."""
