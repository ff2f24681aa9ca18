"""What a kernel tool's answer looks like on the wire: its content blocks and its ``structuredContent``.

MCP clients read a tool result differently (measured with the pinned agents, tests/interop/FINDINGS.md):

- Gemini CLI (0.61.0), given a result without ``structuredContent`` whose first block is text, parses that
  text as JSON and keeps what it finds as the structured content; its MCP SDK then refuses anything that
  is not an object, and the call fails (run_code printing ``1491`` failed inside Gemini). Its model is
  shown the content blocks.
- Claude Code (in claude-agent-acp 0.23.1) and Codex (codex-acp 0.16.0) show their model the structured
  content, serialized as JSON, in place of the content blocks whenever there is one: the images are
  then dropped. Without one they show the text and the images.
- OpenCode shows its model the content blocks.

So an answer of text only carries a structured object beside its text, and the object holds what the
model needs, the output itself:

- run_code: ``{"output": <printed output, displays and the last expression's value, in order>,
  "error": <the traceback or refusal, or null>}``, plus any fields the answer carries itself.
- an answer that carries its own object (list_variables: ``{"variables": [...]}``): that object.
- any other answer: ``{"text": <its text>}``; an error: ``{"error": <its text>}``.

An answer with an image (a figure from inspect_variable or run_code) carries no structured content, so
that Claude's and Codex's models see the image; should its first block be text that reads as JSON but
not as an object (``7`` printed before a plot), the first image goes first, so Gemini CLI never reads
the text as the answer's structured content.

The tools declare no ``outputSchema``: the SDK's low-level Server checks nothing against one, while every
client we support (the MCP SDKs' clients in Claude Code, Gemini CLI, OpenCode; the Python client) fails a
call whose structured content is missing or does not match one, and Gemini CLI hands it to its model
API as the function's response schema. A schema would turn a harmless change of shape into failed
calls, and no client shows its model anything better for it.

Pure functions over an ``Answer``; any thread (called on the background loop).
"""

from __future__ import annotations

import json
from typing import Any

from .answers import Answer

__all__ = ["result_parts", "structured_content"]


def result_parts(answer: Answer, tool: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The content blocks to send, in order, and the ``structuredContent`` (None: left out, for the images)."""
    blocks = list(answer.content)
    images = [index for index, block in enumerate(blocks) if block.get("type") == "image"]
    if not images:
        return blocks, structured_content(answer, tool)
    if blocks[0].get("type") == "text" and _json_but_no_object(blocks[0].get("text", "")):
        blocks.insert(0, blocks.pop(images[0]))
    return blocks, None


def structured_content(answer: Answer, tool: str | None = None) -> dict[str, Any]:
    """The answer's text as a JSON object (see the module docstring for its shape per tool)."""
    texts = [block["text"] for block in answer.content if block.get("type") == "text"]
    error = texts[-1] if answer.is_error and texts else None
    if tool == "run_code":
        derived: dict[str, Any] = {"output": "".join(texts[:-1] if error is not None else texts), "error": error}
    elif answer.is_error:
        derived = {"error": "\n".join(texts)}
    else:
        derived = {"text": "\n".join(texts)}
    own = _json_object(answer.structured)
    if own is None:
        return derived
    # The answer's own fields win; run_code keeps its output and error beside them.
    return {**derived, **own} if tool == "run_code" else own


def _json_object(value: Any) -> dict[str, Any] | None:
    """``value`` as plain JSON (an object with string keys, finite numbers), or None when it is not one."""
    if not isinstance(value, dict):
        return None
    try:
        plain = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return None
    return plain if isinstance(plain, dict) else None


def _json_but_no_object(text: str) -> bool:
    """Whether a client that parses ``text`` as JSON gets a value that is not an object (a number, a list...)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON; or nested too deep for us, and so for the client
        return False
    return not isinstance(value, dict)
