"""The built-in demo agent: an offline, deterministic ACP agent on stdio (`acp-notebook demo-agent`).

Modules: `agent` (the protocol side), `dispatch` (a prompt turn: which work a prompt's text asks
for, and the streamed reply), `session` and `store` (sessions as files in a state directory:
``--state-dir``, ``$ACP_NOTEBOOK_DEMO_STATE``, or ``~/.local/share/acp-notebook/demo-sessions``),
`options` (config options), `replies` (reply text), `filework` (read/write through the client),
`kernelwork` (the kernel tools over MCP), `elicitation` (the "ask me" form), `tasks` (arithmetic
questions and file edits with known answers for sweeps), `server` (command line and stdio); it is served by
the package's one agent-side path (``acp_notebook.agent_side``, on the SDK's ``Connection``).

Sessions survive the process: a later demo process lists, loads (replaying the history), resumes
and deletes them, and the conversation keeps its context: "what did I say first?" is answered
with the session's first prompt, however many processes ago it was sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names
from .._sdk import defer_sdk_package

if TYPE_CHECKING:
    from .agent import DemoAgent
    from .server import main

__all__ = ["DemoAgent", "main"]



def _demo_agent() -> type[DemoAgent]:
    """The demo speaks through the SDK's Connection and plain dicts (see ``agent_side``): it never needs the SDK's
    schema models, which the SDK package's own __init__ would build. So the first use of the demo agent
    sets the SDK's package up without them (_sdk.py), before its modules import the SDK; importing this
    package changes nothing outside it."""
    defer_sdk_package()
    from .agent import DemoAgent  # the demo agent's modules import the acp SDK: only after the line above

    return DemoAgent


__getattr__, __dir__ = lazy_names(__name__, globals(), {"DemoAgent": _demo_agent, "main": ".server"})
