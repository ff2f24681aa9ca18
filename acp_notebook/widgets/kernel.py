"""What the agent did in the user's kernel, as a turn's view and its saved forms show it: each ``KernelCall``
(turn.py) as HTML (code highlighted, text and image outputs, how an ask was answered) and as Markdown / plain
text, and the highlighted code a run_code question shows above its Allow / Reject buttons.

Every text from the agent or the kernel (code, arguments, outputs, errors) is shown through ``visible``:
control, bidi and zero-width characters are written as escapes. A call whose code still runs after it was
stopped ("held") says so, and how the user gets the kernel back.

One card per call: ``pair_kernel_calls`` matches each kernel call to the agent's own tool_call of it (by the
tool's name and its rawInput, in order; see there), and the view draws the pair as one card (the kernel's record,
with a line for the agent's report).

Pure functions of plain values (a KernelCall is read, never changed; ``pair_kernel_calls`` adds to the dict it is
given, under its caller's lock); safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from html import escape
from typing import Any

from .._visible import visible
from ..kernel_tools.tools import names_kernel_tool
from ._html import BORDER, FG, MONO, MUTED, TOOL_STATUS_COLORS, md_escape
from .cardstyle import status_classes

__all__ = ["card_state", "code_html", "kernel_call_html", "kernel_call_markdown", "kernel_call_text", "kernel_decisions",
           "kernel_tools_note", "pair_kernel_calls"]

# A call's status as a tool call's badge reads (same colours as the agent's own tool calls).
STATUS_WORDS: dict[str, tuple[str, str]] = {
    "asking": ("waiting for you", "#6a1b9a"),
    "running": ("running", TOOL_STATUS_COLORS["in_progress"]),
    "held": ("still running: holds the kernel", "#e65100"),
    "done": ("done", TOOL_STATUS_COLORS["completed"]),
    "failed": ("failed", TOOL_STATUS_COLORS["failed"]),
    "refused": ("refused", TOOL_STATUS_COLORS["failed"]),
    "proposed": ("proposed, not run", "#1565c0"),
    "withdrawn": ("withdrawn", MUTED),
}
# What each policy lets the agent do, as a session panel says it.
POLICY_NOTES: dict[str, str] = {
    "ask": "kernel tools: ask (the agent reads your variables and asks before running code)",
    "read-only": "kernel tools: read-only (the agent reads your variables, runs no code)",
    "allow": "kernel tools: allow (the agent reads your variables and runs code)",
    "off": "kernel tools: off (the agent's calls are refused; `%config AcpMagics.kernel_tools = 'ask'` turns them "
           "back on in this session)",
}
# A session opened while the tools were off has no server: what the panel says once they are on for its agent.
NO_SERVER_NOTE = ("kernel tools: none in this session (it was opened while they were off); `%acp new` opens a session "
                  "with them")
TEXT_SHOWN = 4000  # characters of one text output shown in a view (the agent got the tool's own cap)
PROPOSED_NOTE = "Proposed as a new cell below this one; nothing ran. Review it, then run it yourself."
PROPOSED_COPY_NOTE = "Proposed; nothing ran. Copy it into a cell to run it."
HELD_NOTE = ("This code did not stop when it was interrupted and still holds the kernel: nothing else (your cells "
             "included) runs until it ends. Interrupt the kernel again (Kernel > Interrupt Kernel); if it still "
             "runs, restart the kernel (Kernel > Restart Kernel; its variables are lost). This note is replaced when "
             "the code ends.")


@lru_cache(maxsize=1)
def _highlighter() -> Any:
    """(highlight, lexer, formatter) from pygments (IPython's dependency), or None where it is missing."""
    try:
        # pygments (with its lexer tables) on the first code shown, not with every view that imports this module.
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return None
    # Inline styles, no classes: the saved HTML has no stylesheet to lean on.
    return highlight, PythonLexer(), HtmlFormatter(noclasses=True, nowrap=True, style="default")


def code_html(code: str, *, inline: bool = True) -> str:
    """Python code as a highlighted block; ``inline=False``: its box's look is the cards' class (cardstyle.py)."""
    tools = _highlighter()
    code = visible(code)
    body = tools[0](code, tools[1], tools[2]) if tools is not None else escape(code)
    if not inline:
        return f'<pre class="acpnb-kernel-code">{body}</pre>'
    return (f'<pre class="acpnb-kernel-code" style="margin:2px 0;padding:4px 8px;font-family:{MONO};'
            f'font-size:0.85em;white-space:pre-wrap;color:{FG};border:1px solid {BORDER};border-radius:3px">'
            f"{body}</pre>")


def kernel_tools_note(session: Any) -> str:
    """The session's kernel tools policy in words. A session offered none: "kernel tools: off" while its agent's
    policy is off, else how to get a session with them ("" for a session that has no agent)."""
    link = getattr(session, "kernel_tools", None)
    if link is not None:
        return POLICY_NOTES.get(link.policy, "")
    policy = getattr(getattr(session, "agent", None), "kernel_tools", None)
    if not isinstance(policy, str):
        return ""
    return "kernel tools: off" if policy == "off" else NO_SERVER_NOTE


def _arguments_words(call: Any) -> str:
    """The arguments of a reading tool in a few words: ``name='df', rows=5``."""
    return visible(", ".join(f"{key}={value!r}" for key, value in (call.arguments or {}).items() if key != "code"))


# How the call's decision reads on its card: a person asked, or the policy decided.
DECISION_WORDS = {"allowed": "asked and allowed", "rejected": "asked and rejected"}


def _decision_lines(call: Any, decisions: Sequence[str]) -> list[str]:
    """How the call was decided: the prompt's own words when one was shown, else the call's."""
    if decisions:
        return list(decisions)
    return [f"decision: {DECISION_WORDS.get(call.decision, call.decision)}"] if call.decision else []


def _agent_line(agent: Any) -> str:
    """The agent's own report of the call (its tool_call), in a few words: title, name, status."""
    parts = [str(agent.title or ""), str(getattr(agent, "name", None) or ""), str(agent.status or "pending")]
    return visible("the agent's call: " + " · ".join(p for p in parts if p))


def _output_html(block: Mapping[str, Any]) -> str:
    if block.get("type") == "image" and isinstance(block.get("data"), str):
        mime = escape(str(block.get("mimeType") or "image/png"))
        return f'<img class="acpnb-kernel-image" src="data:{mime};base64,{escape(block["data"])}"/>'
    text = block.get("text")
    if not isinstance(text, str) or not text:
        return ""
    text = visible(text, keep_cr=True)
    shown = text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN] + f"\n... ({len(text) - TEXT_SHOWN:,} more characters)"
    return f'<pre class="acpnb-kernel-output">{escape(shown)}</pre>'


def _title(call: Any) -> str:
    if call.tool == "run_code":
        return "Ran code in your kernel" if call.status in ("done", "failed") else "Run code in your kernel"
    if call.tool == "propose_cell":
        return "Proposed a cell"
    return f"{call.tool}({_arguments_words(call)})"


def kernel_call_html(call: Any, decisions: Sequence[str] = (), *, below: bool = True, agent: Any = None) -> str:
    """One kernel call: the tool, its status, the code, how it was decided, the outputs (images as images) or the
    error. ``below``: a proposed cell was put below the running one (else the reader is told to copy it).
    ``agent``: the agent's own tool_call of this call (a ToolCall), merged into this one card.

    The look is classes (cardstyle.py): the live section's stylesheet, inlined in the saved forms."""
    words = STATUS_WORDS.get(call.status, (call.status, MUTED))[0]
    border, fill = status_classes(call.status)
    head = (f'<span class="acpnb-card-title">{escape(_title(call))}</span>'
            f'<span class="acpnb-chip acpnb-tool-kind">kernel</span>'
            f'<span class="acpnb-badge {fill} acpnb-tool-status">{escape(words)}</span>')
    explanation = visible(call.explanation)
    body = [f'<div class="acpnb-kernel-explanation">{escape(explanation)}</div>'] if explanation else []
    if agent is not None:
        body.append(f'<div class="acpnb-card-muted acpnb-kernel-agent">{escape(_agent_line(agent))}</div>')
    if call.code and call.status != "asking":  # while asking, the Allow / Reject prompt shows the code
        body.append(code_html(call.code, inline=False))
    for line in _decision_lines(call, decisions):
        body.append(f'<div class="acpnb-card-muted acpnb-permission-decision">{escape(line)}</div>')
    body.extend(_output_html(block) for block in call.outputs if isinstance(block, Mapping))
    if call.error:
        body.append(f'<pre class="acpnb-kernel-error">{escape(visible(call.error))}</pre>')
    if call.status == "held":
        body.append(f'<div class="acpnb-kernel-held">{escape(HELD_NOTE)}</div>')
    if call.tool == "propose_cell":
        body.append(f'<div class="acpnb-card-muted">{escape(PROPOSED_NOTE if below else PROPOSED_COPY_NOTE)}</div>')
    merged = " acpnb-kernel-merged" if agent is not None else ""
    return (f'<div class="acpnb-kernel-call {border}{merged}"><div class="acpnb-card-head">{head}</div>'
            f'{"".join(body)}</div>')


def _output_words(block: Mapping[str, Any]) -> str:
    if block.get("type") == "image":
        return visible(f"[an image, {block.get('mimeType') or 'image/png'}]")
    return visible(str(block.get("text") or ""))


def kernel_call_text(call: Any, decisions: Sequence[str] = (), *, below: bool = True) -> str:
    """The call as plain text (the saved notebook's text/plain)."""
    words = STATUS_WORDS.get(call.status, (call.status, ""))[0]
    lines = [f"{_title(call)} [kernel, {words}]"]
    if call.explanation:
        lines.append(visible(call.explanation))
    if call.code:
        lines.extend(f"    {line}" for line in visible(call.code).splitlines())
    lines += _decision_lines(call, decisions)
    lines += [_output_words(b) for b in call.outputs if isinstance(b, Mapping) and _output_words(b)]
    if call.error:
        lines.append(visible(call.error))
    if call.status == "held":
        lines.append(HELD_NOTE)
    if call.tool == "propose_cell":
        lines.append(PROPOSED_NOTE if below else PROPOSED_COPY_NOTE)
    return "\n".join(lines)


def kernel_call_markdown(call: Any, decisions: Sequence[str] = (), *, below: bool = True) -> str:
    """The call as Markdown: code and outputs in fenced blocks (images named, not embedded)."""
    words = STATUS_WORDS.get(call.status, (call.status, ""))[0]
    parts = [f"**{md_escape(_title(call))}** (kernel, {md_escape(words)})"]
    if call.explanation:
        parts.append(md_escape(visible(call.explanation)))
    if call.code:
        parts.append(f"```python\n{visible(call.code)}\n```")
    parts += [f"*{md_escape(d)}*" for d in _decision_lines(call, decisions)]
    texts = [_output_words(b) for b in call.outputs if isinstance(b, Mapping) and _output_words(b)]
    if texts:
        parts.append("```\n" + "\n".join(texts) + "\n```")
    if call.error:
        parts.append("```\n" + visible(call.error) + "\n```")
    if call.status == "held":
        parts.append(f"**{md_escape(HELD_NOTE)}**")
    if call.tool == "propose_cell":
        parts.append(f"*{PROPOSED_NOTE if below else PROPOSED_COPY_NOTE}*")
    return "\n\n".join(parts)


# --- one card per call: the agent's tool_call and the kernel's record of it ---------------------------------
def _names_tool(tool_call: Any, tool: str) -> bool:
    """Whether the agent's tool call names the kernel server's ``tool`` (by its name, else its title)."""
    return names_kernel_tool(getattr(tool_call, "name", None), getattr(tool_call, "title", None), tool)


def _same_input(tool_call: Any, call: Any) -> bool:
    """The agent's rawInput is the kernel call's arguments (where the agent sends one; none matches by name)."""
    raw = getattr(tool_call, "raw_input", None)
    return raw is None or raw == call.arguments


def pair_kernel_calls(tool_calls: Sequence[Any], kernel_calls: Sequence[Any], paired: dict[str, str]) -> dict[str, Any]:
    """Match each kernel call to the agent's tool_call of it; ``paired`` (kernel call id -> tool call id) keeps the
    matches made so far and gains the new ones. Returns tool call id -> its KernelCall.

    Identity first: a kernel call is one MCP request of one session (KernelCall.request), so two identical calls
    are two records; each takes the earliest of the agent's tool calls not taken yet that names its tool with the
    same ``rawInput``, in the order both sides made them. A tool_call not seen yet (or an agent that sends none)
    leaves the kernel call on a card of its own until it comes."""
    by_id = {call.id: call for call in tool_calls}
    taken = set(paired.values())
    for call in kernel_calls:
        if call.id in paired:
            continue
        match = next((c for c in tool_calls if c.id not in taken and _names_tool(c, call.tool) and _same_input(c, call)),
                     None)
        if match is not None:
            paired[call.id] = match.id
            taken.add(match.id)
    kernel_by_id = {call.id: call for call in kernel_calls}
    return {tool_id: kernel_by_id[kernel_id] for kernel_id, tool_id in paired.items()
            if tool_id in by_id and kernel_id in kernel_by_id}


def kernel_decisions(call: Any, decisions: Mapping[str, Sequence[str]], permission_note: str) -> list[str]:
    """The decision lines of a kernel call's card: the prompt's words (``decisions`` by call id), else, for an ask
    that a policy answered with nobody asked, that it was answered automatically and by what."""
    lines = list(decisions.get(call.id, ()))
    if not lines and permission_note and call.decision in ("allowed", "rejected"):
        lines = [f"permission: {call.decision} automatically ({permission_note})"]
    return lines


def card_state(call: Any) -> tuple[Any, ...]:
    """What a kernel call's card is made from (a changed call makes its card again)."""
    return (call.status, call.decision, call.error, call.code, call.explanation, len(call.outputs))
