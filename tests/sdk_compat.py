"""What the tests need from the SDK that its 0.12 and 1.x lines spell differently (acp.helpers is 0.12 only)."""

from __future__ import annotations

from acp.schema import TextContentBlock


def text_block(text: str) -> TextContentBlock:
    """A text content block (acp.helpers.text_block in SDK 0.12)."""
    return TextContentBlock(type="text", text=text)
