"""How the agent's answers change a session's state: a session/new, load, resume or fork result, and the
answers of set_config_option and set_mode. Written once for ``Agent`` (client.py), ``Session`` and the
update applier (_inbound.py).

Threads: the appliers run on the background loop thread, in wire order (connection/routing.py).
"""

from __future__ import annotations

from typing import Any

from .connection.checks import odd_current_values, options_problem
from .connection.routing import Applier
from .state import SessionState

__all__ = ["apply_session_result", "odd_values_note", "state_applier"]


def state_applier(state: SessionState, method: str, params: dict[str, Any]) -> Applier | None:
    """How the answer to ``method`` changes the session's state, in wire order: the complete option list of a
    set_config_option answer, the mode of an accepted set_mode; None for requests that change nothing here."""
    def options(answer: dict[str, Any]) -> str | None:
        result = answer.get("result")
        if not isinstance(result, dict) or "configOptions" not in result:
            return None
        problem = options_problem(result["configOptions"])
        if problem is not None:
            return f"not applied: {problem}"
        state.set_options(result["configOptions"])
        return odd_values_note(result["configOptions"])

    def mode(answer: dict[str, Any]) -> None:
        if "result" in answer and isinstance(params.get("modeId"), str):
            state.set_legacy_mode(params["modeId"])

    return {"session/set_config_option": options, "session/set_mode": mode}.get(method)


def apply_session_result(state: SessionState, result: dict[str, Any]) -> str | None:
    """Apply a session/new, load, resume or fork result; a note naming what was left out, or options that look
    odd. A malformed field is left out (the rest applies): the session is open either way."""
    clean, notes = dict(result), []
    options = clean.get("configOptions")
    if options is not None and options_problem(options) is not None:
        notes.append(f"config options not applied: {options_problem(clean.pop('configOptions'))}")
    for legacy in ("modes", "models"):
        value = clean.get(legacy)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(v, list) for k, v in value.items() if k.startswith("available") and v is not None)):
            notes.append(f"its {legacy} field not applied: not an object with lists of choices")
            del clean[legacy]
    state.apply_session_result(clean)
    odd = odd_values_note(clean.get("configOptions"))
    return "; ".join(notes + ([odd] if odd else [])) or None


def odd_values_note(options: Any) -> str | None:
    """A note for options whose current value is not among their choices (kept and shown as the agent says)."""
    odd = odd_current_values(options)
    return "; ".join(odd) if odd else None
