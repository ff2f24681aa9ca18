"""Checks of single ACP frames against the vendored v1 JSON schema: violations, and fields it does not define.

The schema ships with the package (``_data/acp_schema``, with its attribution). The check
needs the optional ``jsonschema`` package (the ``schema`` extra): without it ``available()``
is False and ``check_frame`` returns None, so a view can say how to turn checking on.
The parsed schema and compiled validators are cached for the process and never mutated;
there is no per-connection state, so any thread may call these functions.

Process-wide: ``_branch_validators``, the compiled validator of each branch of the schema, by the
branch's id (the schema is loaded once per process and never freed, so the ids stay valid); made on
first use from any thread (a race builds the same validator twice, harmlessly), never emptied.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["SchemaIssue", "available", "check_frame", "content_block_fields", "content_block_problem", "definition_for",
           "load_schema", "schema_methods", "warm_up"]

INSTALL_HINT = "pip install 'acp-notebook[schema]'"
# Properties whose constant value picks the branch of a union (update kind, content type, outcome).
DISCRIMINATORS = ("sessionUpdate", "type", "outcome")
ENVELOPE_KEYS = {
    "request": {"jsonrpc", "id", "method", "params"},
    "notification": {"jsonrpc", "method", "params"},
    "response": {"jsonrpc", "id", "result", "error"},
}
MAX_MESSAGE = 240
# What only ACP v1's unstable schema defines (the package ships the stable one): such a method is checked for its
# envelope only, and such a field is noted as unstable, neither marked as wrong. A test keeps these in step with
# tests/acp_schema/schema.unstable.json.
UNSTABLE_METHODS = frozenset({
    "auth/status", "auth/status_update", "mcp/message", "providers/disable", "providers/list", "providers/set",
    "proxy/initialize", "proxy/successor", "session/archive", "session/fork", "session/set_title", "session/status",
    "session/unarchive"})
# Only the names no stable definition uses elsewhere (not "status", "title", "usage"...), since a field is known here
# by its name alone.
UNSTABLE_FIELDS = frozenset({"archive", "archived", "fork", "providers", "subagents", "systemPrompt"})


@dataclass(frozen=True)
class SchemaIssue:
    """One finding: ``level`` is "violation" (the frame breaks the schema), "unknown" (an undefined field) or
    "unstable" (a method or field of ACP's unstable schema, which this check does not hold)."""

    level: str
    path: str  # where in the frame, e.g. "params/update/content/type"; "" for the frame itself
    message: str

    def __str__(self) -> str:
        return f"{self.path or '(frame)'}: {self.message}"


def available() -> bool:
    """Whether frames can be checked (``jsonschema`` is importable)."""
    return importlib.util.find_spec("jsonschema") is not None


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The ACP v1 schema shipped in the package, parsed once."""
    source = resources.files("acp_notebook").joinpath("_data", "acp_schema", "schema.json")
    return json.loads(source.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def schema_methods() -> dict[tuple[str, str, str], str]:
    """(kind, side that handles it, method) -> the ``$defs`` entry of its params or result.

    Built from the schema's own ``x-method`` / ``x-side`` annotations; kind is request,
    notification or response. The handler of a response is the side that sends it.
    """
    table: dict[tuple[str, str, str], str] = {}
    for name, definition in load_schema()["$defs"].items():
        method, side = definition.get("x-method"), definition.get("x-side")
        if method is None or side is None:
            continue
        kind = next((k for k in ("request", "notification", "response") if name.endswith(k.capitalize())), None)
        if kind is not None:
            table[(kind, side, method)] = name
    return table


@lru_cache(maxsize=1)
def content_block_fields() -> dict[str, tuple[str, ...]]:
    """Each content block ``type`` and the fields the schema requires of it (text: text; image: data, mimeType...),
    read from the schema's ContentBlock union; no jsonschema needed."""
    definitions = load_schema()["$defs"]
    fields: dict[str, tuple[str, ...]] = {}
    for branch in definitions["ContentBlock"]["oneOf"]:
        kind = branch["properties"]["type"]["const"]
        refs = [part["$ref"].rsplit("/", 1)[-1] for part in branch.get("allOf", ()) if "$ref" in part]
        fields[kind] = tuple(field for ref in refs for field in definitions[ref].get("required", ()))
    return fields


def content_block_problem(block: Mapping[str, Any]) -> str | None:
    """What makes ``block`` no ACP content block (an unknown type, a required field missing), or None."""
    fields = content_block_fields()
    kind = block.get("type")
    if kind not in fields:
        said = "it has no 'type'" if kind is None else f"its type is {kind!r}"
        return f"{said}; a content block's type is one of {', '.join(map(repr, fields))}"
    missing = [field for field in fields[kind] if field not in block]
    return f"a block of type {kind!r} needs {' and '.join(map(repr, missing))}" if missing else None


def _other(sender: str) -> str:
    return "agent" if sender == "client" else "client"


def definition_for(sender: str, kind: str, method: str) -> str | None:
    """The ``$defs`` entry for a frame's params (requests, notifications) or result (responses), if any."""
    handler = sender if kind == "response" else _other(sender)
    table = schema_methods()
    return table.get((kind, handler, method)) or (
        table.get((kind, "protocol", method)) if kind == "notification" else None)


def frame_kind(msg: Mapping[str, Any]) -> str | None:
    """request, notification or response; None when the frame is none of the three."""
    if "method" in msg:
        return "request" if "id" in msg else "notification"
    if "id" in msg and ("result" in msg) != ("error" in msg):
        return "response"
    return None


def check_frame(msg: Mapping[str, Any], sender: str, *, answers: str | None = None) -> tuple[SchemaIssue, ...] | None:
    """Check one frame sent by ``sender`` ("client" or "agent"); ``answers`` names the method a response answers.

    Returns the issues found (empty when the frame is clean), or None when ``jsonschema``
    is not installed. Extension methods (``_name``) are checked only for their envelope.
    """
    if not available():
        return None
    kind = frame_kind(msg)
    if kind is None:
        return (SchemaIssue("violation", "", "not a JSON-RPC request, notification or response "
                                             "(needs a method, or an id with exactly one of result and error)"),)
    issues = list(_envelope_issues(msg, kind))
    method = str(msg.get("method") or answers or "")
    if kind == "response" and "error" in msg:
        issues += _validate("Error", msg.get("error"), "error")
    elif method in UNSTABLE_METHODS:
        issues.append(SchemaIssue("unstable", "method", f"{method} is unstable ACP (not in the stable schema this "
                                                        "check uses): only its envelope was checked"))
    elif method and not method.startswith("_"):
        definition = definition_for(sender, kind, method)
        where = "result" if kind == "response" else "params"
        if definition is not None:
            payload = msg.get(where)
            issues += _validate(definition, payload, where)
            issues += [_undefined(path, key) for path, key in _unknown_fields(definition, payload, where)]
        elif kind != "response":
            issues.append(SchemaIssue("violation", "method", _misdirected(sender, kind, method)))
    return tuple(issues)


def _undefined(path: str, key: str) -> SchemaIssue:
    if key in UNSTABLE_FIELDS:
        return SchemaIssue("unstable", path, f"{key!r} is unstable ACP (not in the stable schema this check uses)")
    return SchemaIssue("unknown", path, f"{key!r} is not defined by the schema (custom data belongs in _meta)")


def _misdirected(sender: str, kind: str, method: str) -> str:
    other = _other(sender)
    if definition_for(other, kind, method) is not None:
        return f"{method} is sent by the {other} (a {other} \u2192 {sender} {kind}), but the {sender} sent it"
    return f"{method!r} is not a {sender} \u2192 {other} {kind} of ACP v1"


def _envelope_issues(msg: Mapping[str, Any], kind: str) -> Iterator[SchemaIssue]:
    if msg.get("jsonrpc") != "2.0":
        yield SchemaIssue("violation", "jsonrpc", 'every frame must carry "jsonrpc": "2.0"')
    if "id" in msg and not (msg["id"] is None or isinstance(msg["id"], (str, int))) or isinstance(msg.get("id"), bool):
        yield SchemaIssue("violation", "id", "a request id is a string, an integer or null")
    for key in sorted(set(msg) - ENVELOPE_KEYS[kind]):
        yield SchemaIssue("unknown", key, f"{key!r} is not part of a JSON-RPC {kind}")


def warm_up() -> None:
    """Import jsonschema and compile a validator now (importing it takes about a second, once per process).

    Called from a helper thread, so that the first frame checked on the agents' loop thread
    does not hold up every connection while jsonschema loads.
    """
    if available():
        _validator("SessionNotification")


# --- validation -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _validator(definition: str) -> Any:
    # jsonschema is optional (the `schema` extra, see the module docstring): loaded once a frame is checked.
    from jsonschema import Draft202012Validator

    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": load_schema()["$defs"]})


def _validate(definition: str, payload: Any, where: str) -> list[SchemaIssue]:
    errors = list(_validator(definition).iter_errors(payload))
    if not errors:
        return []
    from jsonschema.exceptions import relevance  # jsonschema on first use, as in _validator

    error = _follow_discriminator(min(errors, key=relevance))
    path = "/".join([where, *(str(p) for p in error.absolute_path)])
    message = _allowed_values(error) or error.message
    message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + "\u2026"
    return [SchemaIssue("violation", path, message)]


def _allowed_values(error: Any) -> str:
    """For a union of constants (stop reasons, tool kinds, ...): the values it allows, else ""."""
    branches = error.validator_value if error.validator in ("oneOf", "anyOf") else None
    if not isinstance(branches, list) or not all(isinstance(b, Mapping) and "const" in b for b in branches):
        return ""
    return f"{error.instance!r} is not one of " + ", ".join(repr(b["const"]) for b in branches)


def _follow_discriminator(error: Any) -> Any:
    """Descend a failed union into the one branch whose discriminator matches the frame.

    jsonschema reports "not valid under any of the given schemas" for a bad update or
    content block; the branch whose ``sessionUpdate``/``type`` const matched holds the
    real reason, and that is what a learner needs to read.
    """
    from jsonschema.exceptions import relevance  # jsonschema on first use, as in _validator

    while error.context:
        branches: dict[Any, list[Any]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        matching = [subs for subs in branches.values()
                    if not any(s.validator == "const" and s.relative_path and s.relative_path[-1] in DISCRIMINATORS
                               for s in subs)]
        if len(matching) == 1:
            error = min(matching[0], key=relevance)
            continue
        # No branch claims the frame: a failure every branch shares ("'value' is a required
        # property") says more than "not valid under any of the given schemas".
        shared = set.intersection(*({s.message for s in subs} for subs in branches.values()))
        return min((s for s in error.context if s.message in shared), key=relevance) if shared else error
    return error


# --- fields the schema does not define ----------------------------------------------------------
_branch_validators: dict[int, Any] = {}


def _is_valid(schema: Mapping[str, Any], instance: Any) -> bool:
    # Keyed by id(): the schema's dicts live for the whole process (load_schema is cached).
    validator = _branch_validators.get(id(schema))
    if validator is None:
        from jsonschema import Draft202012Validator  # jsonschema on first use, as in _validator

        validator = Draft202012Validator({**schema, "$defs": load_schema()["$defs"]})
        _branch_validators[id(schema)] = validator
    return bool(validator.is_valid(instance))


def _discriminated(branch: Mapping[str, Any], instance: Any) -> bool:
    if not isinstance(instance, Mapping):
        return False
    props = branch.get("properties") or {}
    return any(isinstance(props.get(k), Mapping) and "const" in props[k] and props[k]["const"] == instance.get(k)
               for k in DISCRIMINATORS if k in instance)


def _parts(schema: Any, instance: Any, depth: int = 0) -> Iterator[Mapping[str, Any]]:
    """The schema and each subschema that applies to ``instance`` ($ref, allOf, the matching union branch)."""
    if not isinstance(schema, Mapping) or depth > 40:
        return
    yield schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        yield from _parts(load_schema()["$defs"].get(ref.rsplit("/", 1)[1]), instance, depth + 1)
    for sub in schema.get("allOf", ()):
        yield from _parts(sub, instance, depth + 1)
    for union in ("anyOf", "oneOf"):
        branches = schema.get(union) or ()
        chosen = next((b for b in branches if _is_valid(b, instance)), None)
        if chosen is None:  # the frame breaks the schema here: follow the branch it claims to be
            chosen = next((b for b in branches if _discriminated(b, instance)), None)
        if chosen is not None:
            yield from _parts(chosen, instance, depth + 1)


def _unknown_fields(definition: str, payload: Any, where: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    _walk({"$ref": f"#/$defs/{definition}"}, payload, where, found, 0)
    return list(dict.fromkeys(found))


def _walk(schema: Mapping[str, Any], instance: Any, path: str, found: list[tuple[str, str]], depth: int) -> None:
    if depth > 30 or not isinstance(instance, (Mapping, list)):
        return
    parts = list(_parts(schema, instance))
    if isinstance(instance, list):
        items = [p["items"] for p in parts if isinstance(p.get("items"), Mapping)]
        for i, element in enumerate(instance):
            for item_schema in items:
                _walk(item_schema, element, f"{path}/{i}", found, depth + 1)
        return
    known: dict[str, list[Any]] = {}
    for part in parts:
        for key, sub in (part.get("properties") or {}).items():
            known.setdefault(key, []).append(sub)
    # An object with no declared properties, or one that admits extra ones, is free-form by design.
    open_ended = not known or any(p.get("additionalProperties", False) is not False
                                  or p.get("unevaluatedProperties", False) is not False
                                  or "patternProperties" in p for p in parts)
    for key, value in instance.items():
        if key == "_meta":
            continue
        if key not in known:
            if not open_ended:
                found.append((f"{path}/{key}", key))
            continue
        for sub in known[key]:
            _walk(sub, value, f"{path}/{key}", found, depth + 1)
