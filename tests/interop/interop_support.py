"""Helpers the interop tests share: reading a Turn's stream, cancelling mid-stream, permission kinds."""

from __future__ import annotations

import threading
from typing import Any

import acp_notebook as acpnb

TURN_TIMEOUT = 90.0
HELLO = "Hello from the interop model. You said: "


def kinds(turn: acpnb.Turn) -> list[str]:
    return [update.get("sessionUpdate") for update in turn.updates]


def text_chunks(turn: acpnb.Turn) -> list[str]:
    return [u["content"]["text"] for u in turn.updates
            if u.get("sessionUpdate") == "agent_message_chunk" and u.get("content", {}).get("type") == "text"]


def assert_streamed(turn: acpnb.Turn, text: str) -> None:
    """The reply arrived as several chunks that add up to `text`, and the turn ended normally."""
    assert turn.error is None, turn.error
    assert turn.stop_reason == "end_turn", turn
    chunks = text_chunks(turn)
    assert len(chunks) >= 3, chunks
    assert "".join(chunks) == turn.text
    assert turn.text.endswith(text), turn.text
    assert turn.ttft_s is not None and turn.duration_s is not None and turn.ttft_s <= turn.duration_s


def chosen_kind(record: Any) -> str | None:
    """The kind (allow_once, reject_once...) of the option our policy picked for a permission request."""
    return next((o.get("kind") for o in record.options if o.get("optionId") == record.chosen), None)


def cancel_after_first_chunk(session: acpnb.Session, prompt: str, timeout: float = TURN_TIMEOUT) -> acpnb.Turn:
    """Start a turn, cancel it as soon as the first text of the reply arrives, return the finished turn."""
    first_chunk = threading.Event()

    def watch(event: Any) -> None:
        update = event.data["update"] if event.kind == "update" else {}
        # claude starts with an empty chunk; wait for real text.
        if update.get("sessionUpdate") == "agent_message_chunk" and (update.get("content") or {}).get("text"):
            first_chunk.set()

    unsubscribe = session.state.observe(watch)
    try:
        future = session.start_prompt(prompt, timeout=timeout)
        assert first_chunk.wait(timeout), "no text chunk arrived before the timeout"
        session.cancel()
        return future.result(timeout)
    finally:
        unsubscribe()


SLOW_WORDS = " ".join(f"word{i}" for i in range(1, 31))  # 30 chunks 0.3 s apart: ~9 s if never cancelled


def assert_cancelled_mid_stream(turn: acpnb.Turn) -> None:
    assert turn.stop_reason == "cancelled", turn
    # The stream was cut: the reply stops short of its last word.
    assert turn.text and not turn.text.rstrip().endswith("word30"), turn.text
