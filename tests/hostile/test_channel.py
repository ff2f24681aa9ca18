"""The kernel tools' channel and MCP server against a hostile local process and a hostile agent.

The local process: raw Unix-socket peers that never present the token (floods without a newline,
silence, long lines) and one that sends its MCP bytes in the same write as its token. The agent:
the real bridge, started from the session's mcpServers entry and driven by the official MCP client,
calling tools whose answers carry lone surrogates, NUL and bidi controls. And the unlucky kernel:
an MCP SDK import that fails (out of file descriptors) must not leave the tools dead for good.

As in tests/test_kernel_tools_bridge.py, the tools serve a namespace dict of the test's and the
test's main thread is the kernel thread, running the tools' work while it waits in ``_loop.run_sync``.
"""

from __future__ import annotations

import asyncio
import errno
from html import escape
import json
import os
import socket
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook.kernel_tools import KernelTools, channel, server
from acp_notebook.kernel_tools.client import entry_environment, open_kernel_tools

pd = pytest.importorskip("pandas")

TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]
REFUSED = b"refused: wrong token for the kernel tools' channel\n"
# What undecodable bytes in a file name become in Python, NUL, and a right-to-left override.
ODD = "\udcff", "\x00", "\u202e"
ODD_NAME = b"report-\xff.csv".decode("utf-8", "surrogateescape")

pytestmark = pytest.mark.timeout(120)


def run(coro: Any, timeout: float = TIMEOUT) -> Any:
    return _loop.run_sync(coro, timeout)


def socket_path(tools: KernelTools) -> str:
    return entry_environment(tools.entry)["ACPNB_KERNEL_CHANNEL"]


@pytest.fixture
def namespace() -> dict[str, Any]:
    return {"files": pd.DataFrame({"name": [ODD_NAME, "plain.csv"], "size": [1, 2]}),
            "odd": "a\udcffb\x00c\u202ed", "n": 1}


@pytest.fixture
def tools(namespace: dict[str, Any]) -> Iterator[KernelTools]:
    kt = KernelTools(policy="allow", run_timeout=20.0, namespace=namespace)
    run(kt.start())
    try:
        yield kt
    finally:
        run(kt.close())


def texts(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def bridge_env(entry: dict[str, Any]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ACPNB_KERNEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(entry_environment(entry))
    return env


def what_the_kernel_said(sock: socket.socket) -> bytes:
    """Everything the kernel sends until it closes (a reset after its last line counts as the close)."""
    said = b""
    try:
        while chunk := sock.recv(4096):
            said += chunk
    except ConnectionResetError:
        pass
    return said


# --- before the token ---------------------------------------------------------------------------
PEERS = 40
FLOOD = 4 * 2**20  # bytes each peer tries to send, without a newline
PAYLOAD = b"x" * FLOOD  # made once, before memory is traced: the peers send views of it


def flood(path: str) -> bytes:
    """One hostile peer: megabytes and no newline, as fast as the kernel takes them; then what it answered."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        sock.connect(path)
        view, sent = memoryview(PAYLOAD), 0
        try:
            while sent < FLOOD:
                sent += sock.send(view[sent:sent + 65536])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the kernel closed on us: what this peer is here to find out
        return what_the_kernel_said(sock)


def test_a_flood_of_peers_without_the_token_costs_the_kernel_little_memory(tools: KernelTools) -> None:
    """40 peers each send 4 MiB without a newline: each is refused after a few kB (the token line's limit),
    and the kernel's Python memory grows by a few MiB at most (it held each peer's megabytes until a 10 s
    deadline before: 160 MiB here, 1.3 GB with 32 MiB each)."""
    path = socket_path(tools)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        with ThreadPoolExecutor(PEERS) as pool:
            answers = list(pool.map(flood, [path] * PEERS))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert all(answer.startswith(REFUSED) for answer in answers), {answer[:80] for answer in answers}
    # Per peer at most twice the token line's limit and one socket read (asyncio's is 256 KiB) before it is
    # refused, plus room for whatever else the process allocates meanwhile: nothing near what they sent.
    bound = PEERS * (2 * channel.HANDSHAKE_LIMIT + 256 * 1024) + 8 * 2**20
    assert peak - before < bound, f"the kernel's memory grew by {(peak - before) / 2**20:.1f} MiB"
    # And the channel still serves the agent's own bridge.
    assert texts(run(call(tools.entry, "inspect_variable", {"name": "n"}))).startswith("n: int")


async def call(entry: dict[str, Any], tool: str, arguments: dict[str, Any]) -> Any:
    async with open_kernel_tools(entry) as session:
        return await session.call_tool(tool, arguments)


def test_a_long_line_without_the_token_is_refused_at_once_not_at_the_deadline(
        tools: KernelTools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel, "HANDSHAKE_TIMEOUT_S", 3600.0)  # only the line's limit can end this in time
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        sock.connect(socket_path(tools))
        sock.sendall(b"y" * (channel.HANDSHAKE_LIMIT + 1))
        assert what_the_kernel_said(sock) == REFUSED


def test_a_silent_peer_is_dropped_at_the_handshake_deadline(tools: KernelTools,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert channel.HANDSHAKE_TIMEOUT_S <= 5.0  # a bridge sends its token as soon as it is connected
    monkeypatch.setattr(channel, "HANDSHAKE_TIMEOUT_S", 0.2)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        sock.connect(socket_path(tools))
        sock.sendall(tools.entry["env"][1]["value"][:10].encode())  # part of a token, never its line end
        assert what_the_kernel_said(sock) == REFUSED


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def lines_from(sock: socket.socket, count: int) -> list[bytes]:
    received = b""
    while received.count(b"\n") < count:
        chunk = sock.recv(65536)
        assert chunk, f"the channel closed after {received!r}"
        received += chunk
    return received.split(b"\n")[:count]


def test_mcp_bytes_sent_with_the_token_in_one_write_are_served(tools: KernelTools) -> None:
    """Nothing a peer sent after its token line is lost between the handshake and the MCP server."""
    token = entry_environment(tools.entry)["ACPNB_KERNEL_TOKEN"]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        sock.connect(socket_path(tools))
        sock.sendall(token.encode() + b"\n" + json.dumps(INITIALIZE).encode() + b"\n")
        ok, answer = lines_from(sock, 2)
    assert ok == b"ok"
    assert json.loads(answer)["id"] == 1 and json.loads(answer)["result"]["serverInfo"]["name"] == "kernel"


def test_requests_the_sdk_cannot_read_leave_the_connection_serving(tools: KernelTools) -> None:
    """A raw agent's lone surrogate escape (invalid JSON to the SDK), bytes that are not UTF-8, not JSON at all:
    each is dropped by the SDK, and the next call on the same connection is answered."""
    token = entry_environment(tools.entry)["ACPNB_KERNEL_TOKEN"]

    def tool_call(request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}}).encode() + b"\n"

    def agent() -> list[Any]:  # on a worker thread: this one runs the tools' work meanwhile
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            sock.connect(socket_path(tools))
            sock.sendall(token.encode() + b"\n" + json.dumps(INITIALIZE).encode() + b"\n")
            lines_from(sock, 2)
            sock.sendall(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n")
            sock.sendall(tool_call(2, "run_code", {"code": "print('\udcff')"}))  # json.dumps writes \udcff
            sock.sendall(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "\xff"}}\n')
            sock.sendall(b"\x00\x00 not json \xe2\x80\xae\n")
            sock.sendall(tool_call(4, "inspect_variable", {"name": "n"}))
            return [json.loads(line) for line in lines_from(sock, 2)]

    answers = run(asyncio.to_thread(agent))
    answered = {answer["id"]: answer for answer in answers}
    assert "n: int" in answered[4]["result"]["content"][0]["text"]
    # The name that was not UTF-8 reached the server as replacement characters, and was answered.
    assert answered[3]["result"]["isError"] and "No tool named" in answered[3]["result"]["content"][0]["text"]


# --- a failed import of the MCP SDK ---------------------------------------------------------------
@pytest.fixture
def broken_sdk(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The SDK's import fails as it does when the process is out of file descriptors, until ``broken`` is
    cleared (the cause gone); ``attempts`` counts the imports tried."""
    real = server.import_server_sdk
    state: dict[str, Any] = {"broken": True, "attempts": 0}

    def import_sdk() -> None:
        state["attempts"] += 1
        if state["broken"]:
            raise OSError(errno.EMFILE, "Too many open files")
        real()

    monkeypatch.setattr(server, "import_server_sdk", import_sdk)
    return state


class Problems:
    """What a KernelTools' ``problem`` observers hear, with a wait for the next change."""

    def __init__(self, tools: KernelTools) -> None:
        self.heard: list[str] = []
        self._changed = threading.Condition()
        self.unsubscribe = tools.observe_problem(self._hear)
        self.tools = tools

    def _hear(self, problem: str) -> None:
        with self._changed:
            self.heard.append(problem)
            self._changed.notify_all()

    def wait_for(self, wanted: Any) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: wanted(self.tools.problem), TIMEOUT), self.heard


SDK_FAILED = ("the MCP SDK failed to import (OSError: [Errno 24] Too many open files); "
              "the agent's next connection to the kernel tools tries again")


def test_a_failed_sdk_import_is_said_and_retried_by_the_next_connection(broken_sdk: dict[str, Any]) -> None:
    tools = KernelTools(policy="allow", namespace={"n": 1})
    problems = Problems(tools)
    run(tools.start())
    try:
        problems.wait_for(lambda problem: problem != "")  # the import started with the channel failed
        assert tools.problem == SDK_FAILED
        # The agent's bridge is turned away with the reason, on one line of its stderr.
        turned_away = subprocess.run([sys.executable, "-m", "acp_notebook.kernel_tools.bridge"],
                                     env=bridge_env(tools.entry), input="", capture_output=True, text=True,
                                     timeout=TIMEOUT)
        assert turned_away.returncode == 1 and turned_away.stdout == ""
        assert turned_away.stderr.splitlines() == [
            f"acp-notebook kernel bridge: the kernel tools could not start: {SDK_FAILED}"]
        assert broken_sdk["attempts"] == 2  # that connection tried again
        broken_sdk["broken"] = False  # the descriptors are back
        answer = run(call(tools.entry, "inspect_variable", {"name": "n"}))
        assert not answer.is_error and texts(answer).startswith("n: int")
        assert tools.problem == "" and problems.heard == [SDK_FAILED, ""]
        assert broken_sdk["attempts"] == 3
    finally:
        problems.unsubscribe()
        run(tools.close())


def test_a_deferred_sdk_import_waits_for_the_token_not_for_any_peer(broken_sdk: dict[str, Any]) -> None:
    """Started for an agent that connects only when a prompt needs the kernel, the tools leave the SDK's import to
    the first caller holding the token: a local process that guesses the token makes the kernel import nothing (no
    CPU spent on its behalf, no problem shown); the agent's own bridge then starts the import."""
    tools = KernelTools(policy="allow", namespace={"n": 1})
    run(tools.start(import_sdk_now=False))
    try:
        token = entry_environment(tools.entry)["ACPNB_KERNEL_TOKEN"]
        for guess in (b"not-the-token\n", token[:-1].encode() + b"\n", b"\xff\x00\n"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(TIMEOUT)
                sock.connect(socket_path(tools))
                sock.sendall(guess)
                assert what_the_kernel_said(sock).startswith(channel.HANDSHAKE_REFUSED)
        assert broken_sdk["attempts"] == 0 and tools.problem == ""
        turned_away = subprocess.run([sys.executable, "-m", "acp_notebook.kernel_tools.bridge"],
                                     env=bridge_env(tools.entry), input="", capture_output=True, text=True,
                                     timeout=TIMEOUT)
        assert turned_away.returncode == 1 and turned_away.stderr.splitlines() == [
            f"acp-notebook kernel bridge: the kernel tools could not start: {SDK_FAILED}"]
        assert broken_sdk["attempts"] == 1
    finally:
        run(tools.close())


def test_the_session_panel_shows_the_kernel_tools_failure_until_it_is_gone(broken_sdk: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    from acp_notebook.demo import DemoAgent
    from acp_notebook.widgets.panel import SessionPanel

    with acpnb.start(DemoAgent(state_dir=tmp_path / "demo-state"), cwd=tmp_path, kernel_tools="read-only") as agent:
        session = agent.new_session()
        tools = session.kernel_tools.tools
        problems = Problems(tools)
        panel = SessionPanel(session)
        try:
            problems.wait_for(lambda problem: problem != "")
            note = panel.snapshot().note
            assert note.startswith("kernel tools: read-only")
            assert note.endswith(f" · kernel tools not working: {SDK_FAILED}")
            assert escape(f"kernel tools not working: {SDK_FAILED}") in panel.note.value
            broken_sdk["broken"] = False
            answer = run(call(session.kernel_tools.entry, "run_code", {"code": "x = 1"}))
            assert answer.is_error and texts(answer).startswith("refused: the kernel tools are read-only")
            assert "not working" not in panel.snapshot().note and "not working" not in panel.note.value
        finally:
            problems.unsubscribe()
            panel.close()


# --- odd characters in answers --------------------------------------------------------------------
def test_lone_surrogates_nul_and_bidi_in_answers_never_end_the_connection(
        tools: KernelTools, namespace: dict[str, Any]) -> None:
    """Each call answers with the characters spelled out, and the next call on the same connection works:
    text, structured content and error messages, under allow and read-only."""

    async def broken_tool(_arguments: dict[str, Any]) -> Any:
        raise RuntimeError("a bug that names \udcff\x00\u202e")

    calls: list[tuple[str, dict[str, Any]]] = [
        ("run_code", {"code": "print('\\udcff', '\\x00', '\\u202e')"}),
        ("run_code", {"code": "'\\udcff' + '\\x00\\u202e'"}),
        ("run_code", {"code": "raise ValueError('bad \\udcff \\x00 \\u202e')"}),
        ("run_code", {"code": "import pandas\npandas.DataFrame({'\\udcff\\u202e': ['\\x00']})"}),
        ("inspect_variable", {"name": "files"}),
        ("inspect_variable", {"name": "odd"}),
        ("list_variables", {}),
        ("notebook_history", {}),
        ("propose_cell", {"code": "print('\\udcff')", "explanation": "\x00\u202e"}),
        ("no_such_tool\u202e", {}),
        ("list_variables", {}),  # the crash below
    ]

    async def go() -> list[Any]:
        async with open_kernel_tools(tools.entry) as session:
            answers = []
            for index, (name, arguments) in enumerate(calls):
                if index == len(calls) - 1:
                    tools._tool_list_variables = broken_tool  # type: ignore[method-assign]
                answers.append(await session.call_tool(name, arguments))
                # The same connection still answers.
                assert texts(await session.call_tool("inspect_variable", {"name": "n"})).startswith("n: int")
            tools.policy = "read-only"
            answers.append(await session.call_tool("inspect_variable", {"name": "odd"}))
            answers.append(await session.call_tool("inspect_variable", {"name": "files", "rows": 5}))
            assert texts(await session.call_tool("inspect_variable", {"name": "n"})).startswith("n: int")
            return answers

    answers = run(go())
    printed, value, raised, frame, files, odd, listed, _history, proposed, unknown, crashed, odd_ro, files_ro = \
        answers
    for answer in answers:
        for character in ODD:  # the characters themselves never reach the agent...
            assert character not in texts(answer) and character not in json.dumps(answer.structured_content or {},
                                                                                  ensure_ascii=False)
    for answer in (printed, value, raised, odd, odd_ro):  # ...they are spelled out
        assert all(escape in texts(answer) for escape in ("\\udcff", "\\x00", "\\u202e")), texts(answer)
    assert "\\udcff" in texts(files) and "\\udcff" in texts(files_ro) and "\\udcff" in texts(frame)
    assert raised.is_error and "ValueError" in texts(raised)
    assert not listed.is_error and not proposed.is_error
    assert unknown.is_error and crashed.is_error
    assert "RuntimeError: a bug that names \\udcff\\x00\\u202e" in texts(crashed)


def test_the_writer_escapes_what_utf8_cannot_carry_and_never_raises() -> None:
    """The channel's last line of defence, below the SDK: a lone surrogate in the JSON text it is handed
    reaches the agent as its visible escape, in valid UTF-8 JSON."""
    written: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> None:
            written.append(data)

    writer = channel.LineWriter(Sink())  # type: ignore[arg-type]
    text = json.dumps({"text": "report-\udcff.csv \ud800 \x00 \u202e"}, ensure_ascii=False) + "\n"
    run(writer.write(text))
    decoded = json.loads(written[0].decode("utf-8"))
    assert decoded == {"text": "report-\\udcff.csv \\ud800 \x00 \u202e"}
