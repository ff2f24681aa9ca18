"""Resuming a notebook's session after a kernel restart: what ``%acp resume`` (and ``acpnb.resume()``,
entry.py) does.

Which session: the one named (an id or a unique prefix), else the one used last among the
records of this notebook: those its saved outputs keep (records.py), those of this kernel, and
those of the local session store (store.py) for this notebook; newest wins. A kernel that
knows no notebook (jupyter console, nbclient, a script) takes the store's sessions started in
its working directory. A session whose agent no longer had it is not picked without its id.
How: start its agent again the way it was started, then ``session/resume`` if the agent
offers it, else ``session/load``, else say plainly that this agent cannot reopen sessions;
then put back the option values the agent lost (restore.py).

Used by the Runner (commands.py). Runs on the calling thread (the kernel thread in a notebook); the
agent's I/O runs on the background loop as for every call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..client import Agent, Session
from ..starting import start as start_agent
from ..errors import AcpError, AgentStartError, CapabilityError, RpcError
from ..proxy import start_proxy
from .records import SessionRecord, latest_records, notebook_path, read_notebook_records
from .resumable import resumable_rows, resumable_table
from .session_ids import resolve_session_id, unknown_session_id, usage_error
from .store import StoredSession, open_store

__all__ = ["choose_record", "reopen", "restart_agent", "resumable", "resume_note"]


def _notebook_records(path: Path | None, explicit: bool) -> tuple[list[SessionRecord], str]:
    """Records saved in the notebook file, and where they were looked for (for messages)."""
    if path is None:
        return [], f"this kernel or the session store for {os.getcwd()} (this kernel knows no notebook file)"
    if not path.is_file():
        if explicit:
            raise usage_error(f"%acp resume: no notebook at {path}")
        return [], f"this kernel, the session store and {path} (not saved yet)"
    try:
        return read_notebook_records(path), f"{path}, this kernel and the session store"
    except (OSError, ValueError) as exc:
        raise usage_error(f"%acp resume: cannot read {path}: {exc}") from None


def _stored(path: Path | None, everywhere: bool) -> list[StoredSession]:
    """The store's rows: all of them, else this notebook's, else (no notebook) this working directory's."""
    store = open_store()
    if store is None:
        return []
    if everywhere:
        return store.sessions()
    return store.sessions(notebook=str(path)) if path is not None else store.sessions(workdir=os.getcwd())


def choose_record(session_id: str | None, notebook: str | None, known: Sequence[SessionRecord],
                  user_ns: Mapping[str, Any] | None) -> SessionRecord:
    """The record to resume: ``session_id`` (or a unique prefix of it), else the most recently used."""
    path = Path(notebook).expanduser() if notebook else notebook_path(user_ns)
    saved, where = _notebook_records(path, explicit=bool(notebook))
    stored = _stored(path, everywhere=session_id is not None)
    records = latest_records([*saved, *(row.record for row in stored), *known])
    gone = {row.record.session_id for row in stored if row.gone}
    if session_id is None:
        if not set(records) - gone:
            raise usage_error(f"%acp resume: no session to resume: none is recorded in {where}. "
                              "Start one with %acp start demo; %acp resume --list shows every session recorded")
        return max((r for sid, r in records.items() if sid not in gone), key=lambda r: r.at)
    chosen = resolve_session_id(session_id, _described(records.values()), "%acp resume")
    if chosen is None:
        # Only this notebook's own sessions are named: the store's others (other notebooks, other folders)
        # are what --list is for.
        here = {r.session_id for r in [*saved, *known]} | {row.record.session_id for row in stored
                                                            if _used_here(row, path)}
        ours = _described(r for sid, r in records.items() if sid in here)
        others = len(records) - len(ours)
        elsewhere = f" ({others} of other notebooks or folders)" if others else ""
        raise unknown_session_id(session_id, ours, "%acp resume", f"the sessions recorded in {where}",
                                 f"%acp resume --list shows every session recorded{elsewhere}.", shown=2)
    return records[chosen]


def _described(records: Any) -> dict[str, str]:
    """id -> a few words (title, agent), newest first."""
    return {r.session_id: " ".join(p for p in (repr(r.title) if r.title else "", f"of {r.alias}") if p)
            for r in sorted(records, key=lambda r: -r.at)}


def _used_here(row: StoredSession, path: Path | None) -> bool:
    """A stored session of this notebook (or, for a kernel that knows no notebook, of this folder)."""
    return row.notebook == str(path) if path is not None else row.notebook is None and row.workdir == os.getcwd()


def resumable(notebook: str | None, known: Sequence[SessionRecord], user_ns: Mapping[str, Any] | None) -> Any:
    """The mime bundle of ``%acp resume --list``: every session recorded in the store, the notebook and here."""
    path = Path(notebook).expanduser() if notebook else notebook_path(user_ns)
    saved, _where = _notebook_records(path, explicit=bool(notebook))
    return resumable_table(resumable_rows(_stored(path, everywhere=True), saved, known, path))


def reopen(agent: Agent, record: SessionRecord, timeout: float | None,
           gone: Callable[[SessionRecord], None] = lambda _record: None) -> tuple[Session, str]:
    """Reopen the record's session on ``agent``: (the session, the method that did it). When the agent no
    longer has the session, ``gone(record)`` is told before the error is raised."""
    connection = agent.connection
    methods = [m for m, capability in (("session/resume", "resume"), ("session/load", "load"))
               if connection.supports(capability)]
    if not methods:
        raise CapabilityError(
            f"agent '{record.alias}' cannot reopen {record.describe()}: it offers neither session/resume nor "
            "session/load",
            hint=f"Start a new session instead: {record.start_line()} (the conversation starts anew).")
    last: RpcError | None = None
    for method in methods:
        call = agent.resume_session if method == "session/resume" else agent.load_session
        try:
            return call(record.session_id, record.cwd, timeout=timeout), method
        except RpcError as exc:
            if exc.not_found:
                gone(record)
                raise AcpError(f"agent '{record.alias}' no longer has {record.describe()}",
                               hint=f"Start a new session: %acp new --agent {record.alias} (%acp resume will not "
                                    "pick this one again unless you name it).") from None
            last = exc  # e.g. resume advertised but not implemented: try load
    assert last is not None
    raise last


def restart_agent(record: SessionRecord, alias: str, *, env: Mapping[str, str] | None, timeout: float,
                  kernel_tools: str) -> Agent:
    """Start the record's agent again, as it was started; a clear error when that cannot be done."""
    if "object" in record.launch:
        variable = record.launch["object"]
        raise usage_error(f"%acp resume: agent {alias!r} was the object in {variable!r}, which kept its sessions in "
                          f"memory; start it again with %acp start --object {variable} (a new session)")
    if "replay" in record.launch:
        path = record.launch["replay"]
        raise usage_error(f"%acp resume: agent {alias!r} was a replay of {path}, which answers its recording from "
                          f"the start; run it again with %acp start --replay {path}")
    try:
        if "proxy" in record.launch:
            return start_proxy(dict(record.launch["proxy"]), cwd=record.agent_cwd, env=env, timeout=timeout,
                               name=alias, kernel_tools=kernel_tools)
        spec = record.launch.get("argv") or record.launch["spec"]
        # An agent that ran sandboxed runs sandboxed again (records.py refuses a sandbox it does not know).
        return start_agent(spec, cwd=record.agent_cwd, env=env, timeout=timeout, name=alias,
                           kernel_tools=kernel_tools, sandbox=record.launch.get("sandbox"))
    except AgentStartError as exc:
        raise AgentStartError(
            f"%acp resume: agent {alias!r} ({record.start_line()}) could not be started again to reopen "
            f"{record.describe()}: {exc.message}", command=exc.command, exit_code=exc.exit_code,
            hint="Is it still installed? `acp-notebook agents` lists the agents found on this machine; once it "
                 f"starts, %acp resume {record.session_id} reopens the session.") from None


def resume_note(record: SessionRecord, how: str, env: Mapping[str, str]) -> str:
    """The one line ``%acp resume`` prints."""
    line = f"Resumed {record.describe()} ({how})."
    if record.branch:
        line += f" It carries branch {record.branch['name']} of its conversation (a re-run cell branches anew from it)."
    missing = [name for name in record.env_names if name not in env]
    if missing:
        pairs = " ".join(f"--env {name}=..." for name in missing)
        line += f" It was started with {', '.join(missing)}, whose values are not saved: {pairs} passes them again."
    return line
