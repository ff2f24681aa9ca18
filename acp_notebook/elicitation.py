"""Elicitation (form mode): the agent asks the user for structured input with ``elicitation/create``.

The request carries a message and a small JSON schema (an object of text, number, integer,
boolean and enum properties). A policy answers it, as permission policies answer permission
requests: ``"decline"`` (the default), ``"cancel"``, a dict of answers (accepted once it
satisfies the schema), or a callable that gets an ``ElicitationRequest`` and returns any of
those (or None for cancel), possibly as an awaitable or a ``concurrent.futures.Future`` so
that a form in the notebook can wait for the user. The turn's policy wins over the
session's, which wins over the agent's.

``check_answers`` validates and coerces answers against the schema; invalid answers from a
policy are not sent: the agent is told "decline" and the turn records why.

Runs on the background loop thread (the client's request handler); records go to the turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = ["ElicitationPolicy", "ElicitationRecord", "ElicitationRequest", "check_answers", "decide"]

logger = logging.getLogger(__name__)

ACTIONS = ("accept", "decline", "cancel")


@dataclass(frozen=True)
class ElicitationRequest:
    """What an elicitation policy callable receives."""

    session: Any
    message: str
    schema: dict[str, Any]
    raw: dict[str, Any]
    turn: Any = None

    @property
    def fields(self) -> dict[str, dict[str, Any]]:
        """The schema's properties, in order: name -> its property schema."""
        properties = self.schema.get("properties")
        return dict(properties) if isinstance(properties, Mapping) else {}

    @property
    def required(self) -> list[str]:
        return [str(name) for name in self.schema.get("required") or []]


@dataclass
class ElicitationRecord:
    message: str
    schema: dict[str, Any]
    action: str  # accept, decline or cancel: what the agent was told
    content: dict[str, Any] | None = None
    problem: str = ""  # why a policy's answer was not sent as it was
    fields: dict[str, Any] = field(default_factory=dict)


ElicitationPolicy = Union[str, Mapping[str, Any], Callable[[ElicitationRequest], Any]]


def enum_values(prop: Mapping[str, Any]) -> list[Any] | None:
    """The allowed values of an enum property (``enum`` or ``oneOf`` of ``const``s), else None."""
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    if isinstance(prop.get("oneOf"), list):
        return [choice.get("const") for choice in prop["oneOf"] if isinstance(choice, Mapping) and "const" in choice]
    return None


def _coerce(name: str, value: Any, prop: Mapping[str, Any]) -> Any:
    kind = prop.get("type")
    allowed = enum_values(prop)
    if allowed is not None and value not in allowed:
        raise ValueError(f"{name}: {value!r} is not one of {allowed}")
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"{name}: expected true or false, not {value!r}")
    elif kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name}: expected a number, not {value!r}")
        if kind == "integer":
            if float(value) != int(value):
                raise ValueError(f"{name}: expected a whole number, not {value!r}")
            value = int(value)
        for bound, test in (("minimum", lambda v, b: v < b), ("maximum", lambda v, b: v > b)):
            if isinstance(prop.get(bound), (int, float)) and test(value, prop[bound]):
                raise ValueError(f"{name}: {value} is out of range ({bound} {prop[bound]})")
    elif kind == "string":
        if not isinstance(value, str):
            raise ValueError(f"{name}: expected text, not {value!r}")
        if isinstance(prop.get("minLength"), int) and len(value) < prop["minLength"]:
            raise ValueError(f"{name}: at least {prop['minLength']} characters")
        if isinstance(prop.get("maxLength"), int) and len(value) > prop["maxLength"]:
            raise ValueError(f"{name}: at most {prop['maxLength']} characters")
    return value


def check_answers(request: ElicitationRequest, answers: Mapping[str, Any]) -> dict[str, Any]:
    """Answers that satisfy the request's schema (numbers made integers where asked); ValueError otherwise."""
    fields_ = request.fields
    unknown = sorted(set(answers) - set(fields_))
    if unknown:
        raise ValueError(f"not in the form: {', '.join(unknown)}")
    missing = [name for name in request.required if answers.get(name) in (None, "")]
    if missing:
        raise ValueError(f"required: {', '.join(missing)}")
    return {name: _coerce(name, value, fields_[name]) for name, value in answers.items() if value is not None}


async def _resolve(policy: ElicitationPolicy, request: ElicitationRequest) -> Any:
    if isinstance(policy, str) or isinstance(policy, Mapping) or policy is None:
        return policy
    if not callable(policy):
        raise ValueError(f"an elicitation policy is 'decline', 'cancel', a dict of answers or a callable, "
                         f"not {policy!r}")
    answer = policy(request)
    if isinstance(answer, concurrent.futures.Future):
        return await asyncio.wrap_future(answer)
    if inspect.isawaitable(answer):
        return await answer
    return answer


async def decide(policy: ElicitationPolicy, request: ElicitationRequest) -> ElicitationRecord:
    """Apply ``policy`` to ``request``; the record says what to answer (see the module docstring)."""
    record = ElicitationRecord(request.message, request.schema, "decline", fields=request.fields)
    try:
        answer = await _resolve(policy, request)
    except Exception as exc:  # noqa: BLE001 - a failing policy must not leave the agent waiting
        logger.exception("elicitation policy failed; declining")
        record.problem = f"the policy failed: {exc}"
        return record
    if answer is None or answer == "cancel":
        record.action = "cancel"
    elif answer == "decline":
        record.action = "decline"
    elif isinstance(answer, Mapping):
        try:
            record.content = check_answers(request, answer)
            record.action = "accept"
        except ValueError as exc:
            record.problem = f"answers not sent ({exc})"
    else:
        record.problem = f"the policy answered {answer!r}; expected a dict of answers, 'decline' or 'cancel'"
    return record


def response(record: ElicitationRecord) -> dict[str, Any]:
    if record.action == "accept":
        return {"action": "accept", "content": record.content or {}}
    return {"action": record.action}
