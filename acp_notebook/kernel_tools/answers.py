"""What a kernel tool answers: content blocks as plain dicts, capped, with secrets masked.

Plain data and pure functions; built on the kernel thread, turned into MCP types on the loop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._redact import MASK, Redactor, secret_values

__all__ = ["IMAGE_LIMIT", "TEXT_LIMIT", "Answer", "busy_message", "cap_text", "masked_value", "namespace_redactor",
           "secret_name"]

TEXT_LIMIT = 20_000  # characters of text in one answer
IMAGE_LIMIT = 1_000_000  # bytes of one PNG, before base64
_PROBE = "x" * 16  # long enough to count as a secret value under the redaction rule


@dataclass
class Answer:
    """Content blocks ({"type": "text", "text"} or {"type": "image", "data", "mimeType"}), whether it is
    a tool error, and optional structured content."""

    content: list[dict[str, Any]] = field(default_factory=list)
    is_error: bool = False
    structured: dict[str, Any] | None = None

    @classmethod
    def text(cls, text: str, *, structured: dict[str, Any] | None = None) -> Answer:
        return cls([{"type": "text", "text": cap_text(text)}], structured=structured)

    @classmethod
    def error(cls, text: str) -> Answer:
        return cls([{"type": "text", "text": cap_text(text)}], is_error=True)

    def text_of(self) -> str:
        return "\n".join(block["text"] for block in self.content if block["type"] == "text")


def cap_text(text: str, limit: int = TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: the first {limit:,} of {len(text):,} characters are shown]"


def secret_name(name: str) -> bool:
    """Whether a variable's name marks its value a secret (the redaction rule for environment names)."""
    return bool(secret_values({name: _PROBE}))


def namespace_redactor(namespace: Mapping[str, Any]) -> Redactor:
    """Masks the values of the environment's secrets and of the namespace's secret-named strings."""
    strings = {name: value for name, value in list(namespace.items()) if type(value) is str}
    return Redactor([*secret_values(os.environ), *secret_values(strings)])


def busy_message(waited: float) -> str:
    return (f"the kernel is busy running a cell: waited {waited:g} s for it to finish; "
            "try again when the user's cell is done")


def masked_value(name: str) -> str:
    return f"{name} = {MASK} (masked: its name marks it a secret)"
