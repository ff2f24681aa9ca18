"""The one NDJSON framing (acp_notebook/_ndjson.py), what a transport that cannot start says, and how an agent
process is ended (after its exit grace)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import pytest

import acp_notebook as acpnb
from acp_notebook import launch
from acp_notebook._ndjson import DroppedFrame, LineReader, LineWriter, encode
from acp_notebook._process import EXIT_GRACE_S, AgentProcess
from acp_notebook.connection.core import transport_for
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


STAYS_AFTER_EOF = "import sys, time; sys.stdin.read(); time.sleep(30)"  # reads to EOF, then stays
EXITS_ON_EOF = "import sys; sys.stdin.read()"


def ended_by(code: str, **grace: float) -> int | None:
    """The exit code of a process running ``code`` once ``terminate()`` has ended it."""
    async def run() -> int | None:
        process = AgentProcess([sys.executable, "-c", code], cwd=os.getcwd(), env=dict(os.environ), **grace)
        await process.spawn()
        await process.terminate()
        return process.process.returncode

    return asyncio.run(run())


def test_an_agent_known_to_stay_after_eof_is_sent_sigterm_at_once_and_others_may_exit_on_their_own():
    assert ended_by(STAYS_AFTER_EOF, exit_grace=0.0) == -signal.SIGTERM
    assert ended_by(EXITS_ON_EOF) == 0  # the default grace: EOF is enough


def test_the_registry_gives_each_started_agent_its_exit_grace(tmp_path):
    assert launch.registered("codex").exit_grace == 0.0  # codex-acp 2.6.0 stays after EOF (interop FINDINGS)
    assert launch.registered("demo").exit_grace == EXIT_GRACE_S
    spec = launch.AgentSpec(name="stays", command=(sys.executable, "-c", STAYS_AFTER_EOF), exit_grace=0.0)
    _name, transport, _env = transport_for(spec, cwd=str(tmp_path))
    assert transport.process.exit_grace == 0.0
    _name, transport, _env = transport_for([sys.executable, "-c", EXITS_ON_EOF], cwd=str(tmp_path))
    assert transport.process.exit_grace == EXIT_GRACE_S


@pytest.mark.parametrize("value", ["-1", '"soon"', "true", "inf"])
def test_an_exit_grace_in_the_agents_file_is_a_number_of_seconds(tmp_path, value):
    path = tmp_path / "agents.toml"
    path.write_text(f'[agents.mine]\ncommand = "my-agent"\nexit_grace = {value}\n')
    with pytest.raises(ValueError, match="exit_grace is the seconds"):
        launch.load_user_agents(path)


def test_an_exit_grace_in_the_agents_file_reaches_the_agent(tmp_path):
    path = tmp_path / "agents.toml"
    path.write_text('[agents.stays]\ncommand = "my-agent"\nexit_grace = 0\n')
    with launch.registry.overlay():
        assert launch.load_user_agents(path) == ["stays"]
        assert launch.registered("stays").exit_grace == 0.0
    assert launch.registered("stays") is None
