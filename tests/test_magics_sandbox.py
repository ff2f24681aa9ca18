"""``%acp resume`` keeps an agent's sandbox: a session started with ``%acp start ... --sandbox bwrap`` is reopened
by an agent that runs under bubblewrap again (issue 39), seen in the process tree, not in our own bookkeeping;
and a record whose sandbox this version does not know is not used (never resumed without one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from IPython.core.error import UsageError

import acp_notebook as acpnb
from acp_notebook.magics.records import SessionRecord
from tests.processes import descendants
from tests.shells import run_captured as run
from tests.shells import shell  # noqa: F401 - fixture
from test_sandbox import _bwrap_or_skip


def _argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]


def _runs_under_bwrap(pid: int) -> bool:
    """The agent's process is bubblewrap, and the demo agent runs below it."""
    return Path(_argv(pid)[0]).name == "bwrap" and any(
        "acp_notebook.demo" in _argv(child) for child in descendants(pid) if Path(f"/proc/{child}").exists())


@pytest.mark.slow
def test_resume_starts_a_sandboxed_agent_sandboxed_again(shell):  # noqa: F811 - the fixture
    _bwrap_or_skip()
    run(shell, "%acp start demo --sandbox bwrap")
    run(shell, "%%acp\nnew topic: Voles")
    first = acpnb.current()
    assert _runs_under_bwrap(first.agent.connection.pid)
    run(shell, "%acp stop")
    captured = run(shell, f"%acp resume {first.id}")
    assert "(session/resume)" in captured.stdout, captured.stdout
    resumed = acpnb.current()
    assert resumed is not first and resumed.id == first.id  # the agent found it in its state folder, kept writable
    assert _runs_under_bwrap(resumed.agent.connection.pid)
    run(shell, "%acp stop")
    # A plain start under the same name is another launch: the sandboxed session is not handed to it.
    run(shell, "%acp start demo")
    assert not _runs_under_bwrap(acpnb.current().agent.connection.pid)  # the control
    with pytest.raises(UsageError, match="belongs to another running agent"):
        run(shell, f"%acp resume {first.id}")


def test_a_record_keeps_its_sandbox_and_one_it_does_not_know_is_refused():
    record = SessionRecord("s1", "demo", {"spec": "demo", "sandbox": "bwrap"}, "/w", "/w")
    assert SessionRecord.from_json(record.to_json()) == record
    assert record.start_line() == "%acp start demo --sandbox bwrap"
    argv = SessionRecord("s2", "mine", {"argv": ["python", "a.py"], "sandbox": "bwrap"}, "/w", "/w")
    assert argv.start_line() == "%acp start --name mine --sandbox bwrap -- python a.py"
    # A notebook edited (or written by a later version) to name another sandbox: not resumed without one.
    for sandbox in ("none", "", 0, ["bwrap"]):
        tampered = {**record.to_json(), "launch": {"spec": "demo", "sandbox": sandbox}}
        assert SessionRecord.from_json(tampered) is None, sandbox
