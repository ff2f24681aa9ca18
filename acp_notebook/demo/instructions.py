"""The system prompt a client gives the demo agent (unstable ACP v1: ``systemPrompt`` on session/new, load,
resume and fork): checked as the schema asks, kept with the session, and told back when a prompt asks
"what is your system prompt?" (so a client can see what arrived).

The demo advertises ``sessionCapabilities.systemPrompt`` with ``mode.override``, so it takes both modes;
it refuses, with INVALID_PARAMS, any other mode, an empty content list and content blocks that are not
text. Pure functions; the demo's event loop calls them.
"""

from __future__ import annotations

import re
from typing import Any

from acp.exceptions import RequestError

from .._protocol import INVALID_PARAMS, SYSTEM_PROMPT_MODES

__all__ = ["asks_for_system_prompt", "read_system_prompt", "system_prompt_reply"]

_QUESTION = re.compile(r"\bwhat\s+is\s+your\s+system\s+prompt\b", re.IGNORECASE)


def _refuse(message: str, value: Any) -> RequestError:
    return RequestError(INVALID_PARAMS, f"systemPrompt: {message}", {"systemPrompt": value})


def read_system_prompt(value: Any) -> dict[str, Any] | None:
    """A request's ``systemPrompt`` as the demo keeps it ({mode, text}); None when none was sent."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _refuse("must be an object with mode and content", value)
    mode, content = value.get("mode"), value.get("content")
    if mode not in SYSTEM_PROMPT_MODES:
        raise _refuse(f"mode {mode!r} is not one this agent supports ({', '.join(SYSTEM_PROMPT_MODES)})", value)
    if not isinstance(content, list) or not content:
        raise _refuse("content must be a non-empty list of content blocks", value)
    if not all(isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
               for block in content):
        raise _refuse("this agent takes text content blocks only", value)
    return {"mode": mode, "text": "".join(block["text"] for block in content)}


def asks_for_system_prompt(text: str) -> bool:
    return _QUESTION.search(text) is not None


def system_prompt_reply(kept: dict[str, Any] | None) -> str:
    """What the demo says when asked for its system prompt: the mode and the text it was given."""
    if kept is None:
        return "I was given no system prompt: I follow my own instructions only."
    how = "in place of my own instructions" if kept["mode"] == "override" else "added to my own instructions"
    return f"My system prompt ({kept['mode']}, {how}):\n\n{kept['text']}"
