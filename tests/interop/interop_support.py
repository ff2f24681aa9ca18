"""Helpers the interop tests share: reading a Turn's stream, cancelling mid-stream, permission kinds, and the
setting of the kernel tools' sessions (test_interop_kernel_tools.py and record_sessions.py --kernel)."""

from __future__ import annotations

import os
import sys
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


# --- the notebook's kernel tools (the MCP server named `kernel`) ---------------------------------------
KERNEL_CODE = "total = int(df['rain_mm'].sum()); total"
KERNEL_PROMPT = f"kernel {KERNEL_CODE}"  # the model server's command: list_variables, then run_code
KERNEL_ANSWER = "Kernel answered: 1491"


def kernel_frame() -> Any:
    """The DataFrame the kernel tools find as `df`."""
    import pandas as pd

    return pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "rain_mm": [763, 6, 722]})


def served_namespace() -> dict[str, Any]:
    """Where the kernel tools look outside a Jupyter kernel: the IPython shell's namespace, else __main__'s."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell.user_ns if shell is not None else vars(sys.modules["__main__"])


def allow_everything(asked: list[Any]) -> Any:
    """A permission policy that clicks Allow (once) on every question and keeps each request it was given (the
    agent's PermissionRequest, or the kernel tools' KernelApproval for run_code under "ask")."""

    def click(request: Any) -> str:
        asked.append(request)
        options = {o.get("kind"): o["optionId"] for o in request.options}
        return options.get("allow_once") or request.options[0]["optionId"]

    return click


def bridge_env() -> dict[str, str]:
    """The kernel tools' bridge runs as the agent's child: it must import this checkout of acp_notebook."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
