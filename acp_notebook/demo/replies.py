"""Deterministic text of the demo agent: replies, thoughts, titles, chunking, token counts, and the
text content block they are sent in. Which reply a prompt gets is decided in `dispatch`. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import tasks
from .options import THOUGHTS_PER_LEVEL, SessionSettings

TITLE_WORDS = 5
NEW_TOPIC_PREFIX = "new topic:"
_QUOTE_LIMIT = 60
_WORDS_PER_CHUNK = 3
_RECALL_LIMIT = 200
_RECALL_QUESTION = re.compile(r"\bwhat\s+did\s+i\s+(?:say|ask)\s+first\b", re.IGNORECASE)
_BEFORE_QUESTION = re.compile(r"\bwhat\s+did\s+i\s+(?:say|ask|send)\s+before\b", re.IGNORECASE)
_HANDOVER_LEAD = "This conversation was handed over to you from "  # acp_notebook/branching.py's handover text
_HANDED_PROMPT = re.compile(r"^\[(\d+)\] User: (.*)$", re.MULTILINE)
_BEFORE_LISTED = 20  # prompts quoted by "what did I say before?"; more are counted, not quoted


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
    permission_failed: str
    recall: str
    recall_none: str
    before: str
    task_fast: str
    task_smart: str
    form_declined: str
    form_cancelled: str
    form_failed: str
    no_form: str
    edit_missing: str


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
        permission_failed="Could not {action} {path}: asking for permission failed ({error}).",
        recall='You first said: "{first}". You have sent {count} before this one.',
        recall_none="Nothing yet: this is the first thing you said.",
        before="You have sent {count} before this one: {prompts}.",
        task_fast="At a glance, {question} comes to {answer}.",
        task_smart="Working it through step by step: {question} = {answer}.",
        form_declined="No problem, I will not ask.",
        form_cancelled="The questions were cancelled, so I have no answers.",
        form_failed="I could not ask my questions: the form failed ({error}).",
        no_form="I would ask you a few questions, but this client cannot show forms (no elicitation.form capability).",
        edit_missing="I did not find `{old}` in {path}, so I changed nothing.",
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
        permission_failed="Arr, could not {action} {path}: askin' leave failed ({error}).",
        recall='Arr, first ye said: "{first}". Ye sent {count} before this one.',
        recall_none="Nothin' yet, matey: this be the first thing ye said.",
        before="Arr, ye sent {count} before this one: {prompts}.",
        task_fast="Arr, at a squint, {question} be {answer}.",
        task_smart="I reckoned it careful, arr: {question} = {answer}.",
        form_declined="No matter, matey, I'll not ask.",
        form_cancelled="The questions were called off, arr, so I have no answers.",
        form_failed="Arr, I could not ask me questions: the form failed ({error}).",
        no_form="I'd ask ye a few questions, arr, but this client cannot show forms (no elicitation.form capability).",
        edit_missing="Arr, there be no `{old}` in {path}, so I changed nothin'.",
    ),
}


def text_content(text: str) -> dict[str, Any]:
    """An ACP text content block."""
    return {"type": "text", "text": text}


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def quote(text: str, limit: int = _QUOTE_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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


def recall_reply(history: list[str], settings: SessionSettings, *, fell_back: bool = False) -> str:
    """The answer to "what did I say first?": the session's first prompt, from `history` (the
    prompts before this one)."""
    voice = VOICES[settings.tone]
    if not history:
        body = voice.recall_none
    else:
        body = voice.recall.format(first=quote(history[0], _RECALL_LIMIT), count=plural(len(history), "prompt"))
    return _with_prefix(settings, body, fell_back=fell_back)


def asks_what_was_said_first(prompt: str) -> bool:
    return _RECALL_QUESTION.search(prompt) is not None


def before_reply(history: list[str], settings: SessionSettings, *, fell_back: bool = False) -> str:
    """The answer to "what did I say before?": how many prompts the session saw before this one, each quoted in
    order (the first ``_BEFORE_LISTED``; the rest counted), so a branch shows plainly which conversation it has."""
    voice = VOICES[settings.tone]
    if not history:
        return _with_prefix(settings, voice.recall_none, fell_back=fell_back)
    quoted = ", ".join(f'"{quote(text)}"' for text in history[:_BEFORE_LISTED])
    if len(history) > _BEFORE_LISTED:
        quoted += f" and {len(history) - _BEFORE_LISTED} more"
    body = voice.before.format(count=plural(len(history), "prompt"), prompts=quoted)
    return _with_prefix(settings, body, fell_back=fell_back)


def asks_what_was_said_before(prompt: str) -> bool:
    return _BEFORE_QUESTION.search(prompt) is not None


def task_reply(task: tasks.Task, settings: SessionSettings, *, fell_back: bool = False) -> str:
    """The answer to an arithmetic task; its last line is ``Answer: N`` (the contract in `tasks`)."""
    voice = VOICES[settings.tone]
    answer = tasks.model_answer(task, settings.model)
    shown = tasks.UNDEFINED if answer is None else str(answer)
    template = voice.task_smart if settings.model == "smart" else voice.task_fast
    text = _with_prefix(settings, template.format(question=task.question, answer=shown), fell_back=fell_back)
    if settings.mode == "code":
        text += f"\n{voice.code_intro}\n```python\nprint({_python_expression(task)})\n```"
    return f"{text}\n{tasks.answer_line(answer)}"


def _python_expression(task: tasks.Task) -> str:
    if task.operator == "/":
        return f"int({task.left} / {task.right})"  # rounds toward zero, as the task does
    return f"{task.left} {'*' if task.operator == 'x' else task.operator} {task.right}"


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


def handed_over(blocks: list[Any]) -> tuple[list[str], list[Any]]:
    """A prompt whose first block is a conversation handed over (the text acp_notebook/branching.py writes, in a
    block of its own): the prompts it lists (each one's first line, in order) and the blocks after it, which are
    the user's message. Any other prompt: no prompts, the blocks as they are."""
    first = blocks[0] if blocks else None
    text = first.get("text") if isinstance(first, dict) and first.get("type") == "text" else None
    if len(blocks) < 2 or not isinstance(text, str) or not text.startswith(_HANDOVER_LEAD):
        return [], blocks
    return [match.group(2) for match in _HANDED_PROMPT.finditer(text)], blocks[1:]
