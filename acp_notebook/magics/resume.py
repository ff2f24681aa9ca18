"""Resuming a notebook's session after a kernel restart: ``%acp resume`` and ``acpnb.resume()``.

Which session: the one named, else the one used last, among the records the notebook keeps
in its saved outputs (records.py) and those of this kernel. How: start its agent again the
way it was started, then ``session/resume`` if the agent offers it, else ``session/load``,
else say plainly that this agent cannot reopen sessions.

This module is imported by ``import acp_notebook`` (for ``acpnb.resume``): it must not import
IPython or ipywidgets at module level. Runs on the calling thread (the kernel thread in a
notebook); the agent's I/O runs on the background loop as for every call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..client import Agent, Session
from ..errors import AcpError, CapabilityError, RpcError
from .records import SessionRecord, latest_records, notebook_path, read_notebook_records
from .session_ids import resolve_session_id, unknown_session_id, usage_error

__all__ = ["choose_record", "reopen", "resume", "resume_note"]


def _notebook_records(notebook: str | None, user_ns: Mapping[str, Any] | None) -> tuple[list[SessionRecord], str]:
    """Records saved in the notebook file, and where they were looked for (for messages)."""
    path = Path(notebook).expanduser() if notebook else notebook_path(user_ns)
    if path is None:
        return [], "this kernel (it does not know its notebook's file: pass --notebook PATH)"
    if not path.is_file():
        if notebook:
            raise usage_error(f"%acp resume: no notebook at {path}")
        return [], f"this kernel and {path} (not saved yet)"
    try:
        return read_notebook_records(path), f"{path} and this kernel"
    except (OSError, ValueError) as exc:
        raise usage_error(f"%acp resume: cannot read {path}: {exc}") from None


def choose_record(session_id: str | None, notebook: str | None, known: Sequence[SessionRecord],
                  user_ns: Mapping[str, Any] | None) -> SessionRecord:
    """The record to resume: ``session_id`` (or a unique prefix of it), else the most recently used."""
    saved, where = _notebook_records(notebook, user_ns)
    records = latest_records([*saved, *known])
    if not records:
        raise usage_error(f"%acp resume: no session to resume: none is recorded in {where}. "
                           "Save the notebook after using a session, or start one with %acp start demo")
    if session_id is None:
        return max(records.values(), key=lambda r: r.at)
    newest = sorted(records.values(), key=lambda r: -r.at)
    known = {r.session_id: " ".join(p for p in (repr(r.title) if r.title else "", f"of {r.alias}") if p)
             for r in newest}
    chosen = resolve_session_id(session_id, known, "%acp resume")
    if chosen is None:
        raise unknown_session_id(session_id, known, "%acp resume", f"the sessions recorded in {where}",
                                 "%acp sessions lists the current agent's own.")
    return records[chosen]


def reopen(agent: Agent, record: SessionRecord, timeout: float | None) -> tuple[Session, str]:
    """Reopen the record's session on ``agent``: (the session, the method that did it)."""
    connection = agent.connection
    methods = [m for m, capability in (("session/resume", "resume"), ("session/load", "load"))
               if connection is not None and connection.supports(capability)]
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
                raise AcpError(f"agent '{record.alias}' no longer has {record.describe()} ({exc.rpc_message})",
                               hint=f"Start a new session: %acp new --agent {record.alias}") from None
            last = exc  # e.g. resume advertised but not implemented: try load
    assert last is not None
    raise last


def resume_note(record: SessionRecord, how: str, env: Mapping[str, str]) -> str:
    """The one line ``%acp resume`` prints."""
    line = f"Resumed {record.describe()} ({how})."
    missing = [name for name in record.env_names if name not in env]
    if missing:
        pairs = " ".join(f"--env {name}=..." for name in missing)
        line += f" It was started with {', '.join(missing)}, whose values are not saved: {pairs} passes them again."
    return line


def resume(session_id: str | None = None, *, notebook: str | None = None, name: str | None = None,
           env: Mapping[str, str] | None = None, timeout: float | None = None) -> Session:
    """Reopen this notebook's last session (or ``session_id``) after a kernel restart: the agent is
    started again as it was, and the session reopened with session/resume (else session/load).

    In a notebook this is ``%acp resume``: the session panel shows and the magics use the session.
    ``notebook``: the .ipynb to read the records from (default: the notebook this kernel runs for).
    """
    from IPython import get_ipython

    from .grammar import Resume
    from .magic import magics_for

    shell = get_ipython()
    if shell is None:
        raise AcpError("acpnb.resume() reopens a notebook's session: run it in a notebook",
                       hint="Outside Jupyter, reopen a session with agent.resume_session(session_id).")
    command = Resume(session_id=session_id, notebook=notebook, alias=name,
                     env=tuple((env or {}).items()), timeout=timeout)
    return magics_for(shell).runner.resume(command)
