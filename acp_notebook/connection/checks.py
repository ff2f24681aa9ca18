"""Shape checks for what an agent sends, made before anything acts on it.

Two levels, both pure functions of decoded JSON (no I/O, no threads, no SDK import):

- ``frame_problem``: is a decoded object a JSON-RPC message the SDK can take? The SDK files
  answers under their ``id`` in a dict and reads ``error["code"]``; an unhashable id, an error
  that is not an object or a method that is not a string would raise inside its receive loop
  and end the connection. Such frames are dropped and reported instead.
- ``init_result_problem``: is an ``initialize`` answer what the protocol requires (a protocol
  version; capabilities, auth methods and agent info of the right shapes)? Checked here rather than
  with the SDK's ``InitializeResponse`` model because importing the SDK's models costs about 0.35 s,
  most of an agent's start, and nothing else on the client's path needs them.
- ``update_problem`` / ``options_problem``: is a ``session/update`` payload (or a config option
  list) shaped the way the client's state and turns read it? Only the fields those read are
  checked, and only their JSON types, so agents that add fields or leave optional ones out are
  never refused; a payload that fails is logged with the reason and not applied.

The checks are cheap (a few ``isinstance`` per frame): they run on every frame of a turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._protocol import COMPACTION_UPDATES

__all__ = ["frame_problem", "init_result_problem", "odd_current_values", "options_problem", "update_problem", "valid_id"]

_CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
_TOOL_CALLS = ("tool_call", "tool_call_update")


def valid_id(value: Any) -> bool:
    """A JSON-RPC id: a string, an integer or null (booleans are not integers here: True == 1)."""
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def frame_problem(message: Mapping[str, Any]) -> str | None:
    """Why ``message`` (a decoded JSON object) is not a JSON-RPC message we can take, or None."""
    if "method" in message:
        if not isinstance(message["method"], str):
            return f"its method is not a string ({_kind(message['method'])})"
        if "id" in message and (message["id"] is None or not valid_id(message["id"])):
            return f"a request whose id is not a string or an integer ({_kind(message['id'])})"
        return None
    if "id" not in message:
        return "neither a request nor a response: it has no method and no id"
    if not valid_id(message["id"]):
        return f"a response whose id is not a string or an integer ({_kind(message['id'])})"
    if "error" in message and error_problem(message["error"]) is not None:
        return error_problem(message["error"])
    if "result" not in message and "error" not in message:
        return "a response with neither result nor error"
    return None


def error_problem(error: Any) -> str | None:
    """Why a response's ``error`` member is not ``{code: integer, message: string, ...}``, or None."""
    if not isinstance(error, Mapping):
        return f"its error is not an object ({_kind(error)})"
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return f"its error code is not an integer ({_kind(code)})"
    if not isinstance(error.get("message"), str):
        return f"its error message is not a string ({_kind(error.get('message'))})"
    return None


def init_result_problem(result: Any) -> str | None:
    """Why an ``initialize`` result breaks the schema's InitializeResponse, or None. Only what the
    schema requires is checked, so agents that add fields are never refused."""
    if not isinstance(result, Mapping):
        return f"the result is not an object ({_kind(result)})"
    version = result.get("protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= 0xFFFF:
        missing = "protocolVersion" not in result
        return "it has no protocolVersion" if missing else f"its protocolVersion is not a version number ({version!r})"
    capabilities = result.get("agentCapabilities")
    if capabilities is not None:
        if not isinstance(capabilities, Mapping):
            return f"its agentCapabilities is not an object ({_kind(capabilities)})"
        problem = _optional(capabilities, ("loadSession",), bool) or _optional(
            capabilities, ("promptCapabilities", "mcpCapabilities", "sessionCapabilities", "auth"), Mapping)
        if problem:
            return f"agentCapabilities: {problem}"
    methods = result.get("authMethods")
    if methods is not None:
        if not _list_of_objects(methods):
            return f"its authMethods is not a list of objects ({_kind(methods)})"
        for method in methods:
            if not isinstance(method.get("id"), str) or not isinstance(method.get("name"), str):
                return f"an auth method lacks a string id or name: {dict(method)!r}"[:300]
    info = result.get("agentInfo")
    if info is not None:
        if not isinstance(info, Mapping):
            return f"its agentInfo is not an object ({_kind(info)})"
        for key in ("name", "version"):
            if not isinstance(info.get(key), str):
                return f"its agentInfo has no string {key}"
        if info.get("title") is not None and not isinstance(info["title"], str):
            return f"its agentInfo title is not a string ({_kind(info['title'])})"
    return None


def update_problem(update: Mapping[str, Any]) -> str | None:
    """Why a ``session/update`` payload of a known kind cannot be applied, or None (unknown kinds: None)."""
    kind = update.get("sessionUpdate")
    if kind in _CHUNKS:
        content = update.get("content")
        if not isinstance(content, Mapping):
            return f"its content is not an object ({_kind(content)})"
        if content.get("type") == "text" and not isinstance(content.get("text"), str):
            return f"its text is not a string ({_kind(content.get('text'))})"
        return None
    if kind in _TOOL_CALLS:
        if not isinstance(update.get("toolCallId"), str):
            return f"its toolCallId is not a string ({_kind(update.get('toolCallId'))})"
        for key in ("content", "locations"):
            if not _list_of_objects(update.get(key), optional=True):
                return f"its {key} is not a list of objects"
        return _optional(update, ("title", "kind", "status", "name"), str)
    if kind == "notice":
        if not isinstance(update.get("severity"), str) or not isinstance(update.get("title"), str):
            return "its severity or title is not a string"
        return _optional(update, ("description",), str)
    if kind in COMPACTION_UPDATES:
        return _compaction_problem(kind, update)
    if kind == "plan":
        return None if _list_of_objects(update.get("entries")) else "its entries are not a list of objects"
    if kind == "config_option_update":
        return options_problem(update.get("configOptions"))
    if kind == "session_info_update":
        return _optional(update, ("title", "updatedAt"), str) or _optional(update, ("_meta",), Mapping)
    if kind == "usage_update":
        return _optional(update, ("cost",), Mapping)
    if kind == "available_commands_update":
        return None if _list_of_objects(update.get("availableCommands")) else \
            "its availableCommands are not a list of objects"
    if kind == "current_mode_update":
        return None if isinstance(update.get("currentModeId"), str) else "its currentModeId is not a string"
    return None


def _compaction_problem(kind: str, update: Mapping[str, Any]) -> str | None:
    if not isinstance(update.get("compactionId"), str):
        return f"its compactionId is not a string ({_kind(update.get('compactionId'))})"
    if kind == "compaction_summary_chunk":
        return None if isinstance(update.get("content"), Mapping) else "its content is not an object"
    if not isinstance(update.get("status"), str):
        return f"its status is not a string ({_kind(update.get('status'))})"
    if not _list_of_objects(update.get("summary"), optional=True):
        return "its summary is not a list of objects"
    return _optional(update, ("error",), str)


def options_problem(options: Any) -> str | None:
    """Why a ``configOptions`` list cannot replace the session's options, or None.

    Options of a type the client does not know are fine (they are ignored); a known type
    must carry what the client reads: string id, a current value of its type, choices.
    """
    if not isinstance(options, list):
        return f"its configOptions are not a list ({_kind(options)})"
    for option in options:
        problem = _option_problem(option)
        if problem is not None:
            return problem
    return None


def _option_problem(option: Any) -> str | None:
    if not isinstance(option, Mapping):
        return f"a config option is not an object ({_kind(option)})"
    if not isinstance(option.get("id"), str):
        return f"a config option's id is not a string ({_kind(option.get('id'))})"
    name = option["id"]
    kind = option.get("type")
    if kind == "boolean" and not isinstance(option.get("currentValue"), bool):
        return f"config option {name!r} is boolean but its currentValue is not"
    if kind != "select":
        return _optional(option, ("name", "description", "category"), str)
    if not isinstance(option.get("currentValue"), str):
        return f"config option {name!r}: its currentValue is not a string"
    if not isinstance(option.get("options"), list):
        return f"config option {name!r}: its options are not a list"
    for entry in option["options"]:
        inner = entry.get("options") if isinstance(entry, Mapping) and "value" not in entry else [entry]
        if not isinstance(inner, list) or not all(isinstance(c, Mapping) and isinstance(c.get("value"), str)
                                                  for c in inner):
            return f"config option {name!r}: a choice has no string value"
    return _optional(option, ("name", "description", "category"), str)


def odd_current_values(options: Any) -> list[str]:
    """Select options whose currentValue is not among their choices (shown as the agent says, noted)."""
    odd = []
    for option in options if isinstance(options, list) else []:
        if not isinstance(option, Mapping) or option.get("type") != "select" or _option_problem(option):
            continue
        values = set()
        for entry in option["options"]:
            for choice in entry.get("options") if "value" not in entry else [entry]:
                values.add(choice["value"])
        if option["currentValue"] not in values:
            odd.append(f"config option {option['id']!r}: currentValue {option['currentValue']!r} "
                       "is not one of its choices")
    return odd


def _optional(mapping: Mapping[str, Any], keys: tuple[str, ...], kind: type | tuple[type, ...]) -> str | None:
    for key in keys:
        value = mapping.get(key)
        if value is not None and not isinstance(value, kind):
            return f"its {key} has the wrong type ({_kind(value)})"
    return None


def _list_of_objects(value: Any, *, optional: bool = False) -> bool:
    if value is None:
        return optional
    return isinstance(value, list) and all(isinstance(item, Mapping) for item in value)


def _kind(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__
