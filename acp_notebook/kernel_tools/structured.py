"""The ``structuredContent`` object of a kernel tool's answer.

Why every answer carries one: MCP clients read a tool result differently. Gemini CLI (0.61.0), given a
result without ``structuredContent``, parses the first text block as JSON and stores whatever it finds
there as the structured content; the MCP SDK then rejects anything that is not an object (run_code
printing ``1491`` failed inside Gemini). Claude Code and Codex show their model the structured
content, serialized, in place of the text when there is one; Gemini CLI and OpenCode show the text.
So the object carries what the model needs (the output itself, not a summary of it), the text stays
for the clients that read text, and both say the same thing.

Shapes:

- run_code: ``{"output": <printed output and the last expression's value, in order>, "error": <the
  traceback or refusal, or null>}``, plus any fields the answer carries itself (a ``result``).
- an answer that carries its own object (list_variables: ``{"variables": [...]}``): that object.
- any other answer: ``{"text": <its text>}``; an error: ``{"error": <its text>}``.
- images in the answer are listed as ``{"images": [{"mime_type", "size_bytes"}]}``: a client that shows
  the structured content shows its model that an image came back.

The tools declare no ``outputSchema``: the SDK's low-level Server checks nothing against one, while every
client we support (the MCP SDKs' clients in Claude Code, Gemini CLI, OpenCode; the Python client) fails a
call whose structured content does not match it, and Gemini CLI forwards it to its model API as the
function's response schema. A schema would turn a harmless change of shape into failed calls, and no
client shows its model anything better for it.

Pure functions over an ``Answer``; any thread (called on the background loop).
"""

from __future__ import annotations

import json
from typing import Any

from .answers import Answer

__all__ = ["structured_content"]


def structured_content(answer: Answer, tool: str | None = None) -> dict[str, Any]:
    """The object to send as the answer's ``structuredContent``: always a JSON object."""
    texts = [block["text"] for block in answer.content if block.get("type") == "text"]
    error = texts[-1] if answer.is_error and texts else None
    before_error = texts[:-1] if error is not None else texts
    if tool == "run_code":
        derived: dict[str, Any] = {"output": "".join(before_error), "error": error}
    elif answer.is_error:
        derived = {"error": "\n".join(texts)}
    else:
        derived = {"text": "\n".join(texts)}
    own = _json_object(answer.structured)
    if own is not None:
        # The answer's own fields win; run_code keeps its output and error beside them.
        derived = {**derived, **own} if tool == "run_code" else own
    images = [_image_entry(block) for block in answer.content if block.get("type") == "image"]
    if images:
        derived["images"] = images
    return derived


def _json_object(value: Any) -> dict[str, Any] | None:
    """``value`` as plain JSON (an object with string keys, finite numbers), or None when it is not one."""
    if not isinstance(value, dict):
        return None
    try:
        plain = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return None
    return plain if isinstance(plain, dict) else None


def _image_entry(block: dict[str, Any]) -> dict[str, Any]:
    data = str(block.get("data", ""))
    size = len(data) * 3 // 4 - data[-2:].count("=")  # bytes behind the base64 text
    return {"mime_type": str(block.get("mimeType", "")), "size_bytes": max(0, size)}

