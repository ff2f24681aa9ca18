"""The demo agent's session settings and the ACP config options that describe them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The custom category string exercises clients' handling of `_`-prefixed categories.
TONE_CATEGORY = "_demo_style"


@dataclass(frozen=True)
class Choice:
    value: str
    name: str
    description: str | None = None


@dataclass(frozen=True)
class ChoiceGroup:
    group: str
    name: str
    choices: tuple[Choice, ...]


MODEL_GROUPS: tuple[ChoiceGroup, ...] = (
    ChoiceGroup("everyday", "Everyday", (Choice("fast", "Fast", "Short answers, no thinking"),)),
    ChoiceGroup("deep", "Deep thinking", (Choice("smart", "Smart", "Thinks first, answers at length"),)),
)
MODELS: tuple[Choice, ...] = tuple(choice for group in MODEL_GROUPS for choice in group.choices)
THOUGHT_LEVELS: tuple[Choice, ...] = (
    Choice("low", "Low", "One thought"),
    Choice("medium", "Medium", "Two thoughts"),
    Choice("high", "High", "Three thoughts"),
)
MODES: tuple[Choice, ...] = (
    Choice("ask", "Ask", "Answer in prose"),
    Choice("code", "Code", "Add a code sample to the answer"),
)
TONES: tuple[Choice, ...] = (
    Choice("plain", "Plain"),
    Choice("pirate", "Pirate", "Arr"),
)

# Thought chunks the smart model streams before replying, per thought level.
THOUGHTS_PER_LEVEL: dict[str, int] = {"low": 1, "medium": 2, "high": 3}


class ConfigChoiceError(ValueError):
    """A set_config_option request named an unknown option or an invalid value."""


@dataclass
class SessionSettings:
    """Current values of one session's settings; `describe` renders them as ACP configOptions."""

    model: str = "fast"
    thought_level: str = "medium"
    mode: str = "ask"
    tone: str = "plain"
    show_thoughts: bool = False

    def describe(self, *, include_boolean: bool) -> list[dict[str, Any]]:
        """The complete, ordered configOptions list (plain dicts, exactly as sent on the wire)."""
        options = [
            {
                "id": "model",
                "name": "Model",
                "description": "Which demo model answers",
                "category": "model",
                "type": "select",
                "currentValue": self.model,
                "options": [
                    {"group": group.group, "name": group.name, "options": [_choice_dict(c) for c in group.choices]}
                    for group in MODEL_GROUPS
                ],
            }
        ]
        if self.model == "smart":
            options.append(
                _select("thought_level", "Thought level", "How long the smart model thinks", "thought_level",
                        self.thought_level, THOUGHT_LEVELS)
            )
        options.append(_select("mode", "Mode", "Prose answers or code samples", "mode", self.mode, MODES))
        options.append(_select("tone", "Tone", "The voice of the replies", TONE_CATEGORY, self.tone, TONES))
        if include_boolean:
            options.append(
                {
                    "id": "show_thoughts",
                    "name": "Show thoughts",
                    "description": "Also stream a short thought before fast-model replies",
                    "type": "boolean",
                    "currentValue": self.show_thoughts,
                }
            )
        return options

    def apply(self, config_id: str, value: str | bool, *, include_boolean: bool) -> None:
        """Set one option; raises ConfigChoiceError naming the valid ids or values."""
        present = {option["id"]: option for option in self.describe(include_boolean=include_boolean)}
        option = present.get(config_id)
        if option is None:
            raise ConfigChoiceError(
                f"Unknown config option {config_id!r}; this session has: {', '.join(present)}"
            )
        if option["type"] == "boolean":
            if not isinstance(value, bool):
                raise ConfigChoiceError(f"Config option {config_id!r} takes a boolean (true or false), not {value!r}")
            self.show_thoughts = value
            return
        valid = [choice.value for choice in choices_of(config_id)]
        if not isinstance(value, str) or value not in valid:
            raise ConfigChoiceError(
                f"Invalid value {value!r} for config option {config_id!r}; valid values: {', '.join(valid)}"
            )
        setattr(self, config_id, value)


def choices_of(config_id: str) -> tuple[Choice, ...]:
    return {"model": MODELS, "thought_level": THOUGHT_LEVELS, "mode": MODES, "tone": TONES}[config_id]


def _choice_dict(choice: Choice) -> dict[str, Any]:
    entry: dict[str, Any] = {"value": choice.value, "name": choice.name}
    if choice.description is not None:
        entry["description"] = choice.description
    return entry


def _select(
    config_id: str, name: str, description: str, category: str, current: str, choices: tuple[Choice, ...]
) -> dict[str, Any]:
    return {
        "id": config_id,
        "name": name,
        "description": description,
        "category": category,
        "type": "select",
        "currentValue": current,
        "options": [_choice_dict(choice) for choice in choices],
    }


def legacy_modes(current: str) -> dict[str, Any]:
    """The pre-configOptions `modes` field (SessionModeState)."""
    return {
        "currentModeId": current,
        "availableModes": [
            {"id": c.value, "name": c.name, **({"description": c.description} if c.description else {})}
            for c in MODES
        ],
    }


def legacy_models(current: str) -> dict[str, Any]:
    """The old unstable `models` field (SessionModelState), no longer in any ACP schema but still
    sent by agents such as gemini-cli."""
    return {
        "currentModelId": current,
        "availableModels": [
            {"modelId": c.value, "name": c.name, **({"description": c.description} if c.description else {})}
            for c in MODELS
        ],
    }
