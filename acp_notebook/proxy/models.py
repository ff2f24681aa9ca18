"""The proxy's namespaced model option: `agent:model` values, grouped by agent, and the rewriting of config option lists."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._protocol import AGENT_MODEL_SEPARATOR, find_model_option, join_agent_model, legacy_option

__all__ = [
    "DEFAULT_MODEL",
    "META_KEY",
    "SEPARATOR",
    "AgentModels",
    "ModelChoice",
    "agent_models",
    "legacy_mode_option",
    "modes_from_options",
    "modes_option_id",
    "model_option",
    "offers",
    "rewrite_options",
]

SEPARATOR = AGENT_MODEL_SEPARATOR
# The value that stands for "whatever this agent runs" when the agent offers no model option.
DEFAULT_MODEL = "default"
# Our key inside `_meta` objects; the proxy's own annotations live under it.
META_KEY = "acp-notebook/proxy"


@dataclass(frozen=True)
class ModelChoice:
    """One model an agent offers, as the agent names it (bare value, no prefix)."""

    value: str
    name: str
    description: str | None = None
    meta: Mapping[str, Any] | None = None
    backend_group: str | None = None  # the label of the agent's own group, when it groups its models


@dataclass(frozen=True)
class AgentModels:
    """What one agent offers as models: its model option (if any), flattened, and the current value."""

    agent: str
    option_id: str | None  # the agent's id for its model option; None when it has none
    current: str
    choices: tuple[ModelChoice, ...]
    option_name: str | None = None
    option_description: str | None = None

    @property
    def values(self) -> list[str]:
        return [choice.value for choice in self.choices]

    def prefixed(self, value: str) -> str:
        return join_agent_model(self.agent, value)


def _flatten(entries: Any) -> list[ModelChoice]:
    """The choices of a select option's ``options`` (grouped or not); anything but a list has none (an agent's
    frame may hold any JSON there: an exception here would end the agent's connection)."""
    choices: list[ModelChoice] = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping):
            continue
        if "group" in entry and isinstance(entry.get("options"), list):
            label = str(entry.get("name") or entry.get("group"))
            for inner in _flatten(entry["options"]):
                choices.append(ModelChoice(inner.value, inner.name, inner.description, inner.meta, label))
        elif isinstance(entry.get("value"), str):
            choices.append(ModelChoice(entry["value"], str(entry.get("name") or entry["value"]),
                                       entry.get("description"), entry.get("_meta")))
    return choices


def agent_models(agent: str, options: Sequence[Mapping[str, Any]] | None) -> AgentModels:
    """Read an agent's (unprefixed) config options: its models, or the single `default` when it has none."""
    option = find_model_option(options)
    if option is None:
        return AgentModels(agent, None, DEFAULT_MODEL, (ModelChoice(DEFAULT_MODEL, DEFAULT_MODEL,
                                                                    "this agent does not offer a model choice"),))
    choices = tuple(_flatten(option.get("options") or ()))
    current = option.get("currentValue")
    if not isinstance(current, str):
        current = choices[0].value if choices else DEFAULT_MODEL
    return AgentModels(agent, str(option.get("id")), current, choices,
                       option_name=option.get("name"), option_description=option.get("description"))


def offers(option: Mapping[str, Any], value: Any) -> bool:
    """Whether a config option (as an agent sends it) accepts `value`: one of a select's values (grouped or
    not), a boolean for a boolean option; other kinds are taken at their word."""
    if option.get("type") == "select":
        return value in [choice.value for choice in _flatten(option.get("options") or ())]
    if option.get("type") == "boolean":
        return isinstance(value, bool)
    return True


def legacy_mode_option(modes: Any) -> dict[str, Any] | None:
    """The `mode` config option rebuilt from an agent's old `modes` field (see `_protocol.legacy_option`),
    marked as the proxy's. The proxy's client then sees one kind of state (configOptions, which wins over
    the old fields) and sets the mode with set_config_option, which the proxy turns into session/set_mode."""
    option = legacy_option("mode", modes)
    if option is None:
        return None
    return {**option, "description": "The agent's session mode (set with session/set_mode)",
            "_meta": {META_KEY: {"from": "modes"}}}


def _mode_option(options: Sequence[Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
    return next((o for o in options or () if isinstance(o, Mapping) and o.get("type") == "select"
                 and o.get("category") == "mode"), None)


def modes_option_id(options: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The id of the option that picks the session's mode (a select with category `mode`), or None."""
    option = _mode_option(options)
    return str(option["id"]) if option is not None else None


def modes_from_options(options: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """The old `modes` field (SessionModeState) for the mode option, for clients that know only that field."""
    option = _mode_option(options)
    if option is None:
        return None
    choices = _flatten(option.get("options") or ())
    available = [{"id": c.value, "name": c.name, **({"description": c.description} if c.description else {})}
                 for c in choices]
    current = option.get("currentValue")
    if not available or not isinstance(current, str):
        return None
    return {"currentModeId": current, "availableModes": available}


def _group(models: AgentModels) -> dict[str, Any]:
    options = []
    for choice in models.choices:
        entry: dict[str, Any] = {"value": models.prefixed(choice.value), "name": choice.name}
        if choice.description is not None:
            entry["description"] = choice.description
        ours: dict[str, Any] = {"agent": models.agent, "value": choice.value}
        if choice.backend_group is not None:
            ours["group"] = choice.backend_group
        entry["_meta"] = {**dict(choice.meta or {}), META_KEY: ours}
        options.append(entry)
    return {"group": models.agent, "name": models.agent, "options": options}


def model_option(
    groups: Sequence[AgentModels],
    current: str,
    *,
    marker: str,
    bound: AgentModels | None = None,
    template: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The proxy's `model` option: one group per agent (labelled with its name), values `agent:model`.

    `template` is the bound agent's own model option: its name, description and `_meta` carry over.
    `marker` identifies this proxy process, so an option it already rewrote is recognised (idempotence).
    """
    source = dict(template or {})
    option: dict[str, Any] = {
        "id": "model",
        "name": source.get("name") or "Model",
        "description": source.get("description") or "Agent and model, as agent:model",
        "category": "model",
        "type": "select",
        "currentValue": current,
        "options": [_group(models) for models in groups],
    }
    ours: dict[str, Any] = {"marker": marker, "agents": [models.agent for models in groups]}
    if bound is not None:
        ours["agent"] = bound.agent
        if bound.option_id is not None:
            ours["agentOptionId"] = bound.option_id
    option["_meta"] = {**dict(source.get("_meta") or {}), META_KEY: ours}
    return option


def is_rewritten(option: Mapping[str, Any], marker: str) -> bool:
    meta = option.get("_meta")
    return isinstance(meta, Mapping) and isinstance(meta.get(META_KEY), Mapping) and \
        meta[META_KEY].get("marker") == marker


def rewrite_options(
    options: Sequence[Mapping[str, Any]] | None,
    agent: str,
    *,
    marker: str,
    others: Sequence[AgentModels] = (),
    order: Sequence[str] | None = None,
    models: AgentModels | None = None,
) -> list[dict[str, Any]]:
    """A bound agent's config option list as the proxy's client sees it.

    The agent's model option becomes the proxy's `model` option (values `agent:model`, the agent's
    models in a group named after it, plus `others`' groups: the other agents, whose models may be picked too);
    an agent without a model option gets one with the single value `agent:default`, first. Every
    other option passes through untouched, in the agent's order. A list this proxy already
    rewrote is returned as it is, so rewriting twice changes nothing. ``models``: what
    ``agent_models(agent, options)`` gives, when the caller has it already.
    """
    options = [_copied(dict(o)) for o in options or () if isinstance(o, Mapping)]
    if any(is_rewritten(o, marker) for o in options):
        return options
    found = find_model_option(options)
    models = models if models is not None else agent_models(agent, options)
    groups = [models, *(o for o in others if o.agent != agent)]
    if order is not None:
        rank = {name: index for index, name in enumerate(order)}
        groups.sort(key=lambda g: rank.get(g.agent, len(rank)))
    rewritten = model_option(groups, models.prefixed(models.current), marker=marker, bound=models, template=found)
    if found is None:
        return [rewritten, *options]
    return [rewritten if o is found else o for o in options]


_ATOMS = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists, scalars), as ``copy.deepcopy`` makes but several times
    faster: every set_config_option answer through the proxy is copied. Anything else is deep-copied."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _ATOMS else _copied(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _ATOMS else _copied(item) for item in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)
