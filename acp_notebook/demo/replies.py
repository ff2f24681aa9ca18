"""Deterministic text of the demo agent: replies, thoughts, titles, chunking and token counts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .options import THOUGHTS_PER_LEVEL, SessionSettings

TITLE_WORDS = 5
NEW_TOPIC_PREFIX = "new topic:"
_QUOTE_LIMIT = 60
_WORDS_PER_CHUNK = 3


@dataclass(frozen=True)
class Voice:
    """Sentence templates for one tone."""

    fast: str
    smart: str
    fallback: str
    code_intro: str
    read_ok: str
    write_ok: str
    denied: str
    no_fs: str
    failed: str


VOICES: dict[str, Voice] = {
    "plain": Voice(
        fast='You said: "{quote}". Short answer: noted, {words}.',
        smart=(
            'I thought it over at the {level} level. You said: "{quote}", which is {words} and {chars} long. '
            "A longer answer: this demo agent works offline, so it answers from your words alone, "
            "the same way every time."
        ),
        fallback="Falling back to the fast model.",
        code_intro="Here it is as code:",
        read_ok="Read {path}: {lines}.",
        write_ok="Wrote {chars} to {path}.",
        denied="Permission denied: I did not {action} {path}.",
        no_fs="I cannot {action} {path}: the client does not offer {method}.",
        failed="Could not {action} {path}: {error}.",
    ),
    "pirate": Voice(
        fast='Arr, ye said: "{quote}". Short answer, matey: aye, {words}.',
        smart=(
            'I pondered it at the {level} level, arr. Ye said: "{quote}", that be {words} and {chars}. '
            "A longer answer: this demo agent sails offline, so it answers from yer words alone, "
            "the same way every tide."
        ),
        fallback="Fallin' back to the fast model, arr.",
        code_intro="Here be the code:",
        read_ok="Arr, read {path}: {lines} in the hold.",
        write_ok="Arr, wrote {chars} to {path}.",
        denied="Permission denied, matey: I did not {action} {path}.",
        no_fs="Arr, I cannot {action} {path}: the client offers no {method}.",
        failed="Arr, could not {action} {path}: {error}.",
    ),
}


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _QUOTE_LIMIT else flat[: _QUOTE_LIMIT - 1] + "…"


def chat_reply(prompt: str, settings: SessionSettings, *, fell_back: bool = False) -> str:
    """The answer to an ordinary prompt, in the session's model, mode and tone."""
    voice = VOICES[settings.tone]
    fields = {
        "quote": quote(prompt),
        "words": plural(len(prompt.split()), "word"),
        "chars": plural(len(prompt), "character"),
        "level": settings.thought_level,
    }
    body = (voice.smart if settings.model == "smart" else voice.fast).format(**fields)
    text = _with_prefix(settings, body, fell_back=fell_back)
    if settings.mode == "code":
        text += f"\n{voice.code_intro}\n```python\nprint({' '.join(prompt.split())!r})\n```"
    return text


def outcome_reply(settings: SessionSettings, sentence: str, *, fell_back: bool = False) -> str:
    """The answer that reports what a file operation did."""
    return _with_prefix(settings, sentence, fell_back=fell_back)


def _with_prefix(settings: SessionSettings, body: str, *, fell_back: bool) -> str:
    parts = [f"[{settings.model}]"]
    if fell_back:
        parts.append(VOICES[settings.tone].fallback)
    parts.append(body)
    return " ".join(parts)


def thoughts(prompt: str, settings: SessionSettings) -> list[str]:
    """Thought chunks streamed before the reply: smart thinks per thought level; fast only
    when show_thoughts is on."""
    if settings.model == "smart":
        count = THOUGHTS_PER_LEVEL[settings.thought_level]
        steps = [
            f"Reading the prompt ({plural(len(prompt.split()), 'word')}).",
            "Weighing a longer answer.",
            "Checking the answer once more.",
        ][:count]
    elif settings.show_thoughts:
        steps = ["A quick look at the prompt."]
    else:
        return []
    return [f"Thought {i} of {len(steps)}: {step}\n" for i, step in enumerate(steps, start=1)]


def chunk(text: str) -> list[str]:
    """Split text into streaming chunks of a few words; the chunks concatenate back to `text`."""
    pieces = re.findall(r"\s*\S+\s*", text) or [text]
    return ["".join(pieces[i : i + _WORDS_PER_CHUNK]) for i in range(0, len(pieces), _WORDS_PER_CHUNK)]


def topic_of(prompt: str) -> str | None:
    """The text after a leading "new topic:" (any case), or None when the prompt has no such prefix."""
    stripped = prompt.lstrip()
    if stripped.lower().startswith(NEW_TOPIC_PREFIX):
        return stripped[len(NEW_TOPIC_PREFIX) :].strip()
    return None


def title_from(text: str) -> str:
    """A session title: the first few words, capitalised, with an ellipsis when shortened."""
    words = text.split()
    if not words:
        return "Untitled"
    title = " ".join(words[:TITLE_WORDS]).rstrip(".,;:!?")
    if len(words) > TITLE_WORDS:
        title += "…"
    return title[0].upper() + title[1:]


def token_count(*texts: str) -> int:
    """The demo's stand-in for tokens: whitespace-separated words."""
    return sum(len(text.split()) for text in texts)
