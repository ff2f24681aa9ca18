"""The local session store (acp_notebook/magics/store.py) and what ``%acp resume`` does with it, on a real
IPython shell with real agents: a session comes back after the magics' state is gone (the extension
reloaded, as a restart leaves it), with its title and the option values the agent lost.

Bad input: a corrupt file, one written by a newer schema, a directory that cannot be made: the store
is off with one warning and the file is left as it was. Several processes write at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook.magics import store as store_module
from acp_notebook.magics.records import SessionRecord
from acp_notebook.magics.restore import restore_options
from acp_notebook.magics.store import StoreWarning, open_store
from tests.test_magics import magics_of, run, shell  # noqa: F401 - fixture

AGENTS = Path(__file__).parent / "agents"


def record(session_id: str, *, title: str | None = None, at: float = 1.0, launch: dict | None = None) -> SessionRecord:
    return SessionRecord(session_id, "demo", launch or {"spec": "demo"}, "/w", "/w", ("KEY",), title, at=at,
                         options=(("model", "smart"), ("show_thoughts", True)))


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(store_module.STATE_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


# --- the store alone ------------------------------------------------------------------------
def test_rows_round_trip_and_are_found_by_notebook_or_directory(state):
    store = open_store()
    assert store is not None and store.path == state / "sessions.sqlite3"
    store.save(record("s1", title="Owls"), notebook="/nb/a.ipynb", workdir="/nb", kernel_id="k1")
    store.save(record("s2"), notebook=None, workdir="/elsewhere", kernel_id=None)
    store.save(record("s1", title="Owls and nests", at=2.0), notebook=None, workdir="/nb", kernel_id="k2")
    (first,) = store.sessions(notebook="/nb/a.ipynb")  # a later write without a notebook keeps it
    assert first.record.title == "Owls and nests" and first.record.options == (("model", "smart"),
                                                                               ("show_thoughts", True))
    assert first.kernel_id == "k2" and first.created <= first.updated and first.record.env_names == ("KEY",)
    assert [r.record.session_id for r in store.sessions(workdir="/elsewhere")] == ["s2"]
    assert [r.record.session_id for r in store.sessions()] == ["s1", "s2"]  # newest first
    store.save(record("s1", launch={"argv": ["my-agent"]}), notebook=None, workdir="/nb", kernel_id=None)  # another agent's s1
    assert len(store.sessions()) == 3
    store.mark_gone(record("s2"))
    store.forget(record("s1", launch={"argv": ["my-agent"]}))
    rows = {(r.record.session_id, r.gone) for r in store.sessions()}
    assert rows == {("s1", False), ("s2", True)}
    with sqlite3.connect(store.path) as db:  # a second reader sees the rows: WAL, committed
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*) FROM sessions").fetchone() == (2,)


def test_the_store_keeps_the_newest_rows_only(state, monkeypatch):
    monkeypatch.setattr(store_module, "MAX_ROWS", 5)
    store = open_store()
    for index in range(8):
        store.save(record(f"s{index}"), notebook=None, workdir="/w", kernel_id=None)
    assert [r.record.session_id for r in store.sessions()] == ["s7", "s6", "s5", "s4", "s3"]


def test_several_processes_write_at_once(state):
    writer = ("import sys\nfrom acp_notebook.magics.store import open_store\n"
              "from acp_notebook.magics.records import SessionRecord\nstore = open_store()\n"
              "for i in range(40):\n"
              "    store.save(SessionRecord(f'{sys.argv[1]}-{i}', 'demo', {'spec': 'demo'}, '/w', '/w'),"
              " notebook=None, workdir='/w', kernel_id=sys.argv[1])\nstore.flush()\n")
    open_store()  # the file exists with its schema before they race
    procs = [subprocess.Popen([sys.executable, "-c", writer, f"k{n}"]) for n in range(3)]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    assert len(open_store().sessions()) == 120


@pytest.mark.parametrize("kind", ["corrupt", "newer"])
def test_an_unusable_file_turns_the_store_off_with_one_warning_and_is_left_alone(state, kind):
    state.mkdir()
    path = state / "sessions.sqlite3"
    if kind == "corrupt":
        path.write_bytes(b"not a database " * 100)
    else:
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA user_version = 99")
    before = path.read_bytes()
    with pytest.warns(StoreWarning, match="cannot be used") as caught:
        assert open_store() is None
    assert ("newer acp-notebook (schema 99" in str(caught[0].message)) == (kind == "newer")
    assert "the file was left as it is" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert open_store() is None  # no second warning in this kernel
    assert path.read_bytes() == before


def test_a_directory_that_cannot_be_made_turns_the_store_off(tmp_path, monkeypatch):
    (tmp_path / "home").write_text("a file where the state directory should be")
    monkeypatch.setenv(store_module.STATE_ENV, str(tmp_path / "home" / "acp-notebook"))
    with pytest.warns(StoreWarning, match="keeps no session store"):
        assert open_store() is None


def test_the_state_directory_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv(store_module.STATE_ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert store_module.state_dir() == tmp_path / "acp-notebook"
    monkeypatch.setenv("XDG_STATE_HOME", "relative")
    assert store_module.state_dir() == Path.home() / ".local" / "state" / "acp-notebook"


# --- the magics with the store ----------------------------------------------------------------
def restart(ip) -> None:
    """What a kernel restart leaves: no agents, no records in memory (only the store)."""
    ip.run_line_magic("unload_ext", "acp_notebook")
    ip.run_line_magic("load_ext", "acp_notebook")


def chat_then_restart(ip, topic: str) -> acpnb.Session:
    """A demo session with one turn, then a restart; the session as it was."""
    with capture_output():
        run(ip, "%acp start demo")
        run(ip, f"%%acp\nnew topic: {topic}")
    session = acpnb.current()
    restart(ip)
    return session


def test_a_session_is_stored_as_it_opens_and_changes(shell, state):
    with capture_output():
        run(shell, "%acp start demo")
    session = acpnb.current()
    store = open_store()
    (row,) = store.sessions()
    assert row.record.session_id == session.id and row.notebook is None and row.workdir == str(Path.cwd())
    assert row.record.options[0] == ("model", "fast")
    with capture_output():
        run(shell, "%acp set model=smart")
        run(shell, "%%acp\nnew topic: Kestrels")
    (row,) = store.sessions()
    assert row.record.title == "Kestrels" and ("thought_level", "medium") in row.record.options
    assert row.record.model == "smart"


@pytest.mark.slow
def test_resume_after_a_restart_keeps_the_title_twice(shell, state):
    with capture_output():
        run(shell, "%acp start demo")
        run(shell, "%%acp\nnew topic: Otters")
    first = acpnb.current()
    for _ in range(2):
        restart(shell)
        with capture_output() as captured:
            run(shell, "%acp resume")
        session = acpnb.current()
        assert session.id == first.id and captured.stdout.startswith(f'Resumed session {first.id} "Otters" of demo')
        assert magics_of(shell).panel(session).snapshot().header.title == "Otters"
        with capture_output():
            run(shell, "%%acp\nand then?")
        assert magics_of(shell).last_view.snapshot().header.title == "Otters"
        (row,) = open_store().sessions()
        assert row.record.title == "Otters"


@pytest.mark.slow  # two agent starts and a turn around a shell restart: about 11 s on a loaded machine
def test_resume_puts_back_the_options_the_agent_lost(shell, state):
    with capture_output():
        run(shell, f"%acp start --name forgetful -- {sys.executable} {AGENTS}/forgetful_agent.py")
        run(shell, "%acp set model=smart thought_level=high tone=pirate")
        run(shell, "%%acp\nnew topic: Puffins")
    restart(shell)
    with capture_output() as captured:
        run(shell, "%acp resume")
    session = acpnb.current()
    assert captured.stdout.splitlines()[1] == (
        "Re-applied model=smart, thought_level=high, tone=pirate (the agent reopened the session without them).")
    assert session.config.values() == {"model": "smart", "thought_level": "high", "mode": "ask", "tone": "pirate",
                                       "show_thoughts": False}
    panel = magics_of(shell).panel(session)
    assert ("Model", "Deep thinking / Smart") in panel.snapshot().settings or \
        ("Model", "Smart") in panel.snapshot().settings


def test_a_value_no_longer_offered_is_reported_not_guessed(shell):
    with capture_output():
        run(shell, f"%acp start --name edge -- {sys.executable} {AGENTS}/edge_agent.py edge")
    session = acpnb.current()
    done = restore_options(session, [("model", "m3"), ("gone", "x"), ("style", "b"), ("model", "forbidden")], 10)
    assert done.applied == [("style", "b")] and session.config.values()["style"] == "b"
    assert [(o, why.split(";")[0].split(":")[0]) for o, _v, why in done.left] == [
        ("model", "no longer offered"), ("gone", "the agent no longer has this option"), ("model", "refused")]
    assert done.line().startswith("Re-applied style=b (the agent reopened the session without them). "
                                  "Not restored: model=m3 (no longer offered; it offers m1, m2, forbidden)")


@pytest.mark.slow
def test_a_session_the_agent_lost_is_marked_and_not_picked_again(shell, state, demo_state_dir):
    lost = chat_then_restart(shell, "Voles")
    (demo_state_dir / f"{lost.id}.json").unlink()
    with pytest.raises(acpnb.AcpError, match=f"agent 'demo' no longer has session {lost.id}") as raised:
        run(shell, "%acp resume")
    assert "%acp new --agent demo" in raised.value.hint
    (row,) = open_store().sessions()
    assert row.gone
    with pytest.raises(UsageError, match="no session to resume"):
        run(shell, "%acp resume")


def test_resuming_an_id_with_no_session_recorded_says_there_are_none(shell, state):
    with pytest.raises(UsageError) as raised:
        run(shell, "%acp resume demo-123")
    assert str(raised.value).startswith("%acp resume: no session 'demo-123' in the sessions recorded in this kernel")
    assert "; there are none yet. %acp resume --list" in str(raised.value)  # said once, not in a second parenthesis


def test_resume_list_shows_the_recorded_sessions(shell, state):
    with capture_output():
        run(shell, "%acp start demo")
        run(shell, "%acp set model=smart")
        run(shell, "%%acp\nnew topic: Herons")
        run(shell, "%acp stop")
    restart(shell)
    with capture_output() as captured:
        run(shell, "%acp resume --list")
    (table,) = [o.data for o in captured.outputs]
    header, row, tail = table["text/plain"].splitlines()
    assert header.split() == ["Session", "Agent", "Title", "When", "Where", "Model", "State"]
    assert row.split()[1:3] == ["demo", "Herons"] and row.split()[-2:] == ["smart", "closed"]
    assert str(Path.cwd()) in row and tail.startswith("Resume one with %acp resume ID")
    assert "<td style='text-align:left'>Herons</td>" in table["text/html"] and "| Herons |" in table["text/markdown"]
    with pytest.raises(UsageError, match="give no ID"):
        run(shell, "%acp resume --list demo-1")


@pytest.mark.slow
def test_an_agent_no_longer_installed_is_named(shell, state, tmp_path):
    script = tmp_path / "my_agent.py"
    script.write_text((AGENTS / "forgetful_agent.py").read_text())
    with capture_output():
        run(shell, f"%acp start --name mine -- {sys.executable} {script}")
    restart(shell)
    script.unlink()
    with pytest.raises(acpnb.AgentStartError) as raised:
        run(shell, "%acp resume")
    assert raised.value.message.startswith(f"%acp resume: agent 'mine' (%acp start --name mine -- {sys.executable} "
                                           f"{script}) could not be started again")
    assert "Is it still installed?" in raised.value.hint


def test_a_session_deleted_in_a_later_kernel_leaves_the_store(shell, state, tmp_path):
    deleted = chat_then_restart(shell, "Newts")
    with capture_output():
        run(shell, "%acp start demo")
        run(shell, f"%acp sessions --delete {deleted.id}")
    assert deleted.id not in [row.record.session_id for row in open_store().sessions()]


def test_an_unknown_id_names_this_notebooks_sessions_only_on_one_line(shell, state, tmp_path):
    """Sessions of other notebooks (in the store) are counted for --list, not named."""
    chat_then_restart(shell, "Otters")  # this kernel's session: one of the folder this kernel runs in
    store = open_store()
    store.save(record("demo-otherbook1", title="Elsewhere", at=time.time() + 60),
               notebook=str(tmp_path / "other" / "elsewhere.ipynb"), workdir=str(tmp_path), kernel_id=None)
    store.flush()
    with pytest.raises(UsageError) as raised:
        run(shell, "%acp resume zzz")
    message = str(raised.value)
    assert "\n" not in message
    assert "'Otters'" in message and "demo-otherbook1" not in message and "Elsewhere" not in message
    assert message.endswith("%acp resume --list shows every session recorded (1 of other notebooks or folders).")
