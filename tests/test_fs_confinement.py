"""fs/read_text_file and fs/write_text_file: what an agent may touch (see acp_notebook/connection/files.py).

The requests come from a real agent subprocess (tests/agents/fault_agent.py sends the path
exactly as given in the prompt "read PATH" / "write PATH TEXT" and replies with the client's
answer), so every case goes over the real pipes and through the client's request handling.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.connection.files import FILE_LIMIT

FAULT_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "agents" / "fault_agent.py"), "normal"]
OUTSIDE = "is outside the session's directories"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """A session directory with a file, and a directory beside it holding a secret."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "notes.txt").write_text("one\ntwo\n")
    (elsewhere / "secret.txt").write_text("do not read")
    return {"work": work, "elsewhere": elsewhere}


@pytest.fixture
def agent(dirs: dict[str, Path]):
    with acpnb.start(FAULT_AGENT, cwd=dirs["work"], timeout=30) as started:
        yield started


def ask(session: acpnb.Session, text: str) -> str:
    return session.prompt(text, timeout=30).text


def test_paths_inside_the_session_directory_work(agent, dirs):
    session = agent.new_session()
    assert ask(session, f"read {dirs['work'] / 'notes.txt'}") == "ok: 8 chars: one\ntwo\n"
    assert ask(session, f"write {dirs['work'] / 'out' / 'deep' / 'new.txt'} hello").startswith("ok")
    assert (dirs["work"] / "out" / "deep" / "new.txt").read_text() == "hello"
    (dirs["work"] / "inner-link.txt").symlink_to(dirs["work"] / "notes.txt")
    assert ask(session, f"read {dirs['work'] / 'inner-link.txt'}").startswith("ok: 8 chars")


def test_relative_dotdot_absolute_and_symlink_escapes_are_refused(agent, dirs):
    work, secret = dirs["work"], dirs["elsewhere"] / "secret.txt"
    (work / "link.txt").symlink_to(secret)
    (work / "linked-dir").symlink_to(dirs["elsewhere"])
    session = agent.new_session()
    assert ask(session, "read notes.txt") == "error -32602: path must be absolute, got 'notes.txt'"
    for path in (f"{work}/../elsewhere/secret.txt", str(secret), f"{work}/link.txt", f"{work}/linked-dir/secret.txt",
                 "/etc/passwd"):
        reply = ask(session, f"read {path}")
        assert reply == f"error -32602: {path} {OUTSIDE}", reply
    for path in (f"{work}/../elsewhere/new.txt", f"{work}/linked-dir/new.txt", f"{work}/link.txt"):
        assert ask(session, f"write {path} oops") == f"error -32602: {path} {OUTSIDE}"
    assert secret.read_text() == "do not read" and not (dirs["elsewhere"] / "new.txt").exists()
    assert all(record.chosen is None for turn in session.turns[1:] for record in turn.permissions)
    wider = agent.new_session(additional_directories=[str(dirs["elsewhere"])])
    assert ask(wider, f"read {work}/link.txt") == "ok: 11 chars: do not read"


def test_fifos_devices_and_directories_are_refused_without_blocking(agent, dirs, tmp_path):
    fifo = dirs["work"] / "pipe"
    os.mkfifo(fifo)
    session = agent.new_session()
    # Opening a FIFO with no writer would block: the test's deadline catches a stall.
    assert ask(session, f"read {fifo}") == f"error -32602: {fifo} is not a regular file (a FIFO)"
    assert ask(session, f"write {fifo} x") == f"error -32602: {fifo} is not a regular file (a FIFO)"
    assert ask(session, f"read {dirs['work']}") == f"error -32602: {dirs['work']} is not a regular file (a directory)"
    devices = agent.new_session(additional_directories=["/dev"])
    assert ask(devices, "read /dev/zero") == "error -32602: /dev/zero is not a regular file (a character device)"
    assert ask(devices, "write /dev/null x") == "error -32602: /dev/null is not a regular file (a character device)"


def test_files_and_contents_over_the_size_limit_are_refused(agent, dirs):
    huge = dirs["work"] / "huge.log"
    with open(huge, "wb") as stream:  # sparse: a gigabyte that takes no disk space
        stream.truncate(1024 ** 3)
    session = agent.new_session()
    assert ask(session, f"read {huge}") == (f"error -32602: {huge} is 1.0 GiB, over the 8.0 MiB limit for files read "
                                            "or written on an agent's behalf")
    target = dirs["work"] / "big.txt"
    reply = ask(session, f"write {target} {'x' * (FILE_LIMIT + 1)}")
    assert reply.startswith(f"error -32602: {target} is 8.0 MiB, over the 8.0 MiB limit")
    assert not target.exists()
    exactly = dirs["work"] / "limit.txt"
    exactly.write_bytes(b"y" * FILE_LIMIT)
    assert ask(session, f"read {exactly}").startswith(f"ok: {FILE_LIMIT} chars")


def test_notebooks_are_never_written_unless_allowed_and_the_kernels_own_never(dirs, monkeypatch):
    notebook, own = dirs["work"] / "analysis.ipynb", dirs["work"] / "running.ipynb"
    for path in (notebook, own):
        path.write_text("{}")
    # What Jupyter server tells a kernel about its notebook (a path relative to the server's root).
    monkeypatch.setenv("JPY_SESSION_NAME", "some/dir/running.ipynb")
    monkeypatch.chdir(dirs["work"])
    with acpnb.start(FAULT_AGENT, cwd=dirs["work"], timeout=30) as agent:
        session = agent.new_session()
        reply = ask(session, f"write {notebook} overwritten")
        assert reply.startswith(f"error -32602: {notebook} is a notebook") and "notebook_writes=True" in reply
        assert ask(session, f"read {notebook}") == "ok: 2 chars: {}"  # reading is fine
    with acpnb.start(FAULT_AGENT, cwd=dirs["work"], timeout=30, notebook_writes=True) as agent:
        session = agent.new_session()
        assert ask(session, f"write {notebook} rewritten").startswith("ok")
        assert ask(session, f"write {own} clobbered") == (f"error -32602: {own} is the notebook this kernel runs: "
                                                          "an agent never writes it")
    assert notebook.read_text() == "rewritten" and own.read_text() == "{}"


def test_a_file_with_other_hard_links_is_never_written(agent, dirs):
    """Nor read: a hard link made inside the directory to a file outside would be a way out. Names that are all
    in the file's own folder are fine."""
    outside = dirs["elsewhere"] / "shared.txt"
    outside.write_text("original")
    os.link(outside, dirs["work"] / "shared.txt")
    session = agent.new_session()
    path = dirs["work"] / "shared.txt"
    refused = (f"error -32602: {path} has other hard links, which may be outside the session's directories "
               "(only 1 of its 2 names are in its folder): it is not {} on an agent's behalf")
    assert ask(session, f"write {path} changed") == refused.format("written")
    assert ask(session, f"read {path}") == refused.format("read")
    assert outside.read_text() == "original"
    os.link(dirs["work"] / "notes.txt", dirs["work"] / "notes-again.txt")
    assert ask(session, f"read {dirs['work'] / 'notes-again.txt'}") == "ok: 8 chars: one\ntwo\n"
    assert ask(session, f"write {dirs['work'] / 'notes.txt'} three").startswith("ok")
    assert (dirs["work"] / "notes-again.txt").read_text() == "three"


@pytest.mark.parametrize("via_proxy", [False, True], ids=["client", "proxy"])
@pytest.mark.slow
def test_a_refused_fs_request_or_failed_permission_fails_the_tool_call_not_the_turn(via_proxy, tmp_path):
    """The demo agent, directly and behind the proxy: the tool call is failed with the reason, the turn ends
    normally, and the client's turn shows both."""
    (tmp_path / "notes.txt").write_text("one\n")
    start = (lambda **kw: acpnb.start_proxy({"d": "demo"}, **kw)) if via_proxy else \
        (lambda **kw: acpnb.start("demo", **kw))
    with start(cwd=tmp_path, permission="allow", timeout=30) as agent:
        session = agent.new_session()
        turn = session.prompt("read /etc/passwd")
        (call,) = turn.tool_calls
        assert turn.stop_reason == "end_turn" and call.status == "failed"
        assert f"/etc/passwd {OUTSIDE}" in call.content[0]["content"]["text"]
        assert OUTSIDE in turn.text
    with start(cwd=tmp_path, permission="no-such-policy", timeout=30) as agent:
        turn = agent.new_session().prompt("read notes.txt")
        (call,) = turn.tool_calls
        assert turn.stop_reason == "end_turn" and call.status == "failed"
        assert "session/request_permission failed" in call.content[0]["content"]["text"]
