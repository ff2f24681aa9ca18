"""The demo agent's work in the user's kernel, through the MCP server ``kernel`` its session was offered,
with the official MCP client (``acp_notebook.kernel_tools.client.open_kernel_tools``).

The prompt grammar (checked after file commands and forms, before everything else; case is ignored):

- ``what is in NAME?`` (or ``what's in NAME``, ``describe NAME``, ``inspect NAME``): list_variables, then
  inspect_variable(NAME); the reply quotes what the kernel said (a DataFrame's real columns and dtypes).
- ``list variables`` / ``what variables ...``: list_variables.
- ``run CODE`` / ``compute EXPR``: run_code(CODE) (EXPR alone: its value comes back); under the notebook's
  "ask" policy the user is asked first, under "read-only" the kernel refuses and the reply says so.
- ``plot NAME``: inspect_variable(NAME), then propose_cell with a plot that suits what it saw (``plot_code``):
  a DataFrame with a text column and a numeric one gets a bar chart of the numeric column by the text column,
  other frames and series ``NAME.plot()``; a cell for the user to run, never run by the agent.
- ``show history`` / ``what did I run``: notebook_history.

Each tool call is reported to the client as an ACP tool_call (in progress) and a tool_call_update
(completed with the tool's text, or failed with its error), so the cell shows it. A session with no
``kernel`` server gets a sentence saying so. Runs inside one prompt turn, on the agent's event loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..kernel_tools.client import open_kernel_tools, result_text
from .host import TurnHost
from .session import DemoSession, RunningTurn, TurnCancelled

__all__ = ["KernelCommand", "KernelWork", "parse_kernel_command", "plot_code"]

_NAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("inspect", re.compile(rf"(?:what\s+is\s+in|what's\s+in|describe|inspect)\s+`?{_NAME}`?\s*\??", re.I)),
    ("list", re.compile(r"(?:list\s+(?:the\s+)?variables|what\s+variables\b.*)", re.I | re.S)),
    ("run", re.compile(r"run\s+(?P<code>.+)", re.I | re.S)),
    ("compute", re.compile(r"compute\s+(?P<code>.+)", re.I | re.S)),
    ("plot", re.compile(rf"plot\s+`?{_NAME}`?\s*\.?", re.I)),
    ("history", re.compile(r"(?:show\s+(?:the\s+)?history|what\s+did\s+i\s+run)\s*\??", re.I)),
)
# What each command calls, in order: (tool, kind of the ACP tool call).
_KINDS = {"list_variables": "read", "inspect_variable": "read", "notebook_history": "read", "run_code": "execute",
          "propose_cell": "edit"}
_QUOTED = 3000  # characters of a tool's text quoted in the reply


@dataclass(frozen=True)
class KernelCommand:
    action: str  # inspect, list, run, compute, plot, history
    name: str = ""
    code: str = ""


def parse_kernel_command(prompt: str) -> KernelCommand | None:
    """The kernel command a prompt asks for (see the module docstring), or None."""
    text = prompt.strip()
    for action, pattern in _PATTERNS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        groups = match.groupdict()
        code = _strip_fence(groups.get("code") or "")
        return KernelCommand(action, name=groups.get("name") or "", code=code)
    return None


def _strip_fence(code: str) -> str:
    """``run `x = 1` `` and a fenced block alike: the code without its backticks."""
    code = code.strip()
    fenced = re.fullmatch(r"```(?:python)?\s*\n?(.*?)\n?```", code, re.S)
    if fenced:
        return fenced.group(1)
    return code[1:-1] if len(code) > 1 and code[0] == code[-1] == "`" else code


_COLUMN = re.compile(r"^- (?P<name>[A-Za-z_][A-Za-z0-9_]*): (?P<dtype>[\w\[\], ]+), \d+$", re.M)
_NUMERIC = re.compile(r"^(u?int|float)\d*$|^(Int|UInt|Float)\d+$")
_TEXT = ("str", "object", "string", "category")


def plot_code(name: str, inspected: str) -> tuple[str, str]:
    """The cell that plots ``name`` as inspect_variable described it, and why: a bar chart of the first numeric
    column by the first text column where the frame has both, else pandas' default plot."""
    columns = [(m.group("name"), m.group("dtype").strip()) for m in _COLUMN.finditer(inspected)]
    text = next((column for column, dtype in columns if dtype in _TEXT), None)
    number = next((column for column, dtype in columns if _NUMERIC.match(dtype)), None)
    if text is not None and number is not None:
        return (f"{name}.plot.bar(x={text!r}, y={number!r})",
                f"A bar chart of {number} by {text}: {name} has a text column and a numeric one.")
    return f"{name}.plot()", f"Plot {name} with pandas' default plot (no text and numeric column pair to chart)."


def _quoted(text: str) -> str:
    shown = text if len(text) <= _QUOTED else text[:_QUOTED] + "\n..."
    return f"\n```\n{shown}\n```"


class KernelWork:
    """One kernel command inside a turn; ``run`` returns the reply's text."""

    def __init__(self, agent: TurnHost, session: DemoSession, command: KernelCommand, turn: RunningTurn) -> None:
        self.agent = agent
        self.session = session
        self.command = command
        self.turn = turn

    async def run(self) -> str:
        entry = self.session.kernel
        if entry is None:
            return ("This session has no `kernel` MCP server, so I cannot look into your kernel (a notebook offers "
                    "one to every session unless its kernel tools are off).")
        # A cancelled turn leaves the MCP client's scope normally and is raised outside it: raised through the
        # SDK's task groups, it came out as an ExceptionGroup (the turn then failed with -32603).
        async with open_kernel_tools(entry) as client:
            try:
                return await self._command(client)
            except TurnCancelled:
                pass
        raise TurnCancelled

    async def _command(self, client: Any) -> str:
        command = self.command
        if command.action == "inspect":
            listing, _ = await self._call(client, "list_variables", {})
            text, failed = await self._call(client, "inspect_variable", {"name": command.name})
            if failed:
                return f"I could not inspect `{command.name}`: {text}"
            known = "" if re.search(rf"\b{re.escape(command.name)}\b", listing) else " (it was not in the listing)"
            return f"Here is what your kernel says about `{command.name}`{known}:{_quoted(text)}"
        if command.action == "list":
            text, _ = await self._call(client, "list_variables", {})
            return f"The variables in your kernel:{_quoted(text)}"
        if command.action in ("run", "compute"):
            text, failed = await self._call(client, "run_code", {"code": command.code})
            if failed and "Traceback (most recent call last)" in text:
                return f"The code ran and raised an error:{_quoted(text)}"
            if failed:  # refused, rejected, stopped, or it did not compile
                return f"The code did not run: {text}"
            return f"I ran it in your kernel." + (f" It printed:{_quoted(text)}" if text.strip() else "")
        if command.action == "plot":
            seen, failed = await self._call(client, "inspect_variable", {"name": command.name})
            if failed:
                return f"I could not look at `{command.name}` to plot it: {seen}"
            code, explanation = plot_code(command.name, seen)
            text, failed = await self._call(client, "propose_cell", {"code": code, "explanation": explanation})
            if failed:
                return f"I could not propose the cell: {text}"
            return f"I proposed a cell that plots `{command.name}`; it has not run. Run it when it looks right."
        text, _ = await self._call(client, "notebook_history", {})
        return f"What ran in your notebook lately:{_quoted(text)}"

    async def _call(self, client: Any, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Call one tool, reported as an ACP tool call; (its text, whether it failed)."""
        session = self.session
        session.tool_calls += 1
        call_id = f"call-{session.tool_calls}"
        await self.agent.update(session, {"sessionUpdate": "tool_call", "toolCallId": call_id,
                                          "title": f"kernel: {tool}", "name": f"mcp__kernel__{tool}",
                                          "kind": _KINDS[tool], "status": "in_progress",
                                          "rawInput": arguments})
        try:
            result = await self.turn.unless_cancelled(client.call_tool(tool, arguments))
        except TurnCancelled:
            await self._settle(call_id, "failed", "Cancelled")
            raise
        except Exception as exc:  # noqa: BLE001 - the bridge or the channel failed: the turn reports it
            text = f"{type(exc).__name__}: {exc}"
            await self._settle(call_id, "failed", text)
            return text, True
        text = result_text(result)
        failed = bool(getattr(result, "is_error", False))
        await self._settle(call_id, "failed" if failed else "completed", text)
        return text, failed

    async def _settle(self, call_id: str, status: str, text: str) -> None:
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}
        if text:
            update["content"] = [{"type": "content", "content": {"type": "text", "text": text}}]
        await self.agent.update(self.session, update)
