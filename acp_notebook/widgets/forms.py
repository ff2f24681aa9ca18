"""Forms the agent asks for (``elicitation/create``, form mode), drawn as ipywidgets inside the turn.

``FormPrompt`` builds one input per property of the request's schema (text, number and integer with
their bounds, a checkbox for booleans, a dropdown for a single choice, a multi-select for an array of
choices; titles, descriptions, defaults and required marks) with Submit, Decline and Cancel buttons.
Its ``future`` is what the client's elicitation policy awaits: Submit resolves it with the answers
once every field passes the schema's rules (a field that does not says why next to it, and nothing is
sent), Decline with "decline", Cancel with "cancel", the end of the turn with None (cancel). A
property of a kind this view does not know is named but not drawn as an input (ACP: clients must not
render unknown kinds as a known control).

``FormAsker`` is the turn's policy (``AcpMagics.elicitation = 'ask'``), the twin of
``PermissionAsker``: forms asked before the view exists wait for ``attach(view)``.

Threads: the asker is called on the background loop thread, which builds the form; clicks arrive on
the kernel thread; the turn's end withdraws the form from the loop thread. A form's widgets, outcome
and record are written under its own lock, and its future is resolved once.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import ipywidgets as widgets

from .. import _loop
from ..elicitation import ElicitationRequest, check_answers, enum_values
from ._html import BORDER, FG, MUTED
from .comms import follow_changes, handled_in_order
from .permission import ViewAsker

__all__ = ["FormAsker", "FormPrompt", "answers_text", "automatic_form_html", "field_label", "record_words"]

ERROR_COLOR = "#c62828"
NO_CHOICE = "(no answer)"
PICK_ONE = "(choose one)"


# --- words shared by the live form and the saved forms -------------------------------------
def field_label(name: str, prop: Mapping[str, Any]) -> str:
    return str(prop.get("title") or name)


def _choices(prop: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) pairs of a single-choice property (``enum``, or ``oneOf`` of const/title)."""
    titled = prop.get("oneOf")
    if isinstance(titled, list):
        return [(str(c.get("title") or c.get("const")), c.get("const")) for c in titled
                if isinstance(c, Mapping) and "const" in c]
    return [(str(value), value) for value in enum_values(prop) or []]


def _item_choices(prop: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) pairs of a multi-select property (``items.enum``, or ``items.anyOf`` of const/title)."""
    items = prop.get("items") if isinstance(prop.get("items"), Mapping) else {}
    if isinstance(items.get("anyOf"), list):
        return [(str(c.get("title") or c.get("const")), c.get("const")) for c in items["anyOf"]
                if isinstance(c, Mapping) and "const" in c]
    return [(str(v), v) for v in items.get("enum") or []]


def _value_words(prop: Mapping[str, Any], value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        names = dict((v, label) for label, v in _item_choices(prop))
        return ", ".join(str(names.get(v, v)) for v in value) or "none"
    names = dict((v, label) for label, v in _choices(prop))
    if value in names:
        return names[value]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def answers_text(fields: Mapping[str, Mapping[str, Any]], content: Mapping[str, Any] | None) -> str:
    """The answers as a person reads them: "Your name: Ada; Favourite colour: blue"."""
    content = content or {}
    parts = [f"{field_label(name, fields.get(name) or {})}: {_value_words(fields.get(name) or {}, value)}"
             for name, value in content.items()]
    return "; ".join(parts) if parts else "no answers"


def record_words(record: Any) -> str:
    """What the agent was told, for a form answered by a policy (or after a click)."""
    if record.action == "accept":
        return f"answered: {answers_text(record.fields, record.content)}"
    words = "declined" if record.action == "decline" else "cancelled"
    return f"{words} ({record.problem})" if record.problem else words


# --- one field -------------------------------------------------------------------------------
def _kind(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    if kind == "string":
        return "choice" if _choices(prop) or prop.get("enum") is not None or prop.get("oneOf") is not None \
            else "text"
    if kind in ("number", "integer", "boolean"):
        return str(kind)
    if kind == "array" and _item_choices(prop):
        return "choices"
    return "unknown"


def _number(value: Any) -> str:
    """A number as a person writes it: 2, 0.5, 1000000 (not 2.0 or 1e+06); "" for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


def _bounds(prop: Mapping[str, Any], whole: bool) -> str:
    low, high = _number(prop.get("minimum")), _number(prop.get("maximum"))
    what = "a whole number" if whole else "a number"
    if low and high:
        return f"{what} from {low} to {high}"
    if low:
        return f"{what}, at least {low}"
    if high:
        return f"{what}, at most {high}"
    return what


FORMAT_HINTS = {"email": "name@example.org", "uri": "https://...", "date": "YYYY-MM-DD",
                "date-time": "YYYY-MM-DDTHH:MM:SS"}


def _check_format(text: str, fmt: Any) -> None:
    """The string formats of ACP forms; ValueError saying what was expected."""
    try:
        if fmt == "date":
            datetime.date.fromisoformat(text)
        elif fmt == "date-time":
            datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expected {FORMAT_HINTS[fmt]}") from None
    if fmt == "email" and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", text):
        raise ValueError("expected an email address")
    if fmt == "uri" and not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:\S", text):
        raise ValueError("expected a URI such as https://example.org")


def _mismatch(pattern: str, text: str) -> bool:
    """True when ``text`` fails the schema's ``pattern`` (unanchored, as JSON Schema says). A pattern Python
    cannot read is not held against the person: the agent checks its own answers too."""
    try:
        return re.search(pattern, text) is None
    except re.error:
        return False


@dataclass
class _Field:
    """One property of the form: its input, the line that says what is wrong with it, and its box."""

    name: str
    prop: Mapping[str, Any]
    kind: str
    required: bool
    input: widgets.Widget | None
    error: widgets.HTML
    box: widgets.Widget

    def answer(self) -> tuple[bool, Any]:
        """(given, value) read from the input; ValueError when the input is not even of the right kind."""
        if self.input is None:
            return False, None
        value = self.input.value
        if self.kind in ("number", "integer"):
            text = str(value).strip()
            if not text:
                return False, None
            try:
                number = float(text)
                if not math.isfinite(number):  # "nan" and "inf" parse, but JSON has no such numbers
                    raise ValueError(text)
            except ValueError:
                raise ValueError("expected a whole number" if self.kind == "integer" else "expected a number") from None
            # A whole number is sent as one ("3", not "3.0"): valid for number fields, needed for integer ones.
            return True, int(number) if number.is_integer() else number
        if self.kind == "text":
            return (bool(value), value) if value else (False, None)
        if self.kind == "choice":
            return (value is not None), value
        if self.kind == "choices":
            return (bool(value), list(value))
        return True, bool(value)  # boolean: a checkbox always has a value

    def check(self) -> Any:
        """The value to send (None: not given); ValueError with the reason to show next to the field."""
        given, value = self.answer()
        if not given:
            if self.required:
                raise ValueError("required")
            return None
        if self.kind == "text":
            pattern = self.prop.get("pattern")
            if isinstance(pattern, str) and _mismatch(pattern, value):
                raise ValueError(f"does not match the pattern {pattern}")
            if self.prop.get("format") in FORMAT_HINTS:
                _check_format(value, self.prop["format"])
        if self.kind == "choices":
            allowed = [v for _, v in _item_choices(self.prop)]
            low, high = self.prop.get("minItems"), self.prop.get("maxItems")
            if isinstance(low, int) and len(value) < low:
                raise ValueError(f"pick at least {low}")
            if isinstance(high, int) and len(value) > high:
                raise ValueError(f"pick at most {high}")
            if any(v not in allowed for v in value):
                raise ValueError("not one of the choices")
            return value
        # The library's own rules (types, bounds, lengths, choices), on this field alone.
        alone = ElicitationRequest(None, "", {"properties": {self.name: dict(self.prop)}}, {})
        try:
            return check_answers(alone, {self.name: value})[self.name]
        except ValueError as exc:
            raise ValueError(str(exc).removeprefix(f"{self.name}: ")) from None

    def show_error(self, message: str) -> None:
        html = (f'<div class="acpnb-form-error" style="color:{ERROR_COLOR};font-size:0.9em">&#9888; '
                f"{escape(message)}</div>") if message else ""
        if self.error.value != html:
            self.error.value = html


def _input(name: str, prop: Mapping[str, Any], kind: str, required: bool) -> widgets.Widget | None:
    # Text fields send their value when they lose focus or on Enter, not key by key: the browser holds a
    # field's next change until the kernel has acknowledged its previous one, while a click on Submit
    # (another widget) goes out at once, so the click could overtake the last keys typed. Clicking
    # Submit takes the focus first, so the value is on the wire before the click.
    default = prop.get("default")
    wide = widgets.Layout(width="min(100%, 28em)")
    if kind == "text":
        hint = FORMAT_HINTS.get(str(prop.get("format")), "")
        return widgets.Text(value=default if isinstance(default, str) else "", placeholder=hint, layout=wide,
                            continuous_update=False)
    if kind in ("number", "integer"):
        return widgets.Text(value=_number(default), placeholder=_bounds(prop, kind == "integer"), layout=wide,
                            continuous_update=False)
    if kind == "boolean":
        return widgets.Checkbox(value=bool(default) if isinstance(default, bool) else False,
                                description=field_label(name, prop), indent=False, layout=widgets.Layout(width="auto"))
    if kind == "choice":
        pairs = _choices(prop)
        values = [v for _, v in pairs]
        if default in values:
            return widgets.Dropdown(options=pairs, value=default, layout=wide)
        # No default: the person picks; an optional field may be left without an answer.
        return widgets.Dropdown(options=[(PICK_ONE if required else NO_CHOICE, None), *pairs], value=None, layout=wide)
    if kind == "choices":
        pairs = _item_choices(prop)
        chosen = tuple(v for v in prop.get("default") or () if v in [v for _, v in pairs])
        return widgets.SelectMultiple(options=pairs, value=chosen, rows=min(6, len(pairs)), layout=wide)
    return None


def _field(name: str, prop: Mapping[str, Any], required: bool) -> _Field:
    kind = _kind(prop)
    control = _input(name, prop, kind, required)
    if control is not None:
        follow_changes(control)  # every edit reaches the kernel, also while the cell awaits its turn
    mark = f' <span style="color:{ERROR_COLOR}" title="required">*</span>' if required else ""
    parts: list[widgets.Widget] = []
    if kind != "boolean":  # a checkbox carries its own label
        parts.append(widgets.HTML(f'<span style="color:{FG};font-weight:600">{escape(field_label(name, prop))}'
                                  f"</span>{mark}"))
    if control is not None:
        control.add_class("acpnb-form-input")
        parts.append(control)
    else:
        parts.append(widgets.HTML(f'<span style="color:{MUTED}">asks for a {escape(str(prop.get("type")))} '
                                  "answer, which this notebook cannot show</span>"))
    if prop.get("description"):
        parts.append(widgets.HTML(f'<div style="color:{MUTED};font-size:0.9em">'
                                  f"{escape(str(prop['description']))}</div>"))
    error = widgets.HTML()
    parts.append(error)
    box = widgets.VBox(parts, layout=widgets.Layout(margin="2px 0 6px 0"))
    box.add_class("acpnb-form-field")
    box.add_class(f"acpnb-form-field-{re.sub(r'[^A-Za-z0-9_-]', '_', name)}")
    return _Field(name, prop, kind, required, control, error, box)


# --- the form ----------------------------------------------------------------------------------
class FormPrompt:
    """One form of the agent's, drawn from its schema; ``future`` resolves to the answers (a dict),
    "decline", "cancel", or None when the turn ended first (see the module docstring).

    ``timeout``: seconds to wait for an answer before declining (unattended runs); ``record`` is set by
    the view when the client has answered the agent (what was sent, or why not).
    """

    def __init__(self, request: ElicitationRequest, *, timeout: float | None = None) -> None:
        self.request = request
        self.message = request.message
        self.schema_fields = request.fields
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()
        self._lock = threading.RLock()  # re-entered: resolving the future runs _settled on the same thread
        self.outcome_text = ""
        self.submitted: dict[str, Any] | None = None
        self.record: Any = None
        required = set(request.required)
        self.fields = [_field(name, prop if isinstance(prop, Mapping) else {}, name in required)
                       for name, prop in self.schema_fields.items()]
        self.submit_button = self._button("Submit", "primary", "Send these answers to the agent", self.submit)
        self.decline_button = self._button("Decline", "", "Tell the agent you will not answer", self.decline)
        self.cancel_button = self._button("Cancel form", "", "Close this form without an answer (the agent hears "
                                          "'cancel'); the turn goes on", self.cancel)
        self.problem = widgets.HTML()
        self.outcome = widgets.HTML()
        self.widget = widgets.VBox(
            [widgets.HTML(self._head_html()), *(f.box for f in self.fields), self.problem,
             widgets.HBox([self.submit_button, self.decline_button, self.cancel_button],
                          layout=widgets.Layout(grid_gap="6px")), self.outcome],
            layout=widgets.Layout(border=f"1px solid {BORDER}", padding="6px 10px", margin="4px 0"),
        )
        self.widget.add_class("acpnb-form")
        self.future.add_done_callback(self._settled)
        if timeout:
            _loop.call_soon(_loop.get_loop().call_later, timeout, self._expire, timeout)

    @staticmethod
    def _button(text: str, style: str, tooltip: str, action: Any) -> widgets.Button:
        button = widgets.Button(description=text, button_style=style, tooltip=tooltip,
                                layout=widgets.Layout(width="auto"))
        button.add_class(f"acpnb-form-{text.split()[0].lower()}")
        handled_in_order(button)  # a click is handled after the field changes sent before it
        button.on_click(lambda _button: action())
        return button

    def _head_html(self, verb: str = "asks") -> str:
        title = self.request.schema.get("title")
        sub = f'<div style="color:{MUTED};font-size:0.9em">{escape(str(title))}</div>' if title else ""
        return f'<div style="color:{FG}"><b>The agent {verb}:</b> {escape(self.message)}</div>{sub}'

    # --- answering (kernel thread: clicks; loop thread: the end of the turn, the timeout) ---
    def submit(self) -> bool:
        """Check every field; send the answers when all pass, else show why next to each field (nothing is sent)."""
        with self._lock:
            if self.future.done():
                return False
            answers: dict[str, Any] = {}
            wrong = 0
            for field in self.fields:
                try:
                    value = field.check()
                except ValueError as exc:
                    field.show_error(str(exc))
                    wrong += 1
                    continue
                field.show_error("")
                if value is not None:
                    answers[field.name] = value
            if not wrong:
                try:  # the whole form once more, as the client will check it
                    answers = check_answers(self.request, answers)
                except ValueError as exc:
                    wrong, message = 1, str(exc)
                else:
                    message = ""
            else:
                message = f"{wrong} field{'s' if wrong > 1 else ''} to fix; nothing was sent"
            self.problem.value = (f'<div class="acpnb-form-problem" style="color:{ERROR_COLOR}">{escape(message)}</div>'
                                  if wrong else "")
            if wrong:
                return False
            self.submitted = answers
            self.future.set_result(answers)
            return True

    def decline(self) -> None:
        self._answer("decline")

    def cancel(self) -> None:
        self._answer("cancel")

    def withdraw(self) -> None:
        """The turn ended: nobody can answer this form any more (the agent is told "cancel")."""
        self._answer(None)

    def _answer(self, answer: str | None) -> None:
        with self._lock:
            if not self.future.done():
                self.future.set_result(answer)

    def _expire(self, timeout: float) -> None:
        with self._lock:
            if self.future.done():
                return
            self.outcome_text = f"No answer within {timeout:g} s: declined."
            self.future.set_result("decline")

    def _settled(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            answer = None if future.cancelled() else future.result()
            if not self.outcome_text:
                if isinstance(answer, Mapping):
                    self.outcome_text = f"You answered: {answers_text(self.schema_fields, answer)}."
                elif answer == "decline":
                    self.outcome_text = "You declined."
                elif answer == "cancel":
                    self.outcome_text = "You cancelled."
                else:
                    self.outcome_text = "Withdrawn: the turn ended before an answer."
            for field in self.fields:
                if field.input is not None:
                    field.input.disabled = True
            for button in (self.submit_button, self.decline_button, self.cancel_button):
                button.disabled = True
            self._show_outcome()

    def note_record(self, record: Any) -> None:
        """What the client told the agent (the view passes the turn's record of this form)."""
        with self._lock:
            self.record = record
            self._show_outcome()

    def _show_outcome(self) -> None:
        text = self.outcome_words()
        self.outcome.value = (f'<div class="acpnb-form-outcome" style="color:{MUTED};font-size:0.9em">'
                              f"{escape(text)}</div>")

    # --- what it says ------------------------------------------------------------------------
    def outcome_words(self) -> str:
        """The answer, and what went wrong when the client could not send it; "" while waiting."""
        with self._lock:
            if not self.future.done():
                return ""
            text = self.outcome_text
            if self.record is not None and self.record.problem:
                text += f" Not sent as given: {self.record.problem}."
            return text

    @property
    def waiting(self) -> bool:
        return not self.future.done()

    def field_names(self) -> str:
        return ", ".join(field_label(f.name, f.prop) + ("*" if f.required else "") for f in self.fields)

    def plain_text(self) -> str:
        if self.waiting:
            return f"The agent asks: {self.message} (waiting for an answer: {self.field_names()})"
        return f"The agent asked: {self.message}. {self.outcome_words()}"

    def static_html(self) -> str:
        """The form as a saved notebook shows it: what was asked (each field) and what was answered."""
        with self._lock:
            content = (self.record.content if self.record is not None and self.record.action == "accept"
                       else self.submitted) or {}
            waiting = self.waiting
            rows = "".join(
                f'<tr><td style="color:{MUTED};padding:1px 10px 1px 0;text-align:left">'
                f"{escape(field_label(f.name, f.prop))}"
                f'{"*" if f.required else ""}</td><td style="color:{FG};text-align:left">'
                f'{escape(_value_words(f.prop, content[f.name])) if f.name in content else "&mdash;"}</td></tr>'
                for f in self.fields)
            outcome = ("Waiting for an answer." if waiting else self.outcome_words())
        return (f'<div class="acpnb-form acpnb-static" style="border:1px solid {BORDER};padding:6px 10px;margin:4px 0">'
                f"{self._head_html('asks' if waiting else 'asked')}"
                f'<table style="margin:4px 0;border-collapse:collapse">{rows}</table>'
                f'<div class="acpnb-form-outcome" style="color:{MUTED};font-size:0.9em">{escape(outcome)}</div></div>')


def automatic_form_html(record: Any, note: str) -> tuple[str, str]:
    """(text, HTML) of a form a policy answered without asking anyone (``note`` says which policy)."""
    words = record_words(record)
    who = f" by {note}" if note else ""
    text = f"The agent asked: {record.message}. {words[:1].upper()}{words[1:]} automatically{who}."
    html = (f'<div class="acpnb-form-auto" style="color:{MUTED};font-size:0.9em;padding:2px 4px">'
            f"{escape(text)}</div>")
    return text, html


class FormAsker(ViewAsker):
    """Forms in the turn's view (``AcpMagics.elicitation = 'ask'``); ``timeout``: seconds to wait for an
    answer before declining."""

    def _prompt_for(self, request: ElicitationRequest) -> FormPrompt:
        return FormPrompt(request, timeout=self.timeout)

    def _show(self, view: Any, prompt: Any) -> None:
        view.add_form(prompt)

