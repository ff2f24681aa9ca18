"""What each ACP method and session/update kind means, in one line, with the spec page that defines it.

The protocol inspector reads this table to caption every frame. It is plain data kept by
hand: a test checks that it names every method and every ``sessionUpdate`` kind found in
the ACP v1 schema, so a schema upgrade that adds one fails loudly instead of showing an
uncaptioned frame. Nothing here mutates after import.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KERNEL_SERVER", "KERNEL_TOOLS", "METHODS", "SPEC", "UPDATES", "Explanation", "explain", "kernel_server_text",
           "mcp_server_lines", "spec_url"]

SPEC = "https://agentclientprotocol.com/protocol/"


def spec_url(page: str) -> str:
    """The address of a page of the protocol's documentation (``page`` may carry an ``#anchor``)."""
    return SPEC + page


@dataclass(frozen=True)
class MethodInfo:
    """One method: which side sends it, what the request (or notification) and its answer mean."""

    sender: str  # "client", "agent" or "either" (protocol-level notifications)
    page: str
    ask: str  # the request or notification
    answer: str = ""  # the response ("" for notifications)


@dataclass(frozen=True)
class Explanation:
    """The caption of one frame: a sentence and the spec page it comes from."""

    text: str
    url: str


METHODS: dict[str, MethodInfo] = {
    # --- client -> agent ----------------------------------------------------------------------
    "initialize": MethodInfo(
        "client", "initialization",
        "The client opens the connection: it proposes a protocol version and says what it can do "
        "(file system, terminals, boolean options, notices, context compaction).",
        "The agent settles the protocol version and lists its own capabilities and ways to log in."),
    "authenticate": MethodInfo(
        "client", "authentication",
        "The client logs in with one of the methods the agent listed in its initialize answer.",
        "The agent confirms the login; session requests that failed for lack of it can now be retried."),
    "logout": MethodInfo(
        "client", "authentication#logging-out",
        "The client asks the agent to forget its credentials (needs the agent's auth.logout capability).",
        "The agent confirms it logged out."),
    "session/new": MethodInfo(
        "client", "session-setup#creating-a-session",
        "The client asks for a new conversation rooted in a working directory, with the MCP servers it offers "
        "(and, where the agent takes one, a system prompt: instructions appended to the agent's own or replacing "
        "them; unstable).",
        "The agent answers with the new session's id and its settings (config options) in order of importance."),
    "session/load": MethodInfo(
        "client", "session-setup#loading-sessions",
        "The client reopens an earlier session by id (needs the loadSession capability); the agent replays "
        "its history as session/update notifications first.",
        "The agent has replayed the history and answers with the session's current settings."),
    "session/resume": MethodInfo(
        "client", "session-setup#resuming-sessions",
        "The client picks an earlier session up again without having its history replayed.",
        "The agent answers with the session's current settings."),
    "session/fork": MethodInfo(
        "client", "schema#forksessionrequest",
        "The client asks for a new session that starts with an existing one's history, which goes on unchanged "
        "(unstable: needs the agent's sessionCapabilities.fork); the agent answers with the new session's id and "
        "settings."),
    "session/close": MethodInfo(
        "client", "session-setup#closing-active-sessions",
        "The client is done with a session: the agent may free what it holds for it.",
        "The agent confirms the session is closed."),
    "session/list": MethodInfo(
        "client", "session-list#listing-sessions",
        "The client asks which sessions the agent knows (optionally for one directory, one page at a time).",
        "The agent lists sessions with their titles and last activity, and a cursor if more follow."),
    "session/delete": MethodInfo(
        "client", "session-delete",
        "The client asks the agent to delete a stored session for good.",
        "The agent confirms the session is gone."),
    "session/set_mode": MethodInfo(
        "client", "session-modes#setting-the-current-mode",
        "The client switches the session's mode through the older modes API (config options replace it).",
        "The agent accepted the new mode."),
    "session/set_config_option": MethodInfo(
        "client", "session-config-options#setting-a-config-option",
        "The client changes one session setting (model, mode, thought level, ...) to one of its allowed values.",
        "The agent answers with the COMPLETE list of settings: the client replaces its own copy wholesale, "
        "since one change can add, remove or alter other options."),
    "session/prompt": MethodInfo(
        "client", "prompt-turn#1-user-message",
        "The client sends the user's message; the turn runs until the agent answers, streaming "
        "session/update notifications meanwhile. A _meta \"acp-notebook/handover\" entry ({from, turns}) marks "
        "the first turn after a conversation was handed over from another agent or model: its first block is "
        "that conversation, written out as context.",
        "The turn is over: the stop reason says why (end_turn, cancelled, max_tokens, refusal, ...)."),
    "session/cancel": MethodInfo(
        "client", "prompt-turn#cancellation",
        "The client asks the agent to stop the running turn; the prompt then answers with stopReason "
        "cancelled."),
    # --- agent -> client ----------------------------------------------------------------------
    "session/update": MethodInfo(
        "agent", "prompt-turn#3-agent-reports-output",
        "The agent reports progress or a change of state for one session (see its update kind)."),
    "session/request_permission": MethodInfo(
        "agent", "tool-calls#requesting-permission",
        "The agent asks the user before running a tool call, offering options such as allow once or reject.",
        "The client answers with the option the user picked, or cancelled."),
    "fs/read_text_file": MethodInfo(
        "agent", "file-system#reading-files",
        "The agent reads a text file through the client (the editor's view of it, unsaved changes "
        "included); needs the client's fs.readTextFile capability.",
        "The client answers with the file's text."),
    "fs/write_text_file": MethodInfo(
        "agent", "file-system#writing-files",
        "The agent writes a text file through the client; needs the client's fs.writeTextFile capability.",
        "The client confirms the file was written."),
    "terminal/create": MethodInfo(
        "agent", "terminals#executing-commands",
        "The agent asks the client to run a command in a terminal; needs the client's terminal capability.",
        "The client answers with the new terminal's id (the command keeps running)."),
    "terminal/output": MethodInfo(
        "agent", "terminals#getting-output",
        "The agent asks for what a terminal has printed so far.",
        "The client answers with the output, whether it was truncated, and the exit status once known."),
    "terminal/wait_for_exit": MethodInfo(
        "agent", "terminals#waiting-for-exit",
        "The agent waits for a terminal's command to finish.",
        "The command finished: the client answers with its exit code or signal."),
    "terminal/kill": MethodInfo(
        "agent", "terminals#killing-commands",
        "The agent stops a terminal's command but keeps the terminal to read its output.",
        "The client confirms the command was killed."),
    "terminal/release": MethodInfo(
        "agent", "terminals#releasing-terminals",
        "The agent is done with a terminal: the client kills its command if needed and frees it.",
        "The client confirms the terminal was released."),
    "elicitation/create": MethodInfo(
        "agent", "elicitation#creating-an-elicitation",
        "The agent asks the user for structured input: a small form, or a URL to visit.",
        "The client answers with what the user entered, or that they declined or cancelled."),
    "elicitation/complete": MethodInfo(
        "agent", "elicitation#url-completion",
        "The agent tells the client that a URL elicitation it started has been completed."),
    # --- either side ----------------------------------------------------------------------------
    "$/cancel_request": MethodInfo(
        "either", "cancellation",
        "One side asks the other to abandon a request it sent earlier; that request then fails with "
        "code -32800."),
}

UPDATES: dict[str, tuple[str, str]] = {
    "user_message_chunk": (
        "session-setup#loading-sessions",
        "A piece of a user message, sent by the agent: usually while it replays a loaded session's history."),
    "agent_message_chunk": (
        "prompt-turn#3-agent-reports-output",
        "A piece of the agent's reply, streamed as it is written; the pieces join into the answer."),
    "agent_thought_chunk": (
        "prompt-turn#3-agent-reports-output",
        "A piece of the agent's reasoning, streamed separately from the reply."),
    "tool_call": (
        "tool-calls#creating",
        "The agent starts a tool call (read, edit, run, ...): its id, title, kind and status, and the tool's "
        "programmatic name when the agent gives one (the title is for people, the name for programs)."),
    "tool_call_update": (
        "tool-calls#updating",
        "The agent reports progress on a tool call: only the fields that changed (status, content, "
        "locations, name)."),
    "plan": (
        "agent-plan",
        "The agent's plan for the turn: the complete list of entries with their status, replacing the "
        "previous one."),
    "available_commands_update": (
        "slash-commands",
        "The slash commands the user can type in this session, as a complete list."),
    "current_mode_update": (
        "session-modes#from-the-agent",
        "The agent switched the session's mode itself (the older modes API)."),
    "config_option_update": (
        "session-config-options#from-the-agent",
        "The agent changed the session's settings on its own and sends the COMPLETE new list; the "
        "client replaces its copy."),
    "session_info_update": (
        "session-list#updating-session-metadata",
        "The agent updates the session's title, last activity or _meta: an omitted field is unchanged, "
        "null clears it, _meta merges key by key. The acp-notebook proxy sends one with _meta "
        "\"acp-notebook/handover\" when the session moved to another agent: \"handed over from a:model after N "
        "turns\"."),
    "usage_update": (
        "prompt-turn#3-agent-reports-output",
        "How much of the context window the session uses, and what it has cost so far."),
    "notice": (
        "schema#notice",
        "A notice for the user (info, warning or error: a rate limit, a retry, a fallback): shown now, not part "
        "of the conversation; sent only to clients that advertise session.notices."),
    "compaction_update": (
        "schema#compactionupdate",
        "The agent compacts its context (summarises the conversation to make room): the first update with an "
        "id starts it, later ones patch it in place (status, summary, error); sent only to clients that "
        "advertise session.compaction."),
    "compaction_summary_chunk": (
        "schema#compactionsummarychunk",
        "A piece of a compaction's summary, appended to the compaction its id names (the first piece of an "
        "unknown id starts one)."),
}

_EXTENSION = Explanation(
    "An extension method: names starting with _ are outside the spec, agreed between this client and agent "
    "(unknown requests get -32601, unknown notifications are ignored).",
    spec_url("extensibility#extension-methods"))


def _unknown(method: str) -> Explanation:
    return Explanation(f"{method!r} is not a method of ACP v1.", spec_url("schema"))


def explain(method: str, kind: str, update: str = "") -> Explanation:
    """The caption of a frame: ``kind`` is request, notification, result or error; ``update`` the sessionUpdate."""
    if method.startswith("_"):
        return _EXTENSION
    info = METHODS.get(method)
    if info is None:
        return _unknown(method) if method not in ("", "?") else Explanation(
            "An answer to a request this log does not hold (it was trimmed or never recorded).", spec_url("overview"))
    if kind == "error":
        return Explanation(f"The {method} request failed: the answer carries a JSON-RPC error code and message "
                           "instead of a result.", spec_url(info.page))
    if method == "session/update" and update:
        page, text = UPDATES.get(update, ("prompt-turn#3-agent-reports-output",
                                          f"An update kind ({update!r}) this schema does not know: clients ignore it."))
        return Explanation(text, spec_url(page))
    if kind == "result":
        return Explanation(info.answer or info.ask, spec_url(info.page))
    return Explanation(info.ask, spec_url(info.page))


# --- the MCP servers a session is offered ------------------------------------------------------------
KERNEL_SERVER = "kernel"  # the name of the notebook's own MCP server in mcpServers
KERNEL_TOOLS = ("list_variables", "inspect_variable", "run_code", "notebook_history", "propose_cell")
# What each kernel-tools policy lets run_code do (the policy itself is the agent's kernel_tools setting).
KERNEL_POLICIES = {
    "ask": "run_code shows its code in the running cell with Allow / Reject and runs only after Allow",
    "read-only": "the reading tools answer; run_code is refused",
    "allow": "run_code runs at once, on the kernel thread as your own code would (Cancel or an interrupt stops it)",
}


def mcp_server_lines(servers: object, policy: str | None = None) -> list[str]:
    """One sentence per entry of a session request's ``mcpServers``; ``policy``: the kernel tools' policy
    in force, when known (a recording does not hold it)."""
    if not isinstance(servers, list):
        return []
    lines = []
    for server in servers:
        if not isinstance(server, dict):
            continue
        name = str(server.get("name", "?"))
        if name == KERNEL_SERVER and "command" in server:
            lines.append(kernel_server_text(server, policy))
        elif server.get("type") in ("http", "sse"):
            lines.append(f"{name}: an MCP server over {server['type'].upper()} at {server.get('url')} (the agent "
                         f"connects to it; needs the agent's mcpCapabilities.{server['type']}).")
        else:
            command = " ".join(str(p) for p in [server.get("command", "?"), *(server.get("args") or [])])
            lines.append(f"{name}: a stdio MCP server: the agent starts `{command}` and speaks MCP over its "
                         "stdin and stdout.")
    return lines


def kernel_server_text(server: dict, policy: str | None) -> str:
    """What the notebook's ``kernel`` entry is, how it is reached and what it may do."""
    env = {str(e.get("name")): e.get("value") for e in server.get("env") or [] if isinstance(e, dict)}
    command = " ".join(str(p) for p in [server.get("command", "?"), *(server.get("args") or [])])
    token = next((name for name in env if "TOKEN" in name.upper()), None)
    text = (f"{KERNEL_SERVER}: acp-notebook's own MCP server, the agent's way into this notebook's kernel: "
            f"{', '.join(KERNEL_TOOLS)}. A stdio server: the agent starts `{command}` itself and speaks MCP over "
            "its stdin and stdout; that bridge connects back to the kernel through a private Unix socket in a "
            "directory only you can open (nothing listens on the network)")
    if token:
        shown = env.get(token)
        text += (f" and proves itself with the token in {token}, masked ({shown}) here, in agent.log and in "
                 "recordings" if shown == "***" else f" and proves itself with the token in {token}")
    text += ". What the tools read is capped and secrets are masked; propose_cell only proposes a cell, and "
    text += "run_code refuses to end the kernel. "
    if policy in KERNEL_POLICIES:
        text += f"Policy in force: {policy}: {KERNEL_POLICIES[policy]}."
    else:
        text += ("The policy (ask, read-only or allow: AcpMagics.kernel_tools, acpnb.start(kernel_tools=...)) is "
                 "not part of the frame.")
    return text


# --- the MCP messages between the agent and the kernel tools (the inspector's MCP rows) -------------------
MCP_SPEC = "https://modelcontextprotocol.io/specification/2025-06-18"
MCP_METHODS: dict[str, tuple[str, str, str]] = {  # method -> (spec page, what the request says, what its answer says)
    "initialize": ("basic/lifecycle", "The agent's MCP client opens its connection to the kernel tools (through "
                   "the bridge it started from the session's `kernel` entry): protocol version and capabilities.",
                   "The kernel tools answer with their name, version and instructions."),
    "notifications/initialized": ("basic/lifecycle", "The agent's MCP client says the connection is ready.", ""),
    "tools/list": ("server/tools", "The agent asks which tools the kernel offers.",
                   "The kernel lists its tools with their descriptions and argument schemas: what the agent's "
                   "model is offered."),
    "tools/call": ("server/tools", "The agent calls one of the kernel's tools.",
                   "The tool's answer: text (and images) for the model, structuredContent for clients that read "
                   "it; isError marks a refusal or a failure."),
    "notifications/cancelled": ("basic/utilities/cancellation", "The agent gave up on one of its requests: the "
                                "kernel stops that call (a run_code question is withdrawn).", ""),
    "ping": ("basic/utilities/ping", "A liveness check.", "The answer to a ping."),
}
KERNEL_TOOL_WORDS = {
    "list_variables": "lists your variables (name, type, shape or length, memory); reads, runs nothing",
    "inspect_variable": "looks at one variable (a frame's columns and head, a figure as a PNG...); reads, runs "
                        "nothing of yours but repr()",
    "notebook_history": "reads the cells you ran lately",
    "propose_cell": "proposes a cell below yours; nothing runs",
    "run_code": "runs code in your namespace",
}
RUN_CODE_DECIDES = {
    "ask": "under 'ask' the code waits for your Allow in the running cell",
    "read-only": "under 'read-only' it is refused",
    "allow": "under 'allow' it runs at once",
    "off": "under 'off' it is refused, as every tool is",
}


def explain_mcp(method: str, kind: str, tool: str = "", policy: str | None = None) -> Explanation:
    """The caption of an MCP message between the agent and the kernel tools, as the kernel's side saw it: what
    the message is, which tool a call names and what the policy in force does with it."""
    page, ask, answer = MCP_METHODS.get(method, ("", f"An MCP message ({method or 'an answer'}) the kernel tools "
                                                     "do not use.", ""))
    url = f"{MCP_SPEC}/{page}" if page else MCP_SPEC
    if kind == "error":
        return Explanation(f"The {method} request failed: a JSON-RPC error instead of a result.", url)
    text = answer if kind == "result" and answer else ask
    if method == "tools/call" and tool:
        words = KERNEL_TOOL_WORDS.get(tool, "a tool the kernel does not have (it answers with an error)")
        text += f" {tool} {words}"
        if policy == "off":
            text += "; the kernel tools are off: every call is refused"
        elif tool == "run_code" and policy in RUN_CODE_DECIDES:
            text += f"; {RUN_CODE_DECIDES[policy]}"
        text += "."
    return Explanation(text, url)
