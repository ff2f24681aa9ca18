"""The system prompt agents started from the magics get by default: a short note that they run in a Jupyter
notebook, and what the MCP server ``kernel`` lets them do under the agent's kernel-tools policy.

Sent as the unstable ``systemPrompt`` (mode from ``AcpMagics.system_prompt_mode``, "append" by default) where
the agent takes one; ``%config AcpMagics.system_prompt = ""`` turns it off and any other text replaces it. The
text is made when each session opens, so it follows the policy in force then (and AcpMagics.system_prompt as it
is then; the mode is read when the agent starts). The functions run on any thread; ``tell_system_prompt`` on the
kernel thread, the text it gives the agent on the loop thread when a session opens (it only reads settings).
"""

from __future__ import annotations

from typing import Any

from .._explain import KERNEL_SERVER

__all__ = ["notebook_note", "tell_system_prompt"]

_READING = "list_variables, inspect_variable and notebook_history read the person's variables and recent cells"
_POLICIES = {
    "ask": "run_code runs Python in their kernel once they allow it (they see the code first)",
    "read-only": "run_code is refused: you may read, not run",
    "allow": "run_code runs Python in their kernel at once, as their own code would",
}


def notebook_note(policy: str | None) -> str:
    """The note for an agent whose kernel tools have ``policy`` (ask, read-only, allow, off)."""
    note = ("You are working from a Jupyter notebook: the person reads your replies in notebook cells, where "
            "Markdown renders.")
    if policy in _POLICIES:
        note += (f" The MCP server `{KERNEL_SERVER}` reaches their notebook's Python kernel: {_READING}; "
                 f"{_POLICIES[policy]}; propose_cell proposes a cell they may run themselves.")
    else:
        note += " You have no access to the notebook's kernel."
    return note


def tell_system_prompt(agent: Any, magics: Any) -> None:
    """Give ``agent`` (an acpnb Agent started by the magics) the system prompt ``magics`` say, for every session
    it opens from now on."""

    def text(of: Any) -> str | None:
        configured = magics.system_prompt
        return notebook_note(of.kernel_tools) if configured is None else configured or None

    agent.system_prompt = text
    agent.system_prompt_mode = magics.system_prompt_mode
