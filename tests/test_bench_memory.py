"""What the memory benchmark relies on: a turn keeps plain text chunks as text yet gives back every update as
received, and ``agent.log`` stays within its bounds (entries and estimated bytes), dropping the oldest."""

from __future__ import annotations

import json
import random

import pytest

from acp_notebook import _framelog as framelog
from acp_notebook.client import Agent
from acp_notebook.turn import Turn


def _mixed_updates(count: int) -> list[dict]:
    """Plain text chunks of both kinds, interleaved with what must be kept as it came."""
    rng = random.Random(16)
    made = []
    for i in range(count):
        pick = rng.random()
        kind = rng.choice(["agent_message_chunk", "agent_thought_chunk"])
        if pick < 0.75:
            made.append({"sessionUpdate": kind, "content": {"type": "text", "text": f"w{i} é "}})
        elif pick < 0.8:  # keys in another order: kept as it came, so its JSON reads the same
            made.append({"content": {"type": "text", "text": f"x{i}"}, "sessionUpdate": "agent_message_chunk"})
        elif pick < 0.85:
            made.append({"sessionUpdate": kind, "content": {"type": "text", "text": f"m{i}"}, "messageId": "m1"})
        elif pick < 0.9:
            made.append({"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}})
        elif pick < 0.95:
            made.append({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""}})
        else:
            made.append({"sessionUpdate": "tool_call", "toolCallId": f"t{i}", "title": "Read", "status": "pending"})
    return made


def test_a_turn_gives_back_every_update_as_it_came_in_order() -> None:
    turn = Turn("prompt", "s1")
    sent = _mixed_updates(3000)
    for update in sent:
        turn.apply(update)
    got = turn.updates
    assert got == sent
    assert json.dumps(got) == json.dumps(sent)  # key order too
    assert turn.update_count == len(sent)

    def joined(kind: str) -> str:
        return "".join(u["content"]["text"] for u in sent
                       if u["sessionUpdate"] == kind and u["content"].get("type") == "text")

    assert turn.text == joined("agent_message_chunk")
    assert turn.thoughts == joined("agent_thought_chunk")
    turn.finish({"stopReason": "end_turn"}, None)
    assert turn.updates == sent and turn.text == joined("agent_message_chunk")


def test_a_long_run_of_plain_chunks_is_kept_as_text_not_as_dicts() -> None:
    turn = Turn("prompt", "s1")
    for i in range(10_000):
        turn.apply({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"{i} "}})
    assert len(turn._records) == 1  # one run standing for every chunk
    assert len(turn.updates) == 10_000 and turn.updates[1234]["content"]["text"] == "1234 "


def _chunk_frame(i: int, text: str = "lorem ipsum ") -> dict:
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                                      "content": {"type": "text", "text": f"{i}:{text}"}}}}


@pytest.mark.parametrize("bound", ["entries", "bytes"])
def test_the_log_keeps_the_latest_frames_within_both_bounds(monkeypatch: pytest.MonkeyPatch, bound: str) -> None:
    monkeypatch.setattr(framelog, "LOG_LIMIT", 500 if bound == "entries" else 10**9)
    monkeypatch.setattr(framelog, "LOG_LIMIT_BYTES", 10**12 if bound == "entries" else 200_000)
    agent = Agent("demo")  # never started: its frame tap is driven by hand
    for i in range(3000):
        agent._on_frame("recv", _chunk_frame(i), None)
        assert len(agent.log) <= framelog.LOG_LIMIT and agent.log_bytes <= framelog.LOG_LIMIT_BYTES
    kept = [e["msg"]["params"]["update"]["content"]["text"].split(":")[0] for e in agent.log]
    assert kept == [str(i) for i in range(3000 - len(kept), 3000)]  # the newest, in order, none missing
    assert len(kept) >= (450 if bound == "entries" else 50)
    assert agent.log_bytes == sum(framelog._entry_size(e) for e in agent.log)


def test_a_big_frame_counts_by_its_size_and_a_log_cleared_by_hand_is_measured_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framelog, "LOG_LIMIT_BYTES", 300_000)
    agent = Agent("demo")
    big = {"jsonrpc": "2.0", "id": 1, "result": {"configOptions": [{"id": "x" * 100_000}]}}
    assert framelog._entry_size({"dir": "recv", "t": 0.0, "msg": big}) > 100_000
    agent._on_frame("recv", big, None)
    agent.log.clear()  # a user may empty it
    for i in range(2000):
        agent._on_frame("recv", _chunk_frame(i), None)
    assert agent.log_bytes <= framelog.LOG_LIMIT_BYTES and len(agent.log) > 10
    assert agent.log_bytes == sum(framelog._entry_size(e) for e in agent.log)


def test_a_compacted_chunk_is_still_masked_and_equal_to_the_frame() -> None:
    from acp_notebook._redact import Redactor

    agent = Agent("demo")
    agent._redactor = Redactor([("DEMO_TOKEN", "sekret-value-123")])
    agent._on_frame("recv", _chunk_frame(1, "plain words "), None)
    agent._on_frame("recv", _chunk_frame(2, "the key is sekret-value-123 "), None)
    leaky = _chunk_frame(3)
    leaky["params"]["sessionId"] = "s-sekret-value-123"
    agent._on_frame("recv", leaky, None)
    first, second, third = (e["msg"] for e in agent.log)
    assert first == _chunk_frame(1, "plain words ")
    assert "sekret" not in json.dumps(second) and "***DEMO_TOKEN***" in json.dumps(second)
    assert "sekret" not in json.dumps(third)
