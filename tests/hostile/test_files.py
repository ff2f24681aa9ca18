"""fs/read_text_file and fs/write_text_file against a hostile agent (acp_notebook/connection/files.py).

The agent is a real subprocess (tests/hostile/fs_agent.py) that sends the client exactly the paths a test
lists, over the real pipes and through the client's request handling. It asks for paths no file can have
(NUL bytes, lone surrogates, over-long paths and names), loops of symlinks, hard links to files outside
the session's directory, and it races the client: folders and files swapped for symlinks between the
client's steps (from a hook, deterministically) and by a thread flipping a folder while writes happen.
Whatever happens, nothing outside the session's directory is read, made or written.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook._protocol import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND
from acp_notebook.connection import files

HOSTILE_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "fs_agent.py")]
SECRET = "do not read"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """The session's directory (``work``, with a file and a folder) and a directory beside it (``elsewhere``)
    holding a secret: what the agent must never reach."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    (work / "notes.txt").write_text("one\ntwo\n")
    (elsewhere / "secret.txt").write_text(SECRET)
    return {"work": work, "elsewhere": elsewhere, "requests": tmp_path / "requests"}


@pytest.fixture
def session(dirs: dict[str, Path]) -> Iterator[acpnb.Session]:
    dirs["requests"].mkdir()
    with acpnb.start(HOSTILE_AGENT, cwd=dirs["work"], timeout=30) as agent:
        yield agent.new_session()


def asks(session: acpnb.Session, dirs: dict[str, Path], requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the client answered each of the agent's requests, in order."""
    listing = dirs["requests"] / f"{len(list(dirs['requests'].iterdir()))}.json"
    listing.write_text(json.dumps(requests), encoding="utf-8")
    return json.loads(session.prompt(str(listing), timeout=90).text)


def read(path: Any) -> dict[str, Any]:
    return {"method": "read", "path": path}


def write(path: Any, content: str = "planted") -> dict[str, Any]:
    return {"method": "write", "path": path, "content": content}


def outside(dirs: dict[str, Path]) -> list[str]:
    """Everything in the directory beside the session's, and the secret's content."""
    return sorted(str(p.relative_to(dirs["elsewhere"])) for p in dirs["elsewhere"].rglob("*")) + \
        [(dirs["elsewhere"] / "secret.txt").read_text()]


UNTOUCHED = ["secret.txt", SECRET]


# --- paths no file can have -----------------------------------------------------------------------
def test_paths_no_file_can_have_are_refused_as_invalid_params(session, dirs):
    """NUL bytes, lone surrogates, over-long paths and names: each a -32602 saying what is wrong (they were an
    'Internal error' with a traceback), for reads and writes alike."""
    work = str(dirs["work"])
    cases = {
        f"{work}/a\x00b.txt": "holds a NUL byte (at character",
        f"{work}/\ud800.txt": "cannot be a file name: it holds characters no file name encodes",
        f"{work}/" + "deep/" * 900 + "x.txt": "bytes long, over the 4,095-byte limit for a path",
        f"{work}/" + "y" * 300 + ".txt": "bytes long, over the 255-byte limit for one name in a path",
        "notes.txt": "path must be absolute",
        f"{work}/notes.txt/inside": "notes.txt is not a folder",
    }
    requests = [request(path) for path in cases for request in (read, write)]
    answers = asks(session, dirs, requests + [{"method": "read", "path": 42}])
    for expected, answer in zip([message for message in cases.values() for _ in (read, write)], answers):
        assert answer.get("code") == INVALID_PARAMS and expected in answer["message"], answer
    assert answers[-1] == {"code": INVALID_PARAMS, "message": "path must be a string, got int"}
    # The path is shown with what it hides spelled out.
    assert answers[0]["message"].startswith(f"{work}/a\\x00b.txt holds a NUL byte")
    assert answers[2]["message"].startswith(f"{work}/\\ud800.txt cannot be a file name")
    assert not (dirs["work"] / "deep").exists() and outside(dirs) == UNTOUCHED


def test_a_name_that_is_not_utf8_is_read_written_and_named_in_answers_that_reach_the_agent(session, dirs,
                                                                                          monkeypatch):
    """b"report-\\xff.csv" is a lone surrogate in Python and in the agent's JSON: the file is read and written, and
    answers naming it (a refusal, a failed disk) are sent with the character spelled out (an answer holding it
    could not be encoded, and the agent waited for it for ever)."""
    work = dirs["work"]
    name = b"report-\xff.csv".decode("utf-8", "surrogateescape")
    (work / name).write_text("a,b\n")
    os.mkfifo(work / f"pipe-{name}")
    answers = asks(session, dirs, [read(f"{work}/{name}"), write(f"{work}/{name}", "c,d\n"),
                                   read(f"{work}/pipe-{name}")])
    assert answers[:2] == [{"ok": "a,b\n"}, {"ok": ""}] and (work / name).read_text() == "c,d\n"
    assert answers[2] == {"code": INVALID_PARAMS,
                          "message": f"{work}/pipe-report-\\udcff.csv is not a regular file (a FIFO)"}

    def disk_full(_fd: int, _length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "ftruncate", disk_full)
    (answer,) = asks(session, dirs, [write(f"{work}/{name}", "e,f\n")])
    assert answer == {"code": INTERNAL_ERROR,
                      "message": f"{work}/report-\\udcff.csv could not be written: No space left on device"}


def test_symlink_loops_are_refused_as_invalid_params(session, dirs):
    work = dirs["work"]
    (work / "a").symlink_to(work / "b")
    (work / "b").symlink_to(work / "a")
    (work / "self").symlink_to(work / "self")
    loops = [f"{work}/a", f"{work}/a/inside.txt", f"{work}/self", f"{work}/sub/../self/x.txt"]
    answers = asks(session, dirs, [request(path) for path in loops for request in (read, write)])
    for answer in answers:
        assert answer.get("code") == INVALID_PARAMS and "goes through a loop of symbolic links" in answer["message"]
    assert sorted(p.name for p in work.iterdir()) == ["a", "b", "notes.txt", "self", "sub"]


def test_hard_links_to_files_outside_are_neither_read_nor_written(session, dirs):
    linked = dirs["work"] / "sub" / "innocent.txt"
    os.link(dirs["elsewhere"] / "secret.txt", linked)
    answers = asks(session, dirs, [read(str(linked)), write(str(linked), "overwritten")])
    for answer, verb in zip(answers, ("read", "written")):
        assert answer["code"] == INVALID_PARAMS
        assert answer["message"] == (f"{linked} has other hard links, which may be outside the session's directories "
                                     f"(only 1 of its 2 names are in its folder): it is not {verb} on an agent's behalf")
    assert outside(dirs) == UNTOUCHED


# --- races between the client's steps -------------------------------------------------------------
def swap_for_symlink(folder: Path, target: Path) -> Path:
    """``folder`` moved aside (inside the session's directory) and a symlink to ``target`` put in its place."""
    aside = folder.with_name(folder.name + "-aside")
    folder.rename(aside)
    folder.symlink_to(target)
    return aside


def after(monkeypatch: pytest.MonkeyPatch, name: str, then: Callable[..., None]) -> None:
    """Run ``then(args, result)`` once, right after the first call of ``files.<name>`` (the client's step)."""
    real = getattr(files, name)
    done = threading.Event()

    def step(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if not done.is_set():
            done.set()
            then(args, result)
        return result

    monkeypatch.setattr(files, name, step)


def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_followed(session, dirs, monkeypatch):
    """Between the path's check and the walk, ``sub`` becomes a symlink to the directory outside: the write is
    refused and no folder is made outside (``mkdir(parents=True)`` made one there)."""
    target = dirs["work"] / "sub" / "deeper" / "new.txt"
    after(monkeypatch, "_locate", lambda _args, _result: swap_for_symlink(dirs["work"] / "sub", dirs["elsewhere"]))
    (answer,) = asks(session, dirs, [write(str(target))])
    assert answer["code"] == INVALID_PARAMS
    assert answer["message"] == (f"{target} changed while it was opened: sub is a symbolic link now, and it is not "
                                 "followed (it could lead outside the session's directories)")
    assert outside(dirs) == UNTOUCHED


def test_a_folder_swapped_during_the_walk_leaves_the_write_inside(session, dirs, monkeypatch):
    """Once ``sub`` is open, swapping it for a symlink changes nothing: the walk goes on from the folder it
    holds, which is still inside (moved aside), and the file lands there."""
    target = dirs["work"] / "sub" / "deeper" / "new.txt"
    after(monkeypatch, "_open_folder", lambda _args, _result: swap_for_symlink(dirs["work"] / "sub", dirs["elsewhere"]))
    (answer,) = asks(session, dirs, [write(str(target), "landed")])
    assert answer == {"ok": ""}
    assert (dirs["work"] / "sub-aside" / "deeper" / "new.txt").read_text() == "landed"
    assert outside(dirs) == UNTOUCHED


@pytest.mark.parametrize("method", ["read", "write"])
def test_a_file_swapped_for_a_symlink_before_it_is_opened_is_refused(session, dirs, monkeypatch, method):
    notes = dirs["work"] / "notes.txt"

    def swap(_args: Any, _result: Any) -> None:
        notes.unlink()
        notes.symlink_to(dirs["elsewhere"] / "secret.txt")

    after(monkeypatch, "_check_kind", swap)
    (answer,) = asks(session, dirs, [read(str(notes)) if method == "read" else write(str(notes), "overwritten")])
    assert answer["code"] == INVALID_PARAMS and "notes.txt is a symbolic link now" in answer["message"]
    assert outside(dirs) == UNTOUCHED


def exchange_function() -> Callable[[Path, Path], None] | None:
    """Linux's renameat2(RENAME_EXCHANGE): two names swapped in one step, so the flipped folder is never
    missing (a write would make it anew); None where the system has no such call."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return None

    def exchange(first: Path, second: Path) -> None:
        if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return exchange


AT_FDCWD, RENAME_EXCHANGE = -100, 2


@pytest.mark.slow
def test_a_folder_flipping_between_folder_and_symlink_never_lets_anything_out(session, dirs):
    """A thread swaps ``sub`` with a symlink to the directory outside, back and forth in a bounded loop, while
    the agent writes 150 files under ``sub`` and reads the secret's name through it: every answer is ``ok``
    or a refusal, the secret is never read, nothing appears outside, and each write allowed is in the folder."""
    sub, link = dirs["work"] / "sub", dirs["work"] / "sub-link"
    link.symlink_to(dirs["elsewhere"])
    exchange = exchange_function()
    try:
        if exchange is None:
            raise OSError("no renameat2")
        exchange(sub, link)
        exchange(sub, link)
    except OSError as exc:
        pytest.skip(f"this system cannot swap a folder and a symlink in one step: {exc}")
    stop = threading.Event()
    flips = itertools.count()

    def flip() -> None:
        while not stop.is_set() and next(flips) < 1_000_000:
            exchange(sub, link)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        requests = [request for n in range(150) for request in
                    (write(f"{sub}/d{n}/f.txt", f"file {n}"), read(f"{sub}/secret.txt"))]
        answers = asks(session, dirs, requests)
    finally:
        stop.set()
        flipper.join(30)
    assert not flipper.is_alive() and next(flips) > 1
    if sub.is_symlink():
        exchange(sub, link)  # the folder back under its name
    assert all("ok" in answer or answer["code"] in (INVALID_PARAMS, RESOURCE_NOT_FOUND) for answer in answers)
    assert not any(SECRET in json.dumps(answer) for answer in answers)
    assert outside(dirs) == UNTOUCHED
    for n, answer in enumerate(answers[::2]):
        if "ok" in answer:
            assert (sub / f"d{n}" / "f.txt").read_text() == f"file {n}"
