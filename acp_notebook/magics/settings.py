"""``%acp set ID=VALUE ...``: several options at once, all or nothing where that can be known beforehand.

Every value is checked against the session's options before any is sent (an unknown id, a value not
offered, a bad on/off word: nothing changes, and the error says which). An option that only an earlier
assignment of the line brings (a model's thought level) is checked when its turn comes; a refusal then,
by the client or the agent, says which assignments were applied and which were not. Through the proxy, a
refused model of another agent says that the session is tied to one agent. Kernel thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._protocol import split_agent_model
from ..client import Session
from ..errors import ConfigOptionError
from ..widgets.labels import bound_agent, value_label
from . import grammar as g

__all__ = ["assign", "explain_binding"]


def assign(session: Session, assignments: Sequence[tuple[str, str]], *, proxy_agents: Sequence[str],
           timeout: float, applied: Callable[[], None]) -> list[str]:
    """Set each option in turn; the lines that say what changed. ``applied()`` runs once something changed
    (also when a later assignment fails: what changed is printed before the error is raised)."""
    try:
        _check(session, assignments)
    except ConfigOptionError as exc:
        raise explain_binding(session, proxy_agents, exc) from None
    before = set(session.config.ids())
    changed: list[str] = []
    try:
        for option_id, text in assignments:
            try:
                value = _typed(session, option_id, text)
                session.check_value(option_id, value)
                session.set(option_id, value, timeout=timeout)
            except ConfigOptionError as exc:
                raise _partly_applied(explain_binding(session, proxy_agents, exc), assignments, changed) from None
            changed.append(option_id)
    except ConfigOptionError:
        if changed:
            applied()
            print("\n".join(_changes(session, before, changed)))
        raise
    applied()
    return _changes(session, before, changed)


def _changes(session: Session, before: set[str], changed: list[str]) -> list[str]:
    config = session.config
    lines = [f"{o} = {value_label(config[o])}" for o in changed if o in config]
    lines += [f"new option: {o.id} = {value_label(o)}" for o in config if o.id not in before | set(changed)]
    lines += [f"option gone: {gone}" for gone in sorted(before - set(config.ids()))]
    return lines


def _typed(session: Session, option_id: str, text: str) -> str | bool:
    option = session.config.get(option_id)
    return g.parse_bool(text, option_id) if option is not None and option.type == "boolean" else text


def _check(session: Session, assignments: Sequence[tuple[str, str]]) -> None:
    """Raise for the first value the session's options refuse now (nothing has been sent yet). An id the
    session does not have passes only after another assignment, which may bring it."""
    for index, (option_id, text) in enumerate(assignments):
        if index > 0 and option_id not in session.config:
            continue
        session.check_value(option_id, _typed(session, option_id, text))


def _partly_applied(error: ConfigOptionError, assignments: Sequence[tuple[str, str]],
                    changed: list[str]) -> ConfigOptionError:
    """``error`` as is when nothing was applied yet, else saying which assignments were and which were not."""
    if not changed:
        return error
    pairs = [f"{o}={t}" for o, t in assignments]
    applied, rest = pairs[:len(changed)], pairs[len(changed):]
    kept = (error.hint_for("magic") or "").replace("The session's settings are unchanged.", "").strip()
    # A copy for this cell: the refusal itself is left as the session raised it.
    return error.reworded(f"%acp set applied {' '.join(applied)}, then stopped: {error.message}. "
                          f"Not applied: {' '.join(rest)}",
                          hint=(kept + " " if kept else "") + "The panel shows the settings in force.")


def explain_binding(session: Session, proxy_agents: Sequence[str], error: ConfigOptionError) -> ConfigOptionError:
    """A refused model of another agent, through the proxy: say that the session is tied to one agent."""
    agent = bound_agent(session, proxy_agents)
    option = session.model_option
    wanted = str(error.value) if error.value is not None else ""
    if agent is None or option is None or error.config_id != option.id:
        return error
    named = split_agent_model(wanted, proxy_agents)
    if named is None or named[0] == agent:
        return error  # not another agent's model: the option's own refusal says what the choices are
    return error.reworded(f"{wanted!r} is not offered here: this session is tied to agent '{agent}' since its first "
                          f"prompt, so its model choices are {', '.join(str(v) for v in option.values)}",
                          hint=f"Models of {named[0]} need a new session: %acp new, then %acp set model={wanted} "
                               "(the new session starts with no history).")
