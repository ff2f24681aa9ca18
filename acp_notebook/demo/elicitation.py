"""The demo agent's form (elicitation/create, form mode): the questions it asks after "ask me", and
the sentence it answers with once the client replies. Pure data and functions; the agent sends the
request.

The form has one field of each kind the ACP form schema allows for flat answers: text (name), enum
(favourite colour), number (cups of tea a day) and boolean (likes notebooks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ASK_PREFIX", "FORM_MESSAGE", "asks_for_form", "form_request", "summarise_answers"]

ASK_PREFIX = "ask me"
FORM_MESSAGE = "A few questions from the demo agent"
COLOURS = ("red", "green", "blue")

REQUESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "About you",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1, "maxLength": 60},
        "colour": {"type": "string", "title": "Favourite colour", "enum": list(COLOURS), "default": "green"},
        "cups": {"type": "number", "title": "Cups of tea a day", "minimum": 0, "maximum": 20, "default": 2},
        "notebooks": {"type": "boolean", "title": "Do you like notebooks?", "default": True},
    },
    "required": ["name", "colour"],
}


def asks_for_form(prompt: str) -> bool:
    """True for a prompt that starts with "ask me" (any case)."""
    return prompt.lstrip().lower().startswith(ASK_PREFIX)


def form_request(session_id: str) -> dict[str, Any]:
    """The params of the elicitation/create request (form mode, tied to the session)."""
    return {"sessionId": session_id, "mode": "form", "message": FORM_MESSAGE, "requestedSchema": REQUESTED_SCHEMA}


def summarise_answers(content: Any) -> str:
    """One sentence that uses every answer; a missing or mistyped answer is said to be missing."""
    answers: Mapping[str, Any] = content if isinstance(content, Mapping) else {}
    name = answers.get("name")
    colour = answers.get("colour")
    cups = answers.get("cups")
    likes = answers.get("notebooks")
    parts = [f"Thank you, {name}!" if isinstance(name, str) and name.strip() else "Thank you (no name given)!"]
    parts.append(f"Favourite colour: {colour}." if colour in COLOURS else "No favourite colour picked.")
    if isinstance(cups, (int, float)) and not isinstance(cups, bool):
        amount = int(cups) if float(cups).is_integer() else cups
        parts.append(f"{amount} cup{'' if amount == 1 else 's'} of tea a day.")
    else:
        parts.append("Tea: no answer.")
    if isinstance(likes, bool):
        parts.append("You like notebooks." if likes else "You do not like notebooks.")
    else:
        parts.append("Notebooks: no answer.")
    return " ".join(parts)
