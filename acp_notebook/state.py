"""SessionState: a session's config options, title/meta, usage, history, notices and compactions as plain data
with observers.

``Notice`` (a ``notice`` update: severity, title, description, when it came) and ``Compaction`` (one context
compaction, upserted by its id from ``compaction_update`` and ``compaction_summary_chunk``) are records the
session and its turns share: a notice goes to the running turn when one runs, else to the session's
``notices``; every compaction is in the session's ``compactions`` and, when it began during a turn, in that
turn's too.

Threads: only the background loop thread mutates a SessionState (frames are applied in wire order
there), its Compactions, and calls its observers; other threads read whole values that are replaced, never
edited in place (a Compaction's summary list is replaced, not appended to)."""

from __future__ import annotations

import copy
import logging
import time
from html import escape
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ._observers import Observers
from ._protocol import COMPACTION_UPDATES, find_model_option, legacy_option

__all__ = [
    "Choice",
    "Compaction",
    "ConfigOption",
    "ConfigOptions",
    "Notice",
    "SessionState",
    "StateEvent",
    "merge_meta",
]

logger = logging.getLogger(__name__)

KNOWN_OPTION_TYPES = ("select", "boolean")
PROMPT_TITLE_CHARS = 60
# Notices a session keeps outside its turns (the oldest go first): they are live events, not history.
NOTICES_KEPT = 100


@dataclass(frozen=True)
class Choice:
    """One selectable value of a ``select`` option; ``group`` is the group's label when choices are grouped."""

    value: str
    name: str
    description: str | None = None
    group: str | None = None
    group_id: str | None = None


@dataclass(frozen=True)
class ConfigOption:
    """One session config option as the agent last described it."""

    id: str
    name: str
    type: Literal["select", "boolean"]
    value: str | bool
    category: str | None = None
    description: str | None = None
    choices: tuple[Choice, ...] = ()
    grouped: bool = False
    # Options rebuilt from the old `modes`/`models` fields: "modes" is settable
    # through session/set_mode, "models" only shows what the agent reports.
    legacy_source: Literal["modes", "models"] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def read_only(self) -> bool:
        return self.legacy_source == "models"

    @property
    def values(self) -> list[str | bool]:
        if self.type == "boolean":
            return [False, True]
        return [choice.value for choice in self.choices]

    @property
    def groups(self) -> dict[str, list[Choice]]:
        out: dict[str, list[Choice]] = {}
        for choice in self.choices:
            out.setdefault(choice.group or "", []).append(choice)
        return out

    def choice(self, value: str) -> Choice | None:
        return next((c for c in self.choices if c.value == value), None)

    @property
    def value_name(self) -> str:
        """The human label of the current value."""
        if self.type == "boolean":
            return "on" if self.value else "off"
        found = self.choice(str(self.value))
        return found.name if found else str(self.value)

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> ConfigOption:
        kind = raw["type"]
        if kind == "boolean":
            return cls(
                id=raw["id"],
                name=raw.get("name") or raw["id"],
                type="boolean",
                value=bool(raw.get("currentValue")),
                category=_category(raw.get("category")),
                description=raw.get("description"),
                raw=copy.deepcopy(dict(raw)),
            )
        choices: list[Choice] = []
        grouped = False
        for item in raw.get("options") or []:
            if isinstance(item, Mapping) and "options" in item and "value" not in item:
                grouped = True
                label = item.get("name") or item.get("group")
                for sub in item.get("options") or []:
                    choices.append(_choice(sub, group=label, group_id=item.get("group")))
            elif isinstance(item, Mapping) and "value" in item:
                choices.append(_choice(item))
        return cls(
            id=raw["id"],
            name=raw.get("name") or raw["id"],
            type="select",
            value=raw.get("currentValue"),
            category=_category(raw.get("category")),
            description=raw.get("description"),
            choices=tuple(choices),
            grouped=grouped,
            raw=copy.deepcopy(dict(raw)),
        )


def _choice(raw: Mapping[str, Any], group: str | None = None, group_id: str | None = None) -> Choice:
    value = str(raw["value"])
    return Choice(value=value, name=raw.get("name") or value, description=raw.get("description"),
                  group=group, group_id=group_id)


def _category(raw: Any) -> str | None:
    # Categories are plain strings on the wire; `_`-prefixed ones are custom and kept as they are.
    return raw if isinstance(raw, str) else None


class ConfigOptions(Sequence[ConfigOption]):
    """The agent's config options in its order; index by position or by option id."""

    def __init__(self, options: Sequence[ConfigOption] = ()) -> None:
        self._options = tuple(options)

    def __len__(self) -> int:
        return len(self._options)

    def __iter__(self) -> Iterator[ConfigOption]:
        return iter(self._options)

    def __getitem__(self, key: int | str) -> ConfigOption:  # type: ignore[override]
        if isinstance(key, str):
            for option in self._options:
                if option.id == key:
                    return option
            raise KeyError(f"no config option {key!r}; this session has: {', '.join(self.ids()) or 'none'}")
        return self._options[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return any(option.id == key for option in self._options)
        return key in self._options

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ConfigOptions):
            return self._options == other._options
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._options)

    def get(self, key: str, default: ConfigOption | None = None) -> ConfigOption | None:
        return next((o for o in self._options if o.id == key), default)

    def ids(self) -> list[str]:
        return [option.id for option in self._options]

    def by_category(self, category: str) -> ConfigOption | None:
        return next((o for o in self._options if o.category == category), None)

    @property
    def model_option(self) -> ConfigOption | None:
        """The option that picks the model (the rule is ``_protocol.find_model_option``)."""
        wire = find_model_option([{"id": o.id, "category": o.category, "type": o.type} for o in self._options])
        return self.get(wire["id"]) if wire is not None else None

    def values(self) -> dict[str, str | bool]:
        """A snapshot ``{id: current value}``."""
        return {option.id: option.value for option in self._options}

    def __repr__(self) -> str:
        inner = ", ".join(f"{o.id}={o.value!r}" for o in self._options)
        return f"ConfigOptions({inner})"

    def _repr_html_(self) -> str:
        rows = []
        for o in self._options:
            if o.type == "boolean":
                choices = "on / off"
            else:
                choices = ", ".join(
                    f"<b>{escape(c.value)}</b>" if c.value == o.value else escape(c.value) for c in o.choices
                )
            rows.append(
                f"<tr><td><code>{escape(o.id)}</code></td><td>{escape(o.name)}</td>"
                f"<td>{escape(o.category or '')}</td><td>{escape(str(o.value))}</td><td>{choices}</td></tr>"
            )
        head = "<tr><th>id</th><th>name</th><th>category</th><th>value</th><th>choices</th></tr>"
        return f"<table>{head}{''.join(rows)}</table>"


@dataclass(frozen=True)
class Notice:
    """A notice from the agent: something to tell the user now (a rate limit, a retry, a fallback), not part
    of the conversation. ``severity`` is info, warning or error (or a custom ``_`` one, kept as sent);
    ``time`` is when it arrived (seconds since the epoch)."""

    severity: str
    title: str
    description: str | None = None
    time: float = 0.0
    meta: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The title, and the description after it when there is one."""
        return f"{self.title}: {self.description}" if self.description else self.title

    @classmethod
    def from_update(cls, update: Mapping[str, Any], when: float | None = None) -> Notice:
        """A ``notice`` update (its shape checked by connection/checks.py) as a Notice received now."""
        description = update.get("description")
        meta = update.get("_meta")
        return cls(severity=str(update.get("severity") or "info"), title=str(update.get("title") or ""),
                   description=description if isinstance(description, str) else None,
                   time=time.time() if when is None else when,
                   meta=copy.deepcopy(dict(meta)) if isinstance(meta, Mapping) else None)


@dataclass(eq=False)
class Compaction:
    """One compaction of the agent's context: it summarised the conversation so far to make room.

    Upserted by ``id``: the first ``compaction_update`` or ``compaction_summary_chunk`` makes it (status
    in_progress), later ones patch it in place (``summary``, ``error`` and ``_meta``: omitted is unchanged,
    null clears, a value replaces; summary chunks append). ``usage_before`` is the session's usage when it
    began; ``usage_after`` the first usage the agent reported once it finished (the schema gives a compaction
    no token counts of its own: the context meter follows the agent's usage_update)."""

    id: str
    status: str = "in_progress"
    summary: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    updated_at: float = 0.0
    usage_before: dict[str, Any] | None = None
    usage_after: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.status != "in_progress"

    @property
    def summary_text(self) -> str:
        """The summary's text blocks joined (as a reply's chunks join), others named in brackets."""
        return "".join(str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]"
                       for b in self.summary)

    def apply(self, update: Mapping[str, Any]) -> None:
        """One compaction_update or compaction_summary_chunk naming this compaction (loop thread)."""
        self.updated_at = time.time()
        if update.get("sessionUpdate") == "compaction_summary_chunk":
            if isinstance(update.get("content"), Mapping):
                self.summary = [*self.summary, copy.deepcopy(dict(update["content"]))]
            return
        if isinstance(update.get("status"), str):
            self.status = update["status"]
        if "summary" in update:
            summary = update["summary"]
            self.summary = [copy.deepcopy(dict(b)) for b in summary if isinstance(b, Mapping)] \
                if isinstance(summary, list) else []
        if "error" in update:
            self.error = update["error"] if isinstance(update["error"], str) else None
        if "_meta" in update:  # replaced whole, unlike session_info_update's merge
            meta = update["_meta"]
            self.meta = copy.deepcopy(dict(meta)) if isinstance(meta, Mapping) else {}


def merge_meta(current: Mapping[str, Any] | None, patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """Recursive merge for ``_meta`` updates: a key set to None is removed."""
    out = copy.deepcopy(dict(current or {}))
    for key, value in (patch or {}).items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_meta(out[key], value)
        elif isinstance(value, Mapping):
            out[key] = merge_meta({}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass(frozen=True)
class StateEvent:
    """What changed. ``kind``: config, info, usage, mode, commands, update, status, notice (data: the Notice,
    one that came while no turn ran), compaction (data: the Compaction made or changed)."""

    kind: str
    session_id: str
    data: Any = None


Observer = Callable[[StateEvent], None]


class SessionState:
    """Everything the agent has told us about one session, kept in arrival order.

    Mutated only on the loop thread (from the raw-frame observer, in wire order);
    readers on other threads see whole replaced values, never a half-applied list.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.raw_options: list[dict[str, Any]] = []
        self.config: ConfigOptions = ConfigOptions()
        self.legacy_modes: dict[str, Any] | None = None
        self.legacy_models: dict[str, Any] | None = None
        self.title: str | None = None
        # Until the agent names the session: a title made here from the first prompt (``display_title``).
        self.prompt_title: str | None = None
        self.updated_at: str | None = None
        self.meta: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None
        self.commands: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.notices: list[Notice] = []  # those that came while no turn ran (at most NOTICES_KEPT)
        self.compactions: dict[str, Compaction] = {}  # every compaction of the session, by id, in order
        self.status: str = "idle"
        self.status_detail: str = ""
        self._observers: Observers[StateEvent] = Observers()

    # --- observers -------------------------------------------------------
    def observe(self, callback: Observer) -> Callable[[], None]:
        """Call ``callback(StateEvent)`` on every change; returns a function that stops it.

        Callbacks run on the background loop thread and must not block.
        """
        return self._observers.add(callback)

    def emit(self, kind: str, data: Any = None) -> None:
        self._observers.emit(StateEvent(kind, self.session_id, data))

    # --- applying agent data ---------------------------------------------
    def apply_session_result(self, result: Mapping[str, Any]) -> None:
        """A session/new, load or resume result: configOptions wins over the old modes/models fields."""
        if result.get("configOptions") is not None:
            self.legacy_modes = None
            self.legacy_models = None
            self.set_options(result["configOptions"])
            return
        self.legacy_modes = copy.deepcopy(result.get("modes")) if result.get("modes") else None
        self.legacy_models = copy.deepcopy(result.get("models")) if result.get("models") else None
        self._rebuild_legacy()

    def set_options(self, raw_options: Sequence[Mapping[str, Any]]) -> None:
        """Replace the whole option list (set_config_option result or config_option_update)."""
        raw = [copy.deepcopy(dict(o)) for o in raw_options if isinstance(o, Mapping)]
        known = []
        for option in raw:
            if option.get("type") not in KNOWN_OPTION_TYPES or "id" not in option:
                continue
            try:
                known.append(ConfigOption.from_wire(option))
            except (KeyError, TypeError, ValueError):
                logger.warning("ignoring a malformed config option: %r", option)
        self.raw_options = raw
        self.config = ConfigOptions(known)
        self.emit("config", self.config)

    def set_legacy_mode(self, mode_id: str) -> None:
        if self.legacy_modes is None:
            return
        self.legacy_modes = {**self.legacy_modes, "currentModeId": mode_id}
        self._rebuild_legacy()

    def _rebuild_legacy(self) -> None:
        options = []
        for kind, data in (("mode", self.legacy_modes), ("model", self.legacy_models)):
            wire = legacy_option(kind, data)  # type: ignore[arg-type]
            if wire is not None:
                # "modes" can be set through session/set_mode; "models" only shows what the agent reports.
                options.append(replace(ConfigOption.from_wire(wire), legacy_source=f"{kind}s"))
        self.raw_options = []
        self.config = ConfigOptions(options)
        self.emit("config", self.config)

    def apply_update(self, update: Mapping[str, Any]) -> bool:
        """Apply one ``session/update`` payload; returns False for kinds this layer does not know."""
        kind = update.get("sessionUpdate")
        if kind == "config_option_update":
            self.set_options(update.get("configOptions") or [])
        elif kind == "session_info_update":
            if "title" in update:
                self.title = update["title"]
            if "updatedAt" in update:
                self.updated_at = update["updatedAt"]
            if "_meta" in update:
                self.meta = {} if update["_meta"] is None else merge_meta(self.meta, update["_meta"])
            self.emit("info", {"title": self.title, "updated_at": self.updated_at, "meta": self.meta})
        elif kind == "usage_update":
            self.usage = {k: v for k, v in update.items() if k != "sessionUpdate"}
            latest = next(reversed(self.compactions.values()), None)
            if latest is not None and latest.finished and latest.usage_after is None:
                latest.usage_after = self.usage
            self.emit("usage", self.usage)
        elif kind in COMPACTION_UPDATES:
            self.emit("compaction", self.compaction(update))
        elif kind == "notice":
            pass  # the running turn's, else kept by keep_outside_turn
        elif kind == "current_mode_update":
            self.set_legacy_mode(update.get("currentModeId"))
            self.emit("mode", update.get("currentModeId"))
        elif kind == "available_commands_update":
            self.commands = list(update.get("availableCommands") or [])
            self.emit("commands", self.commands)
        elif kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
                      "tool_call", "tool_call_update", "plan"):
            pass
        else:
            return False
        return True

    def compaction(self, update: Mapping[str, Any]) -> Compaction:
        """The compaction an update names, made on first sight, with the update applied."""
        compaction_id = str(update.get("compactionId"))
        compaction = self.compactions.get(compaction_id)
        if compaction is None:
            now = time.time()
            compaction = Compaction(compaction_id, started_at=now, updated_at=now, usage_before=self.usage)
            self.compactions[compaction_id] = compaction
        compaction.apply(update)
        return compaction

    def keep_outside_turn(self, update: dict[str, Any]) -> None:
        """An update that came while no turn ran: into the history, and a notice into ``notices`` too."""
        self.history.append(update)
        if update.get("sessionUpdate") == "notice":
            notice = Notice.from_update(update)
            self.notices = [*self.notices[-(NOTICES_KEPT - 1):], notice]
            self.emit("notice", notice)

    def note_prompt(self, text: str) -> None:
        """The first prompt names the session until the agent sends a title of its own."""
        if self.prompt_title is not None or not text.strip():
            return
        line = text.strip().splitlines()[0]
        self.prompt_title = line if len(line) <= PROMPT_TITLE_CHARS else line[:PROMPT_TITLE_CHARS - 1] + "…"
        if self.title is None:
            self.emit("info", {"title": self.title, "updated_at": self.updated_at, "meta": self.meta})

    @property
    def display_title(self) -> str | None:
        """The agent's title, else the one taken from the first prompt (see ``title_source``)."""
        return self.title if self.title is not None else self.prompt_title

    @property
    def title_source(self) -> str | None:
        """"agent" when the agent titled the session, "prompt" when the title is the first prompt's, else None."""
        return "agent" if self.title is not None else "prompt" if self.prompt_title is not None else None

    def set_status(self, status: str, detail: str = "") -> None:
        self.status, self.status_detail = status, detail
        self.emit("status", {"status": status, "detail": detail})

    @property
    def model(self) -> str | bool | None:
        option = self.config.model_option
        return option.value if option else None
