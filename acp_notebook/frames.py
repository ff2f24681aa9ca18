"""Frame analysis: what each logged ACP frame is, answers, changes and breaks; plain data, no widgets, no agent.

Input is a list of log entries as ``Agent.log`` (and a recording) holds them:
``{"dir": "send"|"recv", "t": float, "msg": dict, "note"?: str}``, where "send" means the
client sent it. ``analyze(entries)`` returns one ``FrameRow`` per entry; ``Analyzer`` does
the same one entry at a time for a live view. Along the way it pairs each response with its
request (and both with the round-trip time), follows every session's config options (so an
answer or ``config_option_update`` shows what changed) and its title/``_meta`` (with the
partial-update rules applied), says what each MCP server a session request offers is (the
notebook's own ``kernel`` server explained in full), and can check frames against the ACP schema.

An Analyzer is not thread-safe: its owner serializes calls (the inspector holds a lock
while it feeds entries from the loop thread and renders from either thread).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _schema
from ._explain import Explanation, explain, explain_mcp, mcp_server_lines
from .kernel_tools.tools import names_kernel_tool
from .state import merge_meta

__all__ = ["Analyzer", "CapabilityUse", "ConfigDiff", "FrameRow", "analyze", "capabilities", "check_rows"]

KIND_WORDS = {"request": "request", "notification": "notification", "result": "response", "error": "error"}


@dataclass(frozen=True)
class ConfigDiff:
    """How a complete config-option list differs from the session's previous one."""

    initial: bool  # the session's first list: everything in it is "added"
    count: int  # options in the new list
    added: tuple[tuple[str, str, Any], ...] = ()  # (id, name, value)
    removed: tuple[tuple[str, str], ...] = ()  # (id, name)
    changed: tuple[tuple[str, Any, Any], ...] = ()  # (id, old value, new value)
    choices: tuple[tuple[str, int, int], ...] = ()  # (id, choices added, choices removed)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.choices)

    def lines(self) -> list[str]:
        """One line per difference, for people."""
        if self.initial:
            return [f"{oid} ({name}) = {value!r}" for oid, name, value in self.added]
        out = [f"{oid}: {old!r} \u2192 {new!r}" for oid, old, new in self.changed]
        out += [f"+ {oid} ({name}) = {value!r}" for oid, name, value in self.added]
        out += [f"\u2212 {oid} ({name})" for oid, name in self.removed]
        out += [f"{oid}: choices changed (+{plus} \u2212{minus})" for oid, plus, minus in self.choices]
        return out or ["no change"]

    def brief(self) -> str:
        """The gist in a few words: ``5 options · model fast→smart · +thought_level``."""
        head = f"{self.count} option{'s' if self.count != 1 else ''}"
        if self.initial:
            return f"{head}: " + ", ".join(f"{oid}={value}" for oid, _name, value in self.added) if self.added else head
        parts = [f"{oid} {old}\u2192{new}" for oid, old, new in self.changed]
        parts += [f"+{oid}" for oid, _name, _value in self.added] + [f"\u2212{oid}" for oid, _name in self.removed]
        parts += [f"{oid} choices changed" for oid, _plus, _minus in self.choices]
        return " \u00b7 ".join([head, *parts]) if parts else f"{head} \u00b7 unchanged"


@dataclass(eq=False)
class FrameRow:
    """One frame as the inspector shows it. ``pair``/``rtt`` of a request are filled in when its answer arrives."""

    index: int
    direction: str  # "send" (client -> agent) or "recv" (agent -> client)
    t: float
    kind: str  # request, notification, result, error
    method: str  # for results and errors: the method of the request they answer ("?" if unknown)
    update: str  # the sessionUpdate kind of a session/update, else ""
    session_id: str
    summary: str
    msg: Mapping[str, Any]
    explanation: Explanation
    note: str = ""
    pair: int | None = None  # the index of the request this answers, or of the answer to this request
    rtt: float | None = None  # seconds between request and answer
    config: ConfigDiff | None = None
    info: dict[str, Any] | None = None  # title, updatedAt and _meta after a session_info_update
    servers: tuple[str, ...] = ()  # what each MCP server a session/new, load or resume offers is
    issues: tuple[_schema.SchemaIssue, ...] | None = None  # None: not checked (yet, or no jsonschema)
    checked: bool = False
    protocol: str = "acp"  # "mcp": a message between the agent and the kernel tools (direction mcp-in / mcp-out)
    link: int | None = None  # an MCP tools/call and the agent's tool_call of it: each other's index
    rendered: tuple[Any, str] | None = None  # the row's HTML and what it was made from (widgets/_frames_html.py)

    @property
    def sender(self) -> str:
        return {"send": "client", "mcp-out": "kernel"}.get(self.direction, "agent")

    @property
    def label(self) -> str:
        """What the frame is about: the update kind for session/update, else the method."""
        return self.update or self.method

    @property
    def kind_word(self) -> str:
        return KIND_WORDS.get(self.kind, self.kind)

    @property
    def clock(self) -> str:
        return datetime.datetime.fromtimestamp(self.t).strftime("%H:%M:%S.%f")[:-3]

    @property
    def violations(self) -> list[_schema.SchemaIssue]:
        return [i for i in self.issues or () if i.level == "violation"]

    @property
    def unknown_fields(self) -> list[_schema.SchemaIssue]:
        return [i for i in self.issues or () if i.level == "unknown"]


# --- summaries ----------------------------------------------------------------------------------
def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _quote(text: Any, limit: int = 60) -> str:
    text = str(text).replace("\n", " ")
    return repr(text if len(text) <= limit else text[:limit] + "\u2026")


def _prompt_text(blocks: Any) -> str:
    """The prompt's first text, then what else it carries: ``'What stands out?' + resource kernel://variables/df.csv, image``."""
    if not isinstance(blocks, list):
        return ""
    blocks = [b for b in blocks if isinstance(b, Mapping)]
    first = next((b for b in blocks if b.get("type") == "text"), None)
    others = [_block_word(b) for b in blocks if b is not first]
    return _quote(first.get("text", "") if first else "") + (" + " + ", ".join(others) if others else "")


def _block_word(block: Mapping[str, Any]) -> str:
    kind = str(block.get("type"))
    uri = _mapping(block.get("resource")).get("uri") if kind == "resource" else block.get("uri")
    return f"{kind} {uri}" if uri else kind


def _update_summary(update: Mapping[str, Any]) -> str:
    kind = str(update.get("sessionUpdate", ""))
    content = _mapping(update.get("content"))
    if kind.endswith("_chunk"):
        return _quote(content.get("text", "")) if content.get("type") == "text" else f"[{content.get('type')}]"
    if kind in ("tool_call", "tool_call_update"):
        return " \u00b7 ".join(str(p) for p in (update.get("title") or update.get("toolCallId", ""),
                                                 update.get("name"), update.get("kind"), update.get("status")) if p)
    if kind == "notice":
        return f"{update.get('severity')}: {_quote(update.get('title', ''))}"
    if kind == "compaction_update":
        return " \u00b7 ".join(str(p) for p in (update.get("compactionId"), update.get("status"),
                                                 "summary" if update.get("summary") else "") if p)
    if kind == "compaction_summary_chunk":
        return f"{update.get('compactionId')} + " + (_quote(content.get("text", "")) if content.get("type") == "text"
                                                      else f"[{content.get('type')}]")
    if kind == "plan":
        return f"{len(update.get('entries') or [])} entries"
    if kind == "available_commands_update":
        names = [f"/{c.get('name')}" for c in update.get("availableCommands") or [] if isinstance(c, Mapping)]
        return f"{len(names)} commands: " + ", ".join(names[:6]) if names else "no commands"
    if kind == "current_mode_update":
        return f"mode={update.get('currentModeId')!r}"
    if kind == "usage_update":
        used, size = update.get("used"), update.get("size")
        cost = _mapping(update.get("cost"))
        text = f"{used:,} of {size:,} tokens" if isinstance(used, int) and isinstance(size, int) else ""
        if cost.get("amount") is not None:
            text += f" \u00b7 {cost.get('amount')} {cost.get('currency', '')}".rstrip()
        return text.strip(" \u00b7")
    return ""


def _request_summary(method: str, params: Mapping[str, Any]) -> str:
    if method == "initialize":
        info = _mapping(params.get("clientInfo"))
        client = f"{info.get('name', 'client')} {info.get('version', '')}".strip()
        return f"protocol v{params.get('protocolVersion')} \u00b7 {client}"
    if method == "session/set_config_option":
        return f"{params.get('configId')}={params.get('value')!r}"
    if method == "session/set_mode":
        return f"mode={params.get('modeId')!r}"
    if method == "session/prompt":
        return _prompt_text(params.get("prompt"))
    if method == "session/new":
        return f"cwd={params.get('cwd')}" + _servers_summary(params) + _system_prompt_summary(params)
    if method in ("session/load", "session/resume", "session/fork"):
        return str(params.get("sessionId") or "") + _servers_summary(params) + _system_prompt_summary(params)
    if method in ("session/close", "session/delete"):
        return str(params.get("sessionId") or "")
    if method == "session/request_permission":
        return str(_mapping(params.get("toolCall")).get("title") or "")
    if method.startswith("fs/"):
        return str(params.get("path") or "")
    if method == "terminal/create":
        return " ".join(str(p) for p in [params.get("command"), *(params.get("args") or [])])
    if method == "authenticate":
        return f"method={params.get('methodId')!r}"
    return ""


def _system_prompt_summary(params: Mapping[str, Any]) -> str:
    """`` · system prompt (append, 312 characters)`` for a request that carries one (unstable ACP)."""
    prompt = _mapping(params.get("systemPrompt"))
    if not prompt:
        return ""
    text = "".join(str(_mapping(b).get("text", "")) for b in prompt.get("content") or [] if isinstance(b, Mapping))
    return f" \u00b7 system prompt ({prompt.get('mode')}, {len(text):,} characters)"


def _servers_summary(params: Mapping[str, Any]) -> str:
    names = [str(_mapping(s).get("name", "?")) for s in params.get("mcpServers") or [] if isinstance(s, Mapping)]
    return f" \u00b7 mcp: {', '.join(names)}" if names else ""


def _result_summary(method: str, result: Mapping[str, Any]) -> str:
    if "stopReason" in result:
        return f"stopReason={result['stopReason']}"
    if method == "initialize":
        info = _mapping(result.get("agentInfo"))
        name = " ".join(str(p) for p in (info.get("name"), info.get("version")) if p)
        return f"protocol v{result.get('protocolVersion')}" + (f" \u00b7 {name}" if name else "")
    if method == "session/request_permission":
        outcome = _mapping(result.get("outcome"))
        return str(outcome.get("optionId") or outcome.get("outcome") or "")
    if method == "session/list":
        return f"{len(result.get('sessions') or [])} sessions"
    if method == "fs/read_text_file" and "content" in result:
        return f"{len(str(result['content']).splitlines())} lines"
    if method == "terminal/create":
        return str(result.get("terminalId") or "")
    if "sessionId" in result:
        return f"session {result['sessionId']}"
    return ""


# --- config options and session info --------------------------------------------------------------
def _choice_values(option: Mapping[str, Any]) -> set[str]:
    values: set[str] = set()
    for entry in option.get("options") or []:
        if not isinstance(entry, Mapping):
            continue
        if isinstance(entry.get("options"), list):  # a group of choices
            values |= {str(c.get("value")) for c in entry["options"] if isinstance(c, Mapping)}
        elif "value" in entry:
            values.add(str(entry["value"]))
    return values


def config_diff(before: Sequence[Mapping[str, Any]] | None, after: Sequence[Mapping[str, Any]]) -> ConfigDiff:
    """What changed between two complete config-option lists (``before`` None: the session's first)."""
    new = {str(o.get("id")): o for o in after if isinstance(o, Mapping)}
    if before is None:
        return ConfigDiff(True, len(new), added=tuple((i, str(o.get("name", i)), o.get("currentValue"))
                                                      for i, o in new.items()))
    old = {str(o.get("id")): o for o in before if isinstance(o, Mapping)}
    changed, choices = [], []
    for oid in (i for i in new if i in old):
        if new[oid].get("currentValue") != old[oid].get("currentValue"):
            changed.append((oid, old[oid].get("currentValue"), new[oid].get("currentValue")))
        was, now = _choice_values(old[oid]), _choice_values(new[oid])
        if was != now:
            choices.append((oid, len(now - was), len(was - now)))
    return ConfigDiff(
        False, len(new),
        added=tuple((i, str(o.get("name", i)), o.get("currentValue")) for i, o in new.items() if i not in old),
        removed=tuple((i, str(o.get("name", i))) for i, o in old.items() if i not in new),
        changed=tuple(changed), choices=tuple(choices))


def apply_info(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """A session's title/updatedAt/_meta after a ``session_info_update`` (partial-update rules)."""
    out = {"title": state.get("title"), "updatedAt": state.get("updatedAt"), "_meta": dict(state.get("_meta") or {})}
    for key in ("title", "updatedAt"):
        if key in update:  # omitted: unchanged; null: cleared
            out[key] = update[key]
    if "_meta" in update:
        out["_meta"] = {} if update["_meta"] is None else merge_meta(out["_meta"], update["_meta"])
    return out


# --- the analyzer ---------------------------------------------------------------------------------------
@dataclass
class _Pending:
    index: int
    method: str
    session_id: str
    t: float


MCP_DIRECTIONS = ("mcp-in", "mcp-out")  # agent -> kernel tools, and back (entries of KernelTools.mcp_frames)


def _tool_input(update: Mapping[str, Any]) -> Any:
    return update.get("rawInput")


class _McpRows:
    """The inspector's MCP rows (as the kernel's side saw them): pairing answers with requests per connection,
    and linking each tools/call with the agent's tool_call of it (the tool's name and rawInput, in order)."""

    def __init__(self) -> None:
        self.pending: dict[tuple[Any, ...], _Pending] = {}
        self.calls: list[tuple[FrameRow, str, Any]] = []  # tools/call rows not linked yet: (row, tool, arguments)
        self.tool_calls: list[tuple[FrameRow, Mapping[str, Any]]] = []  # ACP tool_call rows not linked yet

    def add(self, analyzer: Analyzer, entry: Mapping[str, Any], msg: Mapping[str, Any], t: float) -> FrameRow:
        direction = str(entry.get("dir"))
        session_id, connection = str(entry.get("session") or ""), str(entry.get("connection") or "")
        index, params = len(analyzer.rows), _mapping(msg.get("params"))
        policy = analyzer.kernel_policy() if analyzer.kernel_policy is not None else None
        if "method" in msg:
            method, kind = str(msg["method"]), "request" if "id" in msg else "notification"
            tool = str(params.get("name") or "") if method == "tools/call" else ""
            summary = f"{tool}({_arguments_words(params.get('arguments'))})" if tool else _mcp_summary(method, params)
            row = FrameRow(index, direction, t, kind, method, "", session_id, summary, msg,
                           explain_mcp(method, kind, tool, policy), protocol="mcp")
            if kind == "request":
                self.pending[(session_id, connection, direction, msg["id"])] = _Pending(index, method, session_id, t)
            if tool:
                self._link(row, tool, params.get("arguments"))
            return row
        asked_by = "mcp-in" if direction == "mcp-out" else "mcp-out"
        pending = self.pending.pop((session_id, connection, asked_by, msg.get("id")), None)
        method = pending.method if pending else "?"
        result = _mapping(msg.get("result"))
        if "error" in msg:
            kind, summary = "error", f"{_mapping(msg['error']).get('code')} {_mapping(msg['error']).get('message', '')}"
        else:
            kind, summary = "result", _mcp_result_summary(method, result)
        row = FrameRow(index, direction, t, kind, method, "", session_id, summary.strip(), msg,
                       explain_mcp(method, kind, "", policy), protocol="mcp")
        if pending is not None:
            row.pair, row.rtt = pending.index, t - pending.t
            request = analyzer.rows[pending.index] if pending.index < len(analyzer.rows) else None
            if request is not None and request.index == pending.index:
                request.pair, request.rtt = row.index, row.rtt
                row.link = request.link  # the answer leads to the same tool_call as its request
        return row

    def _link(self, row: FrameRow, tool: str, arguments: Any) -> None:
        """A tools/call: the earliest unlinked tool_call of the session that names its tool with these arguments."""
        for position, (other, update) in enumerate(self.tool_calls):
            if other.session_id == row.session_id and names_kernel_tool(update.get("name"), update.get("title"), tool) \
                    and _tool_input(update) in (None, arguments or {}):
                row.link, other.link = other.index, row.index
                del self.tool_calls[position]
                return
        self.calls.append((row, tool, arguments or {}))

    def link_tool_call(self, analyzer: Analyzer, row: FrameRow, update: Mapping[str, Any]) -> None:
        """An ACP tool_call: the earliest unlinked tools/call it names, else it waits for one."""
        raw = _tool_input(update)
        for position, (call, tool, arguments) in enumerate(self.calls):
            if call.session_id == row.session_id and names_kernel_tool(update.get("name"), update.get("title"), tool) \
                    and raw in (None, arguments):
                row.link, call.link = call.index, row.index
                del self.calls[position]
                return
        if "kernel" in str(update.get("name") or update.get("title") or "").lower():
            self.tool_calls.append((row, update))


def _arguments_words(arguments: Any) -> str:
    if not isinstance(arguments, Mapping):
        return ""
    return ", ".join(f"{key}={_quote(value, 40) if isinstance(value, str) else repr(value)}"
                     for key, value in arguments.items())


def _mcp_summary(method: str, params: Mapping[str, Any]) -> str:
    if method == "initialize":
        info = _mapping(params.get("clientInfo"))
        return f"{info.get('name', '?')} {info.get('version', '')} \u00b7 protocol {params.get('protocolVersion', '?')}"
    if method == "notifications/cancelled":
        return f"request {params.get('requestId')} cancelled" + (f": {params['reason']}" if params.get("reason") else "")
    return ""


def _mcp_result_summary(method: str, result: Mapping[str, Any]) -> str:
    if method == "tools/list":
        return ", ".join(str(_mapping(t).get("name")) for t in result.get("tools") or [])
    if method == "initialize":
        info = _mapping(result.get("serverInfo"))
        return f"{info.get('name', '?')} {info.get('version', '')}"
    if method == "tools/call":
        texts = [str(_mapping(b).get("text") or "") for b in result.get("content") or [] if _mapping(b).get("type") == "text"]
        images = sum(1 for b in result.get("content") or [] if _mapping(b).get("type") == "image")
        head = _quote(" ".join(" ".join(texts).split()), 80) + (f" + {images} image(s)" if images else "")
        return ("error: " if result.get("isError") else "") + head
    return ""


@dataclass
class Analyzer:
    """Turns log entries into rows one at a time, remembering requests, config lists and titles per session."""

    check_schema: bool = False  # check each frame as it is added (else on demand with ``check_rows``)
    # The kernel tools' policy in force (the agent's kernel_tools), read as a session request is added; frames
    # do not carry it.
    kernel_policy: Callable[[], str | None] | None = None
    rows: list[FrameRow] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)  # session ids in the order they appeared
    _pending: dict[tuple[str, Any], _Pending] = field(default_factory=dict)
    _config: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    _info: dict[str, dict[str, Any]] = field(default_factory=dict)
    _mcp: _McpRows = field(default_factory=lambda: _McpRows())

    def add(self, entry: Mapping[str, Any]) -> FrameRow:
        msg = _mapping(entry.get("msg"))
        t = float(entry.get("t") or 0.0)
        if entry.get("dir") in MCP_DIRECTIONS:
            row = self._mcp.add(self, entry, msg, t)
            self.rows.append(row)
            return row
        direction = "send" if entry.get("dir") == "send" else "recv"
        params = _mapping(msg.get("params"))
        if "method" in msg:
            row = self._add_call(direction, t, msg, params)
        else:
            row = self._add_answer(direction, t, msg)
        row.note = str(entry.get("note") or "")
        if row.session_id and row.session_id not in self.sessions:
            self.sessions.append(row.session_id)
        self.rows.append(row)
        if self.check_schema:
            check_rows([row])
        return row

    def _add_call(self, direction: str, t: float, msg: Mapping[str, Any], params: Mapping[str, Any]) -> FrameRow:
        method = str(msg["method"])
        session_id = str(params.get("sessionId") or "")
        kind = "request" if "id" in msg else "notification"
        update = _mapping(params.get("update")) if method == "session/update" else {}
        update_kind = str(update.get("sessionUpdate") or "")
        row = FrameRow(len(self.rows), direction, t, kind, method, update_kind, session_id,
                       _update_summary(update) if update else _request_summary(method, params), msg,
                       explain(method, kind, update_kind))
        if kind == "request":
            self._pending[(direction, msg["id"])] = _Pending(row.index, method, session_id, t)
        if method in ("session/new", "session/load", "session/resume") and params.get("mcpServers"):
            policy = self.kernel_policy() if self.kernel_policy is not None else None
            row.servers = tuple(mcp_server_lines(params.get("mcpServers"), policy))
        if update_kind == "tool_call":
            self._mcp.link_tool_call(self, row, update)
        if update_kind == "config_option_update" and isinstance(update.get("configOptions"), list):
            self._track_config(row, update["configOptions"])
        elif update_kind == "session_info_update":
            row.info = self._info[session_id] = apply_info(self._info.get(session_id, {}), update)
            row.summary = ", ".join(f"{k}={update[k]!r}" for k in ("title", "updatedAt", "_meta") if k in update)
        return row

    def _add_answer(self, direction: str, t: float, msg: Mapping[str, Any]) -> FrameRow:
        asked_by = "recv" if direction == "send" else "send"  # an answer travels against its request
        pending = self._pending.pop((asked_by, msg.get("id")), None)
        method = pending.method if pending else "?"
        result = _mapping(msg.get("result"))
        session_id = (pending.session_id if pending else "") or str(result.get("sessionId") or "")
        if "error" in msg:
            error = _mapping(msg.get("error"))
            kind, summary = "error", f"{error.get('code')} {error.get('message', '')}".strip()
        else:
            kind, summary = "result", _result_summary(method, result)
        row = FrameRow(len(self.rows), direction, t, kind, method, "", session_id, summary, msg,
                       explain(method, kind))
        if pending is not None:
            row.pair, row.rtt = pending.index, t - pending.t
            request = self.rows[pending.index] if pending.index < len(self.rows) else None
            if request is not None and request.index == pending.index:
                request.pair, request.rtt = row.index, row.rtt
        if kind == "result" and isinstance(result.get("configOptions"), list):
            self._track_config(row, result["configOptions"])
        return row

    def _track_config(self, row: FrameRow, options: list[Any]) -> None:
        diff = config_diff(self._config.get(row.session_id), options)
        self._config[row.session_id] = [o for o in options if isinstance(o, Mapping)]
        row.config = diff
        brief = diff.brief()
        row.summary = f"{row.summary} \u00b7 {brief}" if row.summary.startswith("session ") else brief


def analyze(entries: Iterable[Mapping[str, Any]], *, check_schema: bool = True) -> list[FrameRow]:
    """Every entry of a log or recording as a row, paired, diffed and (with jsonschema) checked."""
    analyzer = Analyzer(check_schema=check_schema)
    for entry in entries:
        analyzer.add(entry)
    return analyzer.rows


def check_rows(rows: Iterable[FrameRow]) -> None:
    """Check rows against the ACP schema, each once (a response is checked as the answer to its request's method)."""
    for row in rows:
        if row.checked:
            continue
        if row.protocol == "mcp":  # not an ACP frame: the MCP SDK on each side checks its own messages
            row.issues, row.checked = (), True
            continue
        answers = row.method if row.kind in ("result", "error") and row.method != "?" else None
        row.issues = _schema.check_frame(row.msg, row.sender, answers=answers)
        row.checked = True


# --- capabilities: offered in initialize, relied on later ----------------------------------------------
# Every capability of the v1 schema, by the side that offers it (dotted paths, as on the wire).
CLIENT_CAPABILITIES = ("fs.readTextFile", "fs.writeTextFile", "terminal", "session.configOptions.boolean",
                       "auth.terminal", "elicitation.form", "elicitation.url")
AGENT_CAPABILITIES = ("loadSession", "promptCapabilities.image", "promptCapabilities.audio",
                      "promptCapabilities.embeddedContext", "mcpCapabilities.http", "mcpCapabilities.sse",
                      "sessionCapabilities.list", "sessionCapabilities.delete", "sessionCapabilities.resume",
                      "sessionCapabilities.close", "sessionCapabilities.additionalDirectories", "auth.logout")
# Client requests that the agent may refuse unless it offered the capability.
AGENT_METHOD_CAPABILITY = {"session/load": "loadSession", "session/list": "sessionCapabilities.list",
                           "session/delete": "sessionCapabilities.delete",
                           "session/resume": "sessionCapabilities.resume",
                           "session/close": "sessionCapabilities.close", "logout": "auth.logout"}
PROMPT_BLOCK_CAPABILITY = {"image": "promptCapabilities.image", "audio": "promptCapabilities.audio",
                           "resource": "promptCapabilities.embeddedContext"}


@dataclass(frozen=True)
class CapabilityUse:
    """One capability: who offers it, whether they did (None: no initialize frame seen), which frames relied on it."""

    side: str  # "client" or "agent"
    name: str
    offered: bool | None
    used_by: tuple[int, ...] = ()

    @property
    def status(self) -> str:
        if self.used_by and self.offered is False:
            return "used but not offered"
        if self.used_by:
            return "used"
        return "offered, not used" if self.offered else "not offered"


def offered_capabilities(capabilities: Any, prefix: str = "") -> set[str]:
    """The dotted names a capabilities object turns on: true booleans, and objects present (``list: {}``)."""
    names: set[str] = set()
    for key, value in _mapping(capabilities).items():
        if key == "_meta":
            continue
        name = f"{prefix}{key}"
        if value is True:
            names.add(name)
        elif isinstance(value, Mapping):
            inner = offered_capabilities(value, f"{name}.")
            names |= inner or ({name} if not (set(value) - {"_meta"}) else set())
    return names


def _uses(row: FrameRow) -> list[tuple[str, str]]:
    """The (side, capability) pairs a frame relies on."""
    if row.protocol == "mcp":
        return []
    params, result = _mapping(row.msg.get("params")), _mapping(row.msg.get("result"))
    if row.kind == "request" and row.sender == "agent":
        if row.method.startswith("fs/"):
            return [("client", "fs.readTextFile" if row.method == "fs/read_text_file" else "fs.writeTextFile")]
        if row.method.startswith("terminal/"):
            return [("client", "terminal")]
        if row.method == "elicitation/create":
            return [("client", f"elicitation.{params.get('mode', 'form')}")]
    uses: list[tuple[str, str]] = []
    options = result.get("configOptions") or _mapping(params.get("update")).get("configOptions") or []
    if row.sender == "agent" and any(_mapping(o).get("type") == "boolean" for o in options):
        uses.append(("client", "session.configOptions.boolean"))
    if row.kind != "request" or row.sender != "client":
        return uses
    if row.method in AGENT_METHOD_CAPABILITY:
        uses.append(("agent", AGENT_METHOD_CAPABILITY[row.method]))
    if params.get("additionalDirectories"):
        uses.append(("agent", "sessionCapabilities.additionalDirectories"))
    for server in params.get("mcpServers") or []:
        if _mapping(server).get("type") in ("http", "sse"):
            uses.append(("agent", f"mcpCapabilities.{server['type']}"))
    for block in params.get("prompt") or [] if row.method == "session/prompt" else []:
        if _mapping(block).get("type") in PROMPT_BLOCK_CAPABILITY:
            uses.append(("agent", PROMPT_BLOCK_CAPABILITY[block["type"]]))
    return uses


def capabilities(rows: Sequence[FrameRow]) -> list[CapabilityUse]:
    """Each side's capabilities: offered in initialize (request: client, answer: agent) against those used."""
    offered: dict[str, set[str] | None] = {"client": None, "agent": None}
    used: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        if row.method == "initialize" and row.kind == "request":
            offered["client"] = offered_capabilities(_mapping(row.msg.get("params")).get("clientCapabilities"))
        elif row.method == "initialize" and row.kind == "result":
            offered["agent"] = offered_capabilities(_mapping(row.msg.get("result")).get("agentCapabilities"))
        for key in _uses(row):
            used.setdefault(key, []).append(row.index)
    out = []
    for side, known in (("client", CLIENT_CAPABILITIES), ("agent", AGENT_CAPABILITIES)):
        extra = sorted((offered[side] or set()) - set(known))  # custom or newer capabilities
        for name in [*known, *extra]:
            have = offered[side]
            out.append(CapabilityUse(side, name, None if have is None else name in have,
                                     tuple(used.get((side, name), ()))))
    return out
