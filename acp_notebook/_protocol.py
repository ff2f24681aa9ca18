"""The protocol's constants and rules, each written once.

JSON-RPC error codes, the requests that may ask for authentication, which config option is
the model, the old ``modes``/``models`` fields as config options, ``agent:model`` ids, the
on/off words a person may type for a boolean option, and this package's version.

Everything here is a pure function of plain wire data (dicts as they travel): no I/O, no
threads, no import of the SDK (importing it costs most of a second), so the client, the
proxy, the demo agent, the magics and the sweeps can all use it from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ._version import VERSION

__all__ = [
    "AGENT_MODEL_SEPARATOR",
    "AUTH_REQUIRED",
    "AUTH_RETRIED_METHODS",
    "BOOLEAN_WORDS",
    "CANCELLED_BY_SESSION_CANCEL",
    "CLIENT_SESSION_CAPABILITIES",
    "COMPACTION_STATUSES",
    "COMPACTION_UPDATES",
    "NOTICE_SEVERITIES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "KERNEL_SERVER_NAME",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PROTOCOL_VERSION",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "SYSTEM_PROMPT_MODES",
    "client_version",
    "find_model_option",
    "join_agent_model",
    "legacy_option",
    "parse_bool_word",
    "prompt_text",
    "split_agent_model",
    "system_prompt_modes",
    "unknown_session",
]

# The ACP major version this package speaks (the SDK's acp.meta.PROTOCOL_VERSION, without importing it).
PROTOCOL_VERSION = 1

# JSON-RPC 2.0 codes, and the ones ACP adds.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002  # an unknown session id (both SDKs use it; the TypeScript one relies on it)
REQUEST_CANCELLED = -32800  # the answer to a request cancelled with $/cancel_request

# An unknown-session error names at most this many of the valid ids (in its message and its data).
IDS_IN_ERRORS = 20

# Requests an agent may answer with AUTH_REQUIRED before any session exists. A client (or the
# proxy, for its backends) may then authenticate from the environment once and send them again.
# Never session/prompt: a turn is not repeated behind the user's back.
AUTH_RETRIED_METHODS = frozenset({"session/new", "session/load", "session/resume", "session/list"})

# Requests stopped with session/cancel, after which the agent answers them with the "cancelled" stop reason;
# never with $/cancel_request, which makes an agent on the SDK's 1.x line abandon the turn (-32800, no stop reason).
CANCELLED_BY_SESSION_CANCEL = frozenset({"session/prompt"})

# What this client can do within a session, as its initialize advertises it (clientCapabilities.session): boolean
# config options, the agent's notices (a `notice` update, shown by severity) and context compaction (the
# `compaction_update` and `compaction_summary_chunk` updates). Agents send notices and compactions only to
# clients that advertise them.
CLIENT_SESSION_CAPABILITIES: Mapping[str, Mapping[str, Any]] = {
    "configOptions": {"boolean": {}}, "notices": {}, "compaction": {}}

# A notice's severities and a compaction's statuses as ACP v1 names them; others (custom `_` ones, future
# ones) are kept as sent and shown as the nearest known one would be (see the views).
NOTICE_SEVERITIES = ("info", "warning", "error")
COMPACTION_STATUSES = ("in_progress", "completed", "failed", "cancelled")
# The session/update kinds of a compaction: both name it by its compactionId (an upsert, not a new entry).
COMPACTION_UPDATES = frozenset({"compaction_update", "compaction_summary_chunk"})

# How a client's system prompt joins the agent's own instructions (unstable ACP v1, `systemPrompt` on session/new,
# load, resume and fork): every agent that takes one appends it; "override" replaces the agent's default
# instructions and may be sent only where the agent advertises sessionCapabilities.systemPrompt.mode.override.
SYSTEM_PROMPT_MODES = ("append", "override")

# Between an agent's name and its own model value in the proxy's ids and in sweeps: ``claude:opus``.
# Not "/": model ids often contain it (``openai/gpt-5``), and may contain ":" too, so only the first
# separator splits.
AGENT_MODEL_SEPARATOR = ":"

# The name of the MCP server (in a session request's ``mcpServers``) that gives an agent the notebook's kernel:
# the client offers it, the proxy relays it to the bound agent only, the package's agents look for it.
KERNEL_SERVER_NAME = "kernel"

BOOLEAN_WORDS: Mapping[str, bool] = {
    "true": True, "on": True, "yes": True, "1": True,
    "false": False, "off": False, "no": False, "0": False,
}


def client_version() -> str:
    """This package's version, as sent in ``clientInfo`` / ``agentInfo``."""
    return VERSION


def system_prompt_modes(capabilities: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The system prompt modes an agent's capabilities offer: () when they advertise no
    ``sessionCapabilities.systemPrompt`` (then none may be sent), ("append",), or ("append", "override")."""
    session = (capabilities or {}).get("sessionCapabilities")
    offered = session.get("systemPrompt") if isinstance(session, Mapping) else None
    if not isinstance(offered, Mapping):
        return ()
    mode = offered.get("mode")
    return SYSTEM_PROMPT_MODES if isinstance(mode, Mapping) and mode.get("override") is not None else ("append",)


def parse_bool_word(text: str) -> bool | None:
    """``"on"`` -> True, ``"No"`` -> False; None for a word that is not one of BOOLEAN_WORDS."""
    return BOOLEAN_WORDS.get(text.strip().lower())


def find_model_option(options: Iterable[Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
    """Which of a session's config options (wire dicts) is its model.

    The first ``select`` whose category is ``model``; failing that, a ``select`` with id ``model``.
    Categories are hints, so the id is the fallback; a boolean can never be the model.
    """
    selects = [o for o in options or () if isinstance(o, Mapping) and o.get("type") == "select"]
    return (next((o for o in selects if o.get("category") == "model"), None)
            or next((o for o in selects if o.get("id") == "model"), None))


# field names of the old SessionModeState / SessionModelState: list key, item id key, current key
_LEGACY_FIELDS = {
    "mode": ("availableModes", "id", "currentModeId"),
    "model": ("availableModels", "modelId", "currentModelId"),
}


def legacy_option(kind: Literal["mode", "model"], state: Any) -> dict[str, Any] | None:
    """The config option (a wire dict) that stands for an agent's old ``modes`` or ``models`` field.

    Agents that still send only those fields (gemini-cli) then look like every other agent. None
    when the field lists nothing usable. The current value falls back to the first choice.
    """
    if not isinstance(state, Mapping):
        return None
    list_key, id_key, current_key = _LEGACY_FIELDS[kind]
    choices = []
    for item in state.get(list_key) or ():
        if isinstance(item, Mapping) and isinstance(item.get(id_key), str):
            entry: dict[str, Any] = {"value": item[id_key], "name": str(item.get("name") or item[id_key])}
            if isinstance(item.get("description"), str):
                entry["description"] = item["description"]
            choices.append(entry)
    if not choices:
        return None
    current = state.get(current_key)
    if not isinstance(current, str):
        current = choices[0]["value"]
    return {"id": kind, "name": kind.capitalize(), "category": kind, "type": "select",
            "currentValue": current, "options": choices}


def split_agent_model(value: Any, agents: Sequence[str] | None = None) -> tuple[str, str] | None:
    """``"claude:openai/gpt-5"`` -> ``("claude", "openai/gpt-5")``: the first separator splits.

    None when ``value`` is not of that form, or, when ``agents`` is given, names none of them.
    """
    if not isinstance(value, str):
        return None
    agent, sep, model = value.partition(AGENT_MODEL_SEPARATOR)
    if not sep or not agent or not model:
        return None
    if agents is not None and agent not in agents:
        return None
    return agent, model


def join_agent_model(agent: str, model: str) -> str:
    return f"{agent}{AGENT_MODEL_SEPARATOR}{model}"


def unknown_session(session_id: Any, valid: Sequence[str], how: str = "") -> tuple[int, str, dict[str, Any]]:
    """The error (code, message, data) an agent answers for a session id it does not know.

    RESOURCE_NOT_FOUND, as both SDKs use it, with the valid ids in ``data.validSessionIds`` (at most
    IDS_IN_ERRORS of them). ``how`` says in a few words which sessions the agent can reopen.
    """
    shown = list(valid[:IDS_IN_ERRORS])
    names = ", ".join(shown) or "none"
    if len(valid) > len(shown):
        names += f" and {len(valid) - len(shown)} more"
    message = f"Unknown session id {session_id!r}; valid session ids: {names}"
    if how:
        message += f" ({how})"
    return RESOURCE_NOT_FOUND, message, {"sessionId": session_id, "validSessionIds": shown}


def prompt_text(blocks: Iterable[Any] | None) -> str:
    """A prompt as an agent reads it in plain text: each text block's text, and the URI of each resource
    link and embedded resource, one per line. Blocks may be JSON objects or the SDK's models."""
    parts = []
    for block in blocks or ():
        data = block if isinstance(block, Mapping) else (block.model_dump(by_alias=True)
                                                         if hasattr(block, "model_dump") else {})
        kind = data.get("type")
        if kind == "text":
            parts.append(str(data.get("text", "")))
        elif kind == "resource_link":
            parts.append(str(data.get("uri", "")))
        elif kind == "resource" and isinstance(data.get("resource"), Mapping):
            parts.append(str(data["resource"].get("uri", "")))
    return "\n".join(parts)
