"""How values, agents and sessions are named on screen: one label style for every view.

Pure functions of the session's state (no widgets, no threads of their own): the panel, the
turn view, ``%acp set`` and the saved forms all call these, so a model reads the same
everywhere. Through the multi-agent proxy a model is labelled "agent / Model" ("b / Smart")
in the header, the dropdown, the reply header and the magic's output alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._protocol import split_agent_model
from ..state import Choice, ConfigOption
from ._html import HeaderInfo

__all__ = [
    "agent_label",
    "bound_agent",
    "choice_label",
    "dropdown_options",
    "session_header_info",
    "session_status",
    "session_title",
    "value_label",
]

# Where the proxy keeps its own facts in the model option's _meta (acp_notebook.proxy.models.META_KEY;
# not imported from there, so the views do not load the proxy).
PROXY_META_KEY = "acp-notebook/proxy"


def _agent_grouped(option: ConfigOption, choice: Choice) -> bool:
    """The proxy's grouping: the group is an agent and the value is ``agent:model``."""
    parsed = split_agent_model(choice.value)
    return parsed is not None and choice.group_id is not None and parsed[0] == choice.group_id


def choice_label(option: ConfigOption, value: str) -> str:
    """A choice as a dropdown shows it: grouped choices read "Group / Choice"."""
    choice = option.choice(value)
    if choice is None:
        return value
    return f"{choice.group} / {choice.name}" if option.grouped and choice.group else choice.name


def value_label(option: ConfigOption) -> str:
    """The current value for headers and messages.

    The choice's name; with its group when the group is an agent (the proxy: "b / Smart", the
    same words as the dropdown) or when another group has a choice of the same name.
    """
    if option.type != "select":
        return option.value_name
    choice = option.choice(str(option.value))
    if choice is None:
        return str(option.value)
    if choice.group and _agent_grouped(option, choice):
        return f"{choice.group} / {choice.name}"
    twins = [c for c in option.choices if c.name == choice.name]
    return f"{choice.group} / {choice.name}" if len(twins) > 1 and choice.group else choice.name


def dropdown_options(option: ConfigOption) -> tuple[tuple[str, str], ...]:
    """(label, value) pairs for a select option; grouped choices read "Group / Choice"."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for choice in option.choices:
        label = choice_label(option, choice.value)
        if label in seen:  # two choices with one name: keep both selectable
            label = f"{label} ({choice.value})"
        seen.add(label)
        pairs.append((label, choice.value))
    current = option.value
    if isinstance(current, str) and current not in option.values:
        # The agent reports a value it does not list; show it rather than fail.
        pairs.append((current, current))
    return tuple(pairs)


def bound_agent(session: Any, proxy_agents: Sequence[str]) -> str | None:
    """The agent a proxy session is tied to for good, or None.

    The proxy binds a session to the agent of the picked model; after the first prompt it
    lists only that agent's models. Tied: the model option names a bound agent, and other
    agents of the proxy are no longer among its groups.
    """
    option = session.model_option
    if option is None or len(proxy_agents) < 2:
        return None
    meta = (option.raw.get("_meta") or {}).get(PROXY_META_KEY)
    if not isinstance(meta, dict) or not isinstance(meta.get("agent"), str):
        return None
    listed = set(meta.get("agents") or ())
    others = [a for a in proxy_agents if a != meta["agent"]]
    return meta["agent"] if others and not listed.intersection(others) else None


def agent_label(session: Any) -> str:
    info = session.agent.info or {}
    name = info.get("name") or session.agent.name or "agent"
    version = info.get("version")
    return f"{name} {version}" if version else str(name)


def session_status(session: Any) -> tuple[str, str]:
    """(status, detail) for a header: the agent's lifecycle wins over the session's turn status."""
    agent_status = getattr(session.agent, "status", "running")
    if agent_status == "closed" or getattr(session, "closed", False):
        return "closed", ""
    if agent_status == "exited":
        return "error", f"the agent exited (code {session.agent.exit_code})"
    return session.state.status or "idle", session.state.status_detail or ""


def session_title(session: Any, title_hint: str | None = None) -> tuple[str, str]:
    """(title, source) of a session's header. In order: the agent's title ("agent"); ``title_hint``, a title
    saved earlier (a resumed session's: agents need not resend it on session/resume) ("saved"); the title
    the client made from the first prompt ("prompt", shown as such); the agent's name ("name")."""
    if session.title:
        return str(session.title), "agent"
    if title_hint:
        return title_hint, "saved"
    state = getattr(session, "state", None)
    if getattr(state, "title_source", None) == "prompt" and session.display_title:
        return str(session.display_title), "prompt"
    info = session.agent.info or {}
    return str(info.get("title") or info.get("name") or session.agent.name or "ACP session"), "name"


def session_header_info(session: Any, *, title: str | None = None, status: str | None = None,
                        detail: str | None = None, model: str | None = None, extra: str = "",
                        title_hint: str | None = None, title_source: str | None = None) -> HeaderInfo:
    """What a header shows. ``title`` (with its ``title_source``) overrides the live title
    (``session_title``: the agent's, ``title_hint``, the first prompt's, the agent's name)."""
    if title is None:
        title, title_source = session_title(session, title_hint)
    option = session.model_option
    live_status, live_detail = session_status(session)
    return HeaderInfo(
        title=title,
        agent=agent_label(session),
        model=model if model is not None else (value_label(option) if option is not None else None),
        status=status or live_status,
        detail=live_detail if detail is None else detail,
        extra=extra,
        title_source=title_source or "agent",
    )
