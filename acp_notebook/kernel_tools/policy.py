"""The kernel tools' policy words, and the plain data they hand to the notebook side.

Pure data and functions; any thread may use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["OFF_REFUSAL", "POLICIES", "KernelToolEvent", "RunRequest", "parse_policy", "READ_ONLY_REFUSAL", "REJECTED"]

# "ask": run_code waits for the user's Allow; "read-only": reading tools only; "allow": run_code runs;
# "off": no server is offered to sessions opened now, and a running session's server refuses every call
# (its connection stays, so switching back on works again in the same session).
POLICIES: tuple[str, ...] = ("ask", "read-only", "allow", "off")
Policy = Literal["ask", "read-only", "allow", "off"]

READ_ONLY_REFUSAL = ('refused: the kernel tools are read-only; `%config AcpMagics.kernel_tools = "allow"` '
                     'or "ask" lets the agent run code')
REJECTED = "the user rejected running this code"
OFF_REFUSAL = "off: the user turned kernel tools off (`%config AcpMagics.kernel_tools`)"


def parse_policy(value: Any) -> str:
    """``value`` as one of POLICIES (case and surrounding space ignored; "readonly" and "read_only"
    read as "read-only"), else ValueError naming the choices."""
    word = value.strip().lower().replace("_", "-") if isinstance(value, str) else None
    if word == "readonly":
        word = "read-only"
    if word not in POLICIES:
        raise ValueError(f"kernel_tools must be one of {', '.join(repr(p) for p in POLICIES)}, not {value!r}")
    return word


@dataclass(frozen=True)
class RunRequest:
    """What ``ask`` is shown before ``run_code`` runs under the "ask" policy."""

    code: str
    tool: str = "run_code"
    call_id: str = ""  # the MCP call it belongs to (see KernelToolEvent.call_id)


@dataclass(frozen=True)
class KernelToolEvent:
    """One thing the kernel tools did, for the notebook to show in the running turn's cell.

    kind: "tool_call" (any tool was called), "tool_answered" (any tool answered; ``error``: the text of an
    error answer), "run_code_started", "run_code_held" (the code did not end when stopped and holds the kernel;
    ``error`` says so), "run_code_finished" (the code ended, or never ran), "propose_cell". ``outputs`` are plain dicts:
    {"type": "text", "text"} or {"type": "image", "data" (base64), "mimeType"}; a run_code that failed has
    its error text (a traceback, why it was stopped or refused) in ``error``, not among them; "tool_answered" has
    the answer's content in ``outputs`` (images included) unless it is an error.

    ``call_id`` is the call's identity: which bridge connection and which MCP request (``"2:7"``: the second
    connection's request 7), or ``"local:N"`` for a call made in process; every event of one call carries it, so
    two identical calls in flight are never mistaken for each other.
    """

    kind: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    code: str | None = None
    explanation: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    call_id: str = ""
