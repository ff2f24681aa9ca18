"""Validation of ACP JSON-RPC frames against the vendored official v1 schema (test helper)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, relevance

SCHEMA_DIR = Path(__file__).resolve().parent / "acp_schema"

Sender = Literal["client", "agent"]
Variant = Literal["stable", "unstable"]
FrameKind = Literal["request", "notification", "response"]

_SCHEMA_FILES: dict[str, str] = {"stable": "schema.json", "unstable": "schema.unstable.json"}


_PLAIN_ONE_OF = Draft202012Validator.VALIDATORS["oneOf"]


def _tagged_one_of(validator: Any, one_of: list[Any], instance: Any, schema: Mapping[str, Any]) -> Any:
    """``oneOf`` for the schema's tagged unions (marked with a ``discriminator``, e.g. SessionUpdate's
    ``sessionUpdate``): only the branch whose const the frame's tag names is checked, since every other branch fails
    on its const. The same verdict at a fraction of the cost (frames are checked by the thousand); a frame whose tag
    names no branch gets the plain rule and its message."""
    tag = (schema.get("discriminator") or {}).get("propertyName")
    if tag and isinstance(instance, dict) and tag in instance:
        for index, branch in enumerate(one_of):
            if ((branch.get("properties") or {}).get(tag) or {}).get("const") == instance[tag]:
                yield from validator.descend(instance, branch, schema_path=index)
                return
    yield from _PLAIN_ONE_OF(validator, one_of, instance, schema)


_Validator = validators.extend(Draft202012Validator, {"oneOf": _tagged_one_of})


class SchemaViolation(AssertionError):
    """A frame does not match the official ACP schema (an AssertionError so pytest shows it plainly)."""


@dataclass(frozen=True)
class _SchemaIndex:
    """The loaded schema plus the method tables derived from its x-method / x-side annotations."""

    root: dict[str, Any]
    # (kind, handler side, method) -> name of the $defs entry describing params or result.
    # The handler side is the side that receives a request/notification and sends the response.
    by_method: dict[tuple[FrameKind, str, str], str]


def schema_root(variant: Variant) -> dict[str, Any]:
    """The vendored schema, as JSON (that it is a valid JSON Schema is checked once, by a test of its own: the check
    takes seconds, which every test process paid on its first frame)."""
    return json.loads((SCHEMA_DIR / _SCHEMA_FILES[variant]).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _index(variant: Variant) -> _SchemaIndex:
    root = schema_root(variant)
    by_method: dict[tuple[FrameKind, str, str], str] = {}
    for name, definition in root["$defs"].items():
        method = definition.get("x-method")
        side = definition.get("x-side")
        if method is None or side is None:
            continue
        if name.endswith("Request"):
            kind: FrameKind = "request"
        elif name.endswith("Notification"):
            kind = "notification"
        elif name.endswith("Response"):
            kind = "response"
        else:
            raise RuntimeError(f"schema $defs entry {name} has x-method but no recognisable kind")
        by_method[(kind, side, method)] = name
    return _SchemaIndex(root=root, by_method=by_method)


@lru_cache(maxsize=None)
def _validator(variant: Variant, definition: str) -> Any:
    root = _index(variant).root
    if definition not in root["$defs"]:
        raise KeyError(f"no $defs entry named {definition!r} in the {variant} schema")
    return _Validator({"$ref": f"#/$defs/{definition}", "$defs": root["$defs"]})


@lru_cache(maxsize=None)
def _envelope_validators(variant: Variant, sender: Sender, kind: FrameKind) -> tuple[Any, ...]:
    """Checks of the JSON-RPC envelope: jsonrpc "2.0" plus the schema's ClientRequest /
    AgentResponse / ... definition for this sender and kind. Responses first get a check of
    `id` and `error` alone, because the schema's Result-or-Error union reports failures vaguely."""
    defs = _index(variant).root["$defs"]
    jsonrpc = {"jsonrpc": {"type": "string", "enum": ["2.0"]}}
    schemas: list[dict[str, Any]] = []
    if kind == "response":
        schemas.append(
            {
                "type": "object",
                "properties": {**jsonrpc, "id": {"$ref": "#/$defs/RequestId"}, "error": {"$ref": "#/$defs/Error"}},
                "required": ["jsonrpc", "id"],
            }
        )
    schemas.append(
        {
            "type": "object",
            "properties": jsonrpc,
            "required": ["jsonrpc"],
            "allOf": [{"$ref": f"#/$defs/{sender.capitalize()}{kind.capitalize()}"}],
        }
    )
    return tuple(_Validator({**schema, "$defs": defs}) for schema in schemas)


@lru_cache(maxsize=None)
def _plain_envelope_validator(variant: Variant, kind: FrameKind) -> Any:
    """The envelope of a frame whose params or result are checked against their method's own definition: jsonrpc
    "2.0", a RequestId, a method name, an Error object. The schema's {Sender}{Kind} union adds only that the params
    (or result) match some method's definition, which the method's own check makes certain, and it costs as much as
    the rest of the check together (an anyOf over every method of that direction)."""
    properties: dict[str, Any] = {"jsonrpc": {"type": "string", "enum": ["2.0"]}}
    required = ["jsonrpc"]
    if kind != "notification":
        properties["id"] = {"$ref": "#/$defs/RequestId"}
        required.append("id")
    if kind == "response":
        properties["error"] = {"$ref": "#/$defs/Error"}
    else:
        properties["method"] = {"type": "string"}
        required.append("method")
    schema = {"type": "object", "properties": properties, "required": required}
    return _Validator({**schema, "$defs": _index(variant).root["$defs"]})


def _other(sender: Sender) -> Sender:
    return "agent" if sender == "client" else "client"


def frame_kind(frame: Mapping[str, Any]) -> FrameKind:
    """Classify a JSON-RPC frame; raises SchemaViolation when it is none of the three kinds."""
    if "method" in frame:
        return "request" if "id" in frame else "notification"
    if "id" in frame and ("result" in frame) != ("error" in frame):
        return "response"
    raise SchemaViolation(f"not a JSON-RPC request, notification or response: {_short(frame)}")


# Properties whose const value selects a branch of a oneOf/anyOf in the ACP schema.
_DISCRIMINATORS = frozenset({"sessionUpdate", "type", "outcome"})


def _is_discriminator_miss(error: ValidationError) -> bool:
    return error.validator == "const" and bool(error.relative_path) and error.relative_path[-1] in _DISCRIMINATORS


def _explain(error: ValidationError) -> ValidationError:
    """Follow a failed oneOf/anyOf into the one branch whose discriminator matches the frame, so
    the message names the real problem instead of "not valid under any of the given schemas"."""
    while error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        selected = [subs for subs in branches.values() if not any(_is_discriminator_miss(s) for s in subs)]
        if len(selected) != 1:
            break
        error = min(selected[0], key=relevance)
    return error


def _check(validator: Any, instance: Any, what: str, frame: Mapping[str, Any]) -> None:
    errors = list(validator.iter_errors(instance))
    if errors:
        error = _explain(min(errors, key=relevance))
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise SchemaViolation(f"{what} violates the ACP schema at {where}: {error.message}\nframe: {_short(frame)}")


def _short(frame: Any, limit: int = 1500) -> str:
    text = json.dumps(frame, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def definition_for(
    sender: Sender, kind: FrameKind, method: str, *, variant: Variant = "stable"
) -> str | None:
    """Name of the $defs entry for the params (requests, notifications) or result (responses)
    of `method` when sent by `sender`; None for `_` extension methods, which the schema leaves open.
    Raises SchemaViolation for a method the schema does not define in that direction."""
    if method.startswith("_"):
        return None
    handler = _other(sender) if kind != "response" else sender
    index = _index(variant)
    name = index.by_method.get((kind, handler, method))
    if name is None and kind == "notification":
        name = index.by_method.get((kind, "protocol", method))
    if name is None:
        direction = f"{sender}->{_other(sender)}"
        raise SchemaViolation(f"{method!r} is not a {direction} {kind} in the {variant} ACP schema")
    return name


def validate_frame(
    frame: Mapping[str, Any],
    sender: Sender,
    *,
    answers: str | None = None,
    variant: Variant = "stable",
) -> FrameKind:
    """Validate one JSON-RPC frame sent by `sender` ("client" or "agent") against the ACP schema.

    For a response, `answers` must name the method of the request it answers. Checks the
    envelope (jsonrpc "2.0", id, Error object) and the method-specific params or result.
    Returns the frame's kind; raises SchemaViolation on any mismatch.
    """
    if sender not in ("client", "agent"):
        raise ValueError(f"sender must be 'client' or 'agent', not {sender!r}")
    kind = frame_kind(frame)
    if kind == "response" and answers is None:
        raise ValueError("validate_frame needs answers=<method> to check a response")
    method = answers if kind == "response" else frame["method"]
    if not isinstance(method, str):
        raise SchemaViolation(f"{sender} {kind} has a method that is not a string: {_short(frame)}")
    definition = definition_for(sender, kind, method, variant=variant)
    # An extension method (no definition of its own) is held to the schema's union for its direction.
    envelopes = (_plain_envelope_validator(variant, kind),) if definition is not None else \
        _envelope_validators(variant, sender, kind)
    for envelope in envelopes:
        _check(envelope, frame, f"{sender} {kind}", frame)
    if definition is None or (kind == "response" and "error" in frame):
        return kind  # an error answer: the envelope checked it against the schema's Error object
    if kind == "response":
        _check(_validator(variant, definition), frame["result"], f"result of {answers}", frame)
    else:
        _check(_validator(variant, definition), frame.get("params"), f"params of {method}", frame)
    return kind


@dataclass(frozen=True)
class RecordedFrame:
    """One frame as it crossed the wire, with the method it belongs to (for responses: the request's)."""

    sender: Sender
    kind: FrameKind
    method: str
    message: dict[str, Any]

    @property
    def params(self) -> Any:
        return self.message.get("params")

    @property
    def update(self) -> dict[str, Any] | None:
        """The `update` of a session/update notification, else None."""
        if self.method == "session/update" and self.kind == "notification":
            return self.message["params"]["update"]
        return None


# Methods no ACP schema describes any more that the demo agent and the proxy still accept, because older
# clients send them (session/set_model, replaced by the model config option): recorded, not validated.
OUTSIDE_THE_SCHEMA = frozenset({"session/set_model"})


@dataclass
class FrameLog:
    """A connection observer that records every frame in wire order and validates it.

    Pass it as `observers=[log]` when building an SDK connection; `local` is the side that
    owns that connection. The SDK swallows exceptions raised by observers, so violations are
    collected in `errors`; call `check()` (tests do so when they finish) to fail loudly.
    """

    local: Sender = "client"
    variant: Variant = "stable"
    frames: list[RecordedFrame] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _pending: dict[tuple[Sender, Any], str] = field(default_factory=dict)
    _waiters: list[tuple[Callable[[RecordedFrame], bool], asyncio.Future[RecordedFrame]]] = field(
        default_factory=list
    )

    def __call__(self, event: Any) -> None:
        direction = getattr(event.direction, "value", event.direction)
        sender: Sender = self.local if direction == "outgoing" else _other(self.local)
        self.record(sender, event.message)

    def record(self, sender: Sender, message: dict[str, Any]) -> RecordedFrame | None:
        """Validate and store a frame sent by `sender`; returns it, or None if it was unusable."""
        try:
            kind = frame_kind(message)
            if kind == "response":
                method = self._pending.pop((_other(sender), message["id"]), None)
                if method is None:
                    raise SchemaViolation(f"response to an unknown request id: {_short(message)}")
            else:
                method = message["method"]
                if kind == "request":
                    self._pending[(sender, message["id"])] = method
            answers = method if kind == "response" else None
            if method not in OUTSIDE_THE_SCHEMA:
                self._validate(message, sender, answers)
        except (SchemaViolation, ValueError) as exc:
            self.errors.append(str(exc))
            return None
        frame = RecordedFrame(sender=sender, kind=kind, method=method, message=message)
        return self._keep(frame)

    def _validate(self, message: dict[str, Any], sender: Sender, answers: str | None) -> None:
        try:
            validate_frame(message, sender, answers=answers, variant=self.variant)
        except SchemaViolation as exc:
            # Methods only the unstable schema has are checked against that one rather than refused.
            if self.variant != "stable" or "in the stable ACP schema" not in str(exc):
                raise
            validate_frame(message, sender, answers=answers, variant="unstable")

    def _keep(self, frame: RecordedFrame) -> RecordedFrame:
        self.frames.append(frame)
        for waiter in list(self._waiters):
            predicate, future = waiter
            if not future.done() and predicate(frame):
                future.set_result(frame)
                self._waiters.remove(waiter)
        return frame

    def check(self) -> None:
        """Raise SchemaViolation listing every invalid frame seen so far."""
        if self.errors:
            raise SchemaViolation(f"{len(self.errors)} frame(s) violate the ACP schema:\n" + "\n".join(self.errors))

    async def wait_for(self, predicate: Callable[[RecordedFrame], bool], timeout: float = 10.0) -> RecordedFrame:
        """The first frame (already seen or still to come) matching `predicate`, within `timeout` seconds."""
        for frame in self.frames:
            if predicate(frame):
                return frame
        future: asyncio.Future[RecordedFrame] = asyncio.get_running_loop().create_future()
        waiter = (predicate, future)
        self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def updates(self, session_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """session/update payloads in wire order, optionally for one session and one `sessionUpdate` kind."""
        found = []
        for frame in self.frames:
            update = frame.update
            if update is None:
                continue
            if session_id is not None and frame.params.get("sessionId") != session_id:
                continue
            if kind is not None and update.get("sessionUpdate") != kind:
                continue
            found.append(update)
        return found

    def results(self, method: str) -> list[dict[str, Any]]:
        """Raw result (or error) objects of responses to `method`, in wire order."""
        return [f.message for f in self.frames if f.kind == "response" and f.method == method]

    def last_result(self, method: str) -> Any:
        """The raw `result` of the most recent successful response to `method`."""
        for message in reversed(self.results(method)):
            if "result" in message:
                return message["result"]
        raise LookupError(f"no successful response to {method} recorded")
