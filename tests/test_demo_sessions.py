"""Durable demo sessions: the demo agent keeps each session in a file of its state directory, so a
session made by one process is listed, loaded, resumed and deleted by another. Real agent
processes over real pipes; every frame is checked against the ACP schema."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import acp
import pytest
from acp import RequestError
from test_demo_agent import (
    STEP_TIMEOUT,
    demo_agent,
    is_update,
    option,
    run_async,
    step,
    text_of,
    updates_in,
)

from acp_notebook._protocol import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND
from acp_notebook.demo.agent import LIST_PAGE_SIZE
from acp_notebook.demo.store import STATE_ENV, SessionStore, default_state_dir, resolve_state_dir
from tests.sdk_compat import text_block

UUID_ID = re.compile(r"demo-[0-9a-f]{32}")


def stored_ids(state: Path) -> set[str]:
    return {path.stem for path in state.glob("*.json")}


# --------------------------------------------------------------------------- where sessions live


def test_the_suite_keeps_demo_sessions_in_a_temporary_directory(demo_state_dir: Path) -> None:
    # tests/conftest.py sets the variable the demo agent reads, for every process the suite starts.
    assert os.environ.get(STATE_ENV) == str(demo_state_dir)
    assert not demo_state_dir.is_relative_to(default_state_dir())


def test_state_dir_precedence(tmp_path: Path) -> None:
    home = Path.home()
    assert resolve_state_dir("/flag/dir", {STATE_ENV: "/env/dir"}) == Path("/flag/dir")
    assert resolve_state_dir(None, {STATE_ENV: "/env/dir"}) == Path("/env/dir")
    assert resolve_state_dir(None, {"XDG_DATA_HOME": "/xdg"}) == Path("/xdg/acp-notebook/demo-sessions")
    # The XDG spec ignores a relative XDG_DATA_HOME; then the per-user default applies.
    expected_default = home / ".local/share/acp-notebook/demo-sessions"
    assert resolve_state_dir(None, {"XDG_DATA_HOME": "relative"}) == expected_default
    assert resolve_state_dir(None, {}) == expected_default
    assert resolve_state_dir("~/sessions", {}) == home / "sessions"


@run_async
@pytest.mark.slow
async def test_the_state_dir_flag_beats_the_environment(tmp_path: Path) -> None:
    flagged, from_env = tmp_path / "flagged", tmp_path / "from-env"
    async with demo_agent(tmp_path, "--state-dir", str(flagged), state_dir=from_env) as h:
        session_id, _ = await h.new_session()
    assert stored_ids(flagged) == {session_id}
    assert not from_env.exists()
    # Conversations are private: the directory is the owner's only, and so is each file.
    assert flagged.stat().st_mode & 0o777 == 0o700
    assert (flagged / f"{session_id}.json").stat().st_mode & 0o777 == 0o600


# --------------------------------------------------------------------------- across processes


@run_async
@pytest.mark.slow
async def test_two_processes_never_hand_out_the_same_id(tmp_path: Path) -> None:
    state = tmp_path / "state"

    async def make_sessions() -> list[str]:
        async with demo_agent(tmp_path, state_dir=state) as h:
            return [(await h.new_session())[0] for _ in range(5)]

    first, second = await asyncio.gather(make_sessions(), make_sessions())
    ids = first + second
    assert len(set(ids)) == 10
    assert all(UUID_ID.fullmatch(i) for i in ids), ids
    assert stored_ids(state) == set(ids)
    # A third process lists every session both made.
    async with demo_agent(tmp_path, state_dir=state) as h:
        await step(h.conn.list_sessions())
        assert {s["sessionId"] for s in h.log.last_result("session/list")["sessions"]} == set(ids)


@run_async
@pytest.mark.slow
async def test_a_session_continues_in_a_new_process(tmp_path: Path) -> None:
    state = tmp_path / "state"
    moved = tmp_path / "moved"
    moved.mkdir()
    async with demo_agent(tmp_path, state_dir=state) as h:
        session_id, _ = await h.new_session()
        await h.set_option(session_id, "model", "smart")
        await h.set_option(session_id, "thought_level", "high")
        await h.set_option(session_id, "tone", "pirate")
        await h.prompt(session_id, "plan a garden")
        await h.prompt(session_id, "what about tomatoes?")
        said = [text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk"))]
    assert h.process.returncode is not None  # the first process is gone

    async with demo_agent(tmp_path, state_dir=state) as h:
        await step(h.conn.list_sessions())
        (listed,) = h.log.last_result("session/list")["sessions"]
        assert (listed["sessionId"], listed["cwd"], listed["title"]) == (session_id, str(tmp_path), "Plan a garden")

        # load (in another cwd): the history comes back as message chunks, then the title.
        await step(h.conn.load_session(cwd=str(moved), session_id=session_id, mcp_servers=[]))
        replay = h.log.updates(session_id)
        assert [(u["sessionUpdate"], u.get("content", {}).get("text")) for u in replay[:3]] == [
            ("user_message_chunk", "plan a garden"),
            ("agent_message_chunk", replay[1]["content"]["text"]),
            ("user_message_chunk", "what about tomatoes?"),
        ]
        assert replay[3] == {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said[0]}}
        assert replay[4]["sessionUpdate"] == "session_info_update" and replay[4]["title"] == "Plan a garden"
        loaded = h.log.last_result("session/load")
        assert [(o["id"], o["currentValue"]) for o in loaded["configOptions"]] == [
            ("model", "smart"), ("thought_level", "high"), ("mode", "ask"), ("tone", "pirate"),
            ("show_thoughts", False),
        ]
        assert loaded["modes"]["currentModeId"] == "ask"

        # The conversation goes on with its context: the agent answers from the history.
        assert await h.prompt(session_id, "What did I say first?") == "end_turn"
        frames = h.turn_frames(session_id)
        assert len(updates_in(frames, "agent_thought_chunk")) == 3  # still smart, thought level high
        assert text_of(updates_in(frames, "agent_message_chunk")) == (
            '[smart] Arr, first ye said: "plan a garden". Ye sent 2 prompts before this one.'
        )
        assert "title" not in updates_in(frames, "session_info_update")[0]

    # A third process resumes it (no replay) in the cwd it was loaded in, and remembers that turn too.
    async with demo_agent(tmp_path, state_dir=state) as h:
        await step(h.conn.list_sessions(cwd=str(moved)))
        assert [s["sessionId"] for s in h.log.last_result("session/list")["sessions"]] == [session_id]
        await step(h.conn.resume_session(session_id=session_id, cwd=str(moved)))
        assert h.log.updates(session_id) == []
        assert option(h.log.last_result("session/resume")["configOptions"], "tone")["currentValue"] == "pirate"
        await h.prompt(session_id, "what did i say first")
        assert "Ye sent 3 prompts before this one." in text_of(
            updates_in(h.turn_frames(session_id), "agent_message_chunk")
        )



@run_async
@pytest.mark.slow
async def test_recall_without_history(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as h:
        session_id, _ = await h.new_session()
        await h.prompt(session_id, "what did I say first?")
        assert text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk")) == (
            "[fast] Nothing yet: this is the first thing you said."
        )


# --------------------------------------------------------------------------- list, close, delete


@run_async
@pytest.mark.slow
async def test_list_filters_by_cwd_and_pages(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    async with demo_agent(tmp_path, state_dir=tmp_path / "state") as h:
        mine = [(await h.new_session(str(here)))[0] for _ in range(LIST_PAGE_SIZE + 3)]
        others = [(await h.new_session(str(there)))[0] for _ in range(2)]

        await step(h.conn.list_sessions(cwd=str(here)))
        page = h.log.last_result("session/list")
        assert len(page["sessions"]) == LIST_PAGE_SIZE and page["nextCursor"]
        await step(h.conn.list_sessions(cwd=str(here), cursor=page["nextCursor"]))
        rest = h.log.last_result("session/list")
        assert "nextCursor" not in rest
        # Most recent first: the newest sessions open the first page.
        assert [s["sessionId"] for s in page["sessions"] + rest["sessions"]] == mine[::-1]

        await step(h.conn.list_sessions(cwd=str(there) + "/"))  # the same directory, spelled differently
        assert [s["sessionId"] for s in h.log.last_result("session/list")["sessions"]] == others[::-1]

        with pytest.raises(RequestError) as err:
            await step(h.conn.list_sessions(cwd="relative/dir"))
        assert err.value.code == INVALID_PARAMS and "absolute" in str(err.value)
        with pytest.raises(RequestError) as err:
            await step(h.conn.list_sessions(cursor="not-a-cursor"))
        assert err.value.code == INVALID_PARAMS and "cursor" in str(err.value)


@run_async
@pytest.mark.slow
async def test_delete_removes_the_file_and_close_keeps_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # The last request below breaks the schema on purpose; the test checks the other frames itself.
    async with demo_agent(tmp_path, state_dir=state, check_frames=False) as h:
        kept, _ = await h.new_session()
        gone, _ = await h.new_session()
        await h.prompt(gone, "something to forget")
        await step(h.conn.close_session(session_id=kept))
        assert stored_ids(state) == {kept, gone}
        # A closed session can be deleted too; an open one is closed by its deletion.
        assert await h.raw("session/delete", {"sessionId": gone}) == {}
        assert await h.raw("session/delete", {"sessionId": kept}) == {}
        assert stored_ids(state) == set()
        await step(h.conn.list_sessions())
        assert h.log.last_result("session/list")["sessions"] == []
        for call in (
            h.conn.load_session(cwd=h.cwd, session_id=gone, mcp_servers=[]),
            h.conn.prompt(session_id=gone, prompt=[text_block("still there?")]),
            h.raw("session/delete", {"sessionId": gone}),
        ):
            with pytest.raises(RequestError) as err:
                await step(call)
            assert err.value.code == RESOURCE_NOT_FOUND
        with pytest.raises(RequestError) as err:
            await h.raw("session/delete", {})
        assert err.value.code == INVALID_PARAMS and "sessionId" in str(err.value)
    (violation,) = h.log.errors
    assert "session/delete" in violation and "'sessionId' is a required property" in violation


@run_async
async def test_delete_during_a_turn_cancels_it_and_nothing_writes_the_file_back(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # A 30 s pause between chunks: the turn is still running when the delete arrives.
    async with demo_agent(tmp_path, state_dir=state, env={"ACP_DEMO_DELAY": "30"}) as h:
        session_id, _ = await h.new_session()
        turn = asyncio.ensure_future(h.conn.prompt(session_id=session_id, prompt=[text_block("a long story")]))
        await h.log.wait_for(is_update(session_id, "agent_message_chunk"), STEP_TIMEOUT)
        assert await h.raw("session/delete", {"sessionId": session_id}) == {}
        assert (await step(turn)).stop_reason == "cancelled"
        # The turn has answered, so anything it would save is saved by now.
        assert stored_ids(state) == set()


# --------------------------------------------------------------------------- damaged files


@run_async
@pytest.mark.slow
async def test_a_damaged_session_file_fails_only_that_session(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with demo_agent(tmp_path, state_dir=state) as h:
        good, _ = await h.new_session()
        await h.prompt(good, "keep me")
        broken, _ = await h.new_session()
        odd, _ = await h.new_session()
        (state / f"{broken}.json").write_text('{"format": "acp-notebook-demo-session", "vers', encoding="utf-8")
        record = json.loads((state / f"{odd}.json").read_text(encoding="utf-8"))
        record["settings"]["model"] = "huge"
        (state / f"{odd}.json").write_text(json.dumps(record), encoding="utf-8")

    async with demo_agent(tmp_path, state_dir=state) as h:
        for session_id, reason in ((broken, "not valid JSON"), (odd, "setting 'model' is 'huge'")):
            with pytest.raises(RequestError) as err:
                await step(h.conn.load_session(cwd=h.cwd, session_id=session_id, mcp_servers=[]))
            assert err.value.code == INTERNAL_ERROR
            message = str(err.value)
            assert repr(session_id) in message and str(state / f"{session_id}.json") in message and reason in message
        # The other sessions are untouched: listed (the damaged ones left out) and loadable.
        await step(h.conn.list_sessions())
        assert [s["sessionId"] for s in h.log.last_result("session/list")["sessions"]] == [good]
        await step(h.conn.load_session(cwd=h.cwd, session_id=good, mcp_servers=[]))
        assert h.log.updates(good, "user_message_chunk")[0]["content"]["text"] == "keep me"


@run_async
async def test_an_unusable_state_dir_gives_a_clear_error(tmp_path: Path) -> None:
    occupied = tmp_path / "a-file"
    occupied.write_text("not a directory", encoding="utf-8")
    async with demo_agent(tmp_path, state_dir=occupied) as h:
        with pytest.raises(RequestError) as err:
            await h.new_session()
        assert err.value.code == INTERNAL_ERROR
        assert "cannot save session" in str(err.value) and str(occupied) in str(err.value)
        with pytest.raises(RequestError) as err:
            await step(h.conn.list_sessions())
        assert err.value.code == INTERNAL_ERROR and str(occupied) in str(err.value)


def test_writes_are_atomic_across_processes(tmp_path: Path) -> None:
    """A writer process rewrites one session file many times with contents of very different
    sizes while this process reads it: every read sees one whole version."""
    store = SessionStore(tmp_path / "state")
    session_id = "demo-atomic"
    store.write(session_id, {"n": 0, "text": "x" * 10})
    writer_code = (
        "import sys\n"
        "from acp_notebook.demo.store import SessionStore\n"
        f"store = SessionStore({str(store.root)!r})\n"
        "sys.stdin.readline()\n"
        "for n in range(300):\n"
        f"    store.write({session_id!r}, {{'n': n, 'text': 'x' * (200_000 if n % 2 else 10)}})\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", writer_code], stdin=subprocess.PIPE, text=True)
    assert writer.stdin is not None
    seen: set[int] = set()
    try:
        writer.stdin.write("go\n")
        writer.stdin.flush()
        while writer.poll() is None:
            record = store.read(session_id)  # raises SessionUnreadable on a half-written file
            assert len(record["text"]) == (200_000 if record["n"] % 2 else 10)
            seen.add(record["n"])
    finally:
        writer.stdin.close()
        if writer.poll() is None:
            writer.kill()
        writer.wait(STEP_TIMEOUT)
    assert writer.returncode == 0
    assert store.read(session_id)["n"] == 299
    assert len(seen) > 1  # the reads really overlapped the writes
    assert [p.name for p in store.root.iterdir()] == [f"{session_id}.json"]  # no temporary files left
