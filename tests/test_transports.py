"""The one NDJSON framing (acp_notebook/_ndjson.py) and what a transport that cannot start says."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

import acp_notebook as acpnb
from acp_notebook._ndjson import DroppedFrame, LineReader, LineWriter, encode
from acp_notebook.connection.transport import MemoryTransport


def read_all(data: bytes, limit: int) -> tuple[list[dict], list[tuple[str, str]]]:
    """Every message a LineReader gives for `data` (its stream reader limited as the pipes are), and its reports."""
    async def run() -> tuple[list[dict], list[tuple[str, str]]]:
        reader = asyncio.StreamReader(limit=limit)
        reader.feed_data(data)
        reader.feed_eof()
        reports: list[tuple[str, str]] = []
        lines = LineReader(reader, limit=limit, on_bad=lambda reason, excerpt: reports.append((reason, excerpt)))
        messages = []
        while (message := await lines.read()) is not None:
            messages.append(message)
        return messages, reports

    return asyncio.run(run())


def test_one_policy_for_blank_malformed_and_over_long_lines():
    huge_request = b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"x":"' + b"y" * 5000 + b'"}}\n'
    huge_note = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"y" * 5000 + b'"}}\n'
    data = b"\n".join([b'{"id":1,"result":{}}', b"", b"{broken", b"[1, 2]", b"[" * 2000 + b"]" * 2000]) + b"\n"
    messages, reports = read_all(data + huge_request + huge_note + b'{"id":2,"result":{}}', limit=4096)
    assert messages[0] == {"id": 1, "result": {}} and messages[-1] == {"id": 2, "result": {}}
    (dropped,) = messages[1:-1]
    assert isinstance(dropped, DroppedFrame) and dropped.head.id == 7 and dropped.head.method == "session/prompt"
    assert "over the 0.00390625 MiB frame limit" in dropped.reason
    reasons = [reason for reason, _ in reports]
    assert reasons[:3] == ["not JSON", "not a JSON object", "JSON nested too deeply"]
    assert len(reasons) == 5 and all(r.endswith("frame limit: dropped") for r in reasons[3:])


def test_concurrent_sends_are_written_whole_and_in_order():
    async def run() -> list[dict]:
        read_fd, write_fd = os.pipe()
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            open(write_fd, "wb", buffering=0))
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        reader = asyncio.StreamReader(limit=2**22)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), open(read_fd, "rb", buffering=0))
        frames = LineWriter(writer)
        big = "z" * 200_000  # larger than the pipe's buffer: writers wait in drain, one at a time
        sending = asyncio.gather(*(frames.send({"n": n, "text": big}) for n in range(20)))
        lines = LineReader(reader)
        received = [await lines.read() for _ in range(20)]
        await sending
        writer.close()
        return received

    received = asyncio.run(run())
    assert [m["n"] for m in received] == list(range(20)) and all(len(m["text"]) == 200_000 for m in received)


class _DiesBeforeReady(MemoryTransport):
    """A memory agent whose thread ends before it serves (as when the SDK cannot be imported there)."""

    async def _agent_side(self) -> None:
        raise RuntimeError("the SDK could not be imported")


def test_a_memory_agent_that_dies_before_it_is_ready_fails_the_start_with_its_last_words():
    with pytest.raises(acpnb.AgentStartError) as raised:
        acpnb.start(_DiesBeforeReady(object(), description="a dying agent"), timeout=20)
    message = str(raised.value)
    assert "a dying agent ended before it was ready" in message
    assert "RuntimeError: the SDK could not be imported" in message


@pytest.mark.slow
def test_a_transport_says_its_command_and_takes_stderr_listeners():
    memory = MemoryTransport(object())
    assert memory.command == [] and memory.stderr_listeners == []
    proxy = acpnb.start_proxy({"d": "demo"}, timeout=30)
    try:
        proxy.new_session()
        backend = proxy.request("_proxy/status", {})["agents"]["d"]
        assert backend["status"] == "ready" and "acp_notebook.demo" in " ".join(backend["command"])
    finally:
        proxy.close()


def test_a_frame_holding_a_lone_surrogate_is_sent_as_json_escapes_not_dropped():
    """An answer naming a file with undecodable bytes (os.fsdecode gives lone surrogates) must still go out."""
    message = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "no file report-\udcff.csv: naïve"}}
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert b"\\udcff" in line and b"na\\u00efve" in line
    assert json.loads(line) == message
    assert encode({"text": "naïve"}) == '{"text":"naïve"}\n'.encode()  # the usual frame stays UTF-8
