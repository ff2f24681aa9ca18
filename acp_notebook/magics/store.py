"""The local session store: every session the magics open or reopen, written at once, so that
``%acp resume`` works in any later kernel, whether the notebook was saved or not.

One SQLite file (the standard library's ``sqlite3``), ``sessions.sqlite3`` in the state
directory: ``$ACPNB_STATE_DIR``, else ``$XDG_STATE_HOME/acp-notebook``, else
``~/.local/state/acp-notebook``. One row per (agent launch, session id): the session's record
(records.py: how its agent was started, never env values, only their names; cwd, title, the
option values in force in the agent's order), the notebook when the kernel knows it, the
kernel's working directory and id, when it was first and last written, and whether the agent
was found to no longer have it. At most ``MAX_ROWS`` rows: the oldest are pruned.

Several kernels share the file: WAL journal, a busy timeout, one short transaction per write.
A file this version cannot use (corrupt, or written by a newer schema) or a directory it cannot
write turns the store off for this kernel with one warning; the file is never deleted or
rewritten then.

Threads: ``open_store()`` runs on the kernel thread (its warning lands in the cell that
caused it). Writes are queued to one writer thread of the store's own, so neither the kernel
thread nor the background loop (which reports title and option changes) waits on the disk;
reads (``%acp resume``) run on the kernel thread. One lock orders every use of the connection.

One store per file per process (``_stores``, by path), on purpose: each holds the file's SQLite connection and
its writer thread, and every user in the process (the magics of each shell, ``acpnb.resume``, a later
``%load_ext`` after an unload) must share them, so that writes to one file stay in one queue and a file that
cannot be used warns once per kernel, not once per caller. An entry is made by the first ``open_store()`` for
its path (never at import) and lives as long as the process; its writer (a one-thread executor) is finished
at interpreter exit, after which the last writes run inline. A changed ``$ACPNB_STATE_DIR`` gives a new path,
hence its own entry. ``_stores_lock`` guards ``_stores``: any thread may open a store.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .records import SessionRecord

__all__ = ["MAX_ROWS", "STATE_ENV", "SessionStore", "StoreWarning", "StoredSession", "open_store", "state_dir"]

logger = logging.getLogger(__name__)

STATE_ENV = "ACPNB_STATE_DIR"
FILE_NAME = "sessions.sqlite3"
SCHEMA_VERSION = 1
MAX_ROWS = 500
BUSY_TIMEOUT_S = 5.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    agent TEXT NOT NULL,          -- the record's launch as canonical JSON: which agent, started how
    session_id TEXT NOT NULL,
    alias TEXT NOT NULL,
    record TEXT NOT NULL,         -- SessionRecord.to_json()
    notebook TEXT,
    workdir TEXT NOT NULL,
    kernel_id TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    gone INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent, session_id)
);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated);
"""


class StoreWarning(UserWarning):
    """The session store cannot be used in this kernel (sessions are then kept only in saved notebooks)."""


@dataclass(frozen=True)
class StoredSession:
    """One row: a session's latest record and where it was used."""

    record: SessionRecord
    notebook: str | None
    workdir: str
    kernel_id: str | None
    created: float
    updated: float
    gone: bool  # the agent answered that it no longer has this session


def state_dir() -> Path:
    """Where the store lives (see the module docstring)."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "acp-notebook"


def _place(path: str | None) -> str | None:
    """A notebook or directory as stored and looked up: absolute, so that every kernel spells it alike."""
    return os.path.abspath(os.path.expanduser(path)) if path else None


def _agent_key(record: SessionRecord) -> str:
    return json.dumps(dict(record.launch), sort_keys=True)


class SessionStore:
    """The store in one file; made by ``open_store``, which checks the file first."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._connection = connection
        self._lock = threading.Lock()
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="acpnb-store")
        self.failed: str | None = None  # why writing stopped (after one warning)

    # --- writes (queued) ------------------------------------------------------------------
    def save(self, record: SessionRecord, *, notebook: str | None, workdir: str, kernel_id: str | None) -> None:
        """Record the session now (queued to the writer thread; returns at once)."""
        row = (_agent_key(record), record.session_id, record.alias, json.dumps(record.to_json()),
               _place(notebook), _place(workdir), kernel_id, time.time())
        self._queue(lambda db: self._upsert(db, row))

    def mark_gone(self, record: SessionRecord) -> None:
        """The agent no longer has this session: it is not offered first again."""
        key = (_agent_key(record), record.session_id)
        self._queue(lambda db: db.execute("UPDATE sessions SET gone = 1 WHERE agent = ? AND session_id = ?", key))

    def forget(self, record: SessionRecord) -> None:
        """The session was deleted (``%acp sessions --delete``): its row goes."""
        key = (_agent_key(record), record.session_id)
        self._queue(lambda db: db.execute("DELETE FROM sessions WHERE agent = ? AND session_id = ?", key))

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every queued write is done (tests, and before reading back)."""
        with contextlib.suppress(RuntimeError):  # the writer is gone at interpreter exit: writes ran inline
            self._writer.submit(lambda: None).result(timeout)

    @staticmethod
    def _upsert(db: sqlite3.Connection, row: tuple[Any, ...]) -> None:
        db.execute(
            "INSERT INTO sessions (agent, session_id, alias, record, notebook, workdir, kernel_id, created, updated)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?8)"
            " ON CONFLICT (agent, session_id) DO UPDATE SET alias = excluded.alias, record = excluded.record,"
            " notebook = COALESCE(excluded.notebook, sessions.notebook), workdir = excluded.workdir,"
            " kernel_id = excluded.kernel_id, updated = excluded.updated, gone = 0", row)
        (count,) = db.execute("SELECT count(*) FROM sessions").fetchone()
        if count > MAX_ROWS:
            db.execute("DELETE FROM sessions WHERE rowid IN (SELECT rowid FROM sessions ORDER BY updated LIMIT ?)",
                       (count - MAX_ROWS,))

    def _queue(self, write: Callable[[sqlite3.Connection], Any]) -> None:
        if self.failed is not None:
            return
        try:
            self._writer.submit(self._write, write)
        except RuntimeError:  # interpreter exit (the kernel's last records): write here, it is tiny
            self._write(write)

    def _write(self, write: Callable[[sqlite3.Connection], Any]) -> None:
        """One short transaction; a failure stops writing, logged once (the writer thread has no cell)."""
        if self.failed is not None:
            return
        try:
            with self._lock, self._connection as db:
                write(db)
        except sqlite3.Error as exc:
            self.failed = f"{type(exc).__name__}: {exc}"
            logger.warning("acp-notebook: the session store %s stopped recording in this kernel: %s", self.path,
                           self.failed)

    # --- reads (kernel thread) --------------------------------------------------------
    def sessions(self, *, notebook: str | None = None, workdir: str | None = None,
                 limit: int = MAX_ROWS) -> list[StoredSession]:
        """Rows, newest first; only those of ``notebook`` / ``workdir`` when given."""
        self.flush()
        where, args = [], []
        for column, value in (("notebook", notebook), ("workdir", workdir)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(_place(value))
        sql = ("SELECT record, notebook, workdir, kernel_id, created, updated, gone FROM sessions"
               + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY updated DESC LIMIT ?")
        try:
            with self._lock:
                rows = self._connection.execute(sql, (*args, limit)).fetchall()
        except sqlite3.Error as exc:
            logger.warning("acp-notebook: cannot read the session store %s: %s", self.path, exc)
            return []
        found = []
        for record_json, nb, wd, kernel_id, created, updated, gone in rows:
            with contextlib.suppress(ValueError, TypeError):
                record = SessionRecord.from_json(json.loads(record_json))
                if record is not None:
                    found.append(StoredSession(record, nb, wd, kernel_id, created, updated, bool(gone)))
        return found


def _connect(path: Path) -> sqlite3.Connection:
    """The checked connection; raises sqlite3.Error / OSError, or ValueError for a newer schema."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()  # a file that is not a database fails here
        if version > SCHEMA_VERSION:
            raise ValueError(f"it was written by a newer acp-notebook (schema {version}; this one reads "
                             f"{SCHEMA_VERSION})")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if version < SCHEMA_VERSION:
            db.execute("PRAGMA journal_mode = WAL")
            db.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
        db.execute("SELECT count(*) FROM sessions").fetchone()
        db.execute("PRAGMA synchronous = NORMAL")  # in WAL mode: safe from corruption, no fsync per write
        db.isolation_level = ""  # from here on, `with db:` is one transaction per write
    except BaseException:
        db.close()
        raise
    return db


_stores: dict[Path, SessionStore | None] = {}
_stores_lock = threading.Lock()


def open_store() -> SessionStore | None:
    """The store of this kernel's state directory, or None when it cannot be used (one warning, the first time)."""
    path = state_dir() / FILE_NAME
    with _stores_lock:
        if path in _stores:
            return _stores[path]
        try:
            store: SessionStore | None = SessionStore(path, _connect(path))
        except (sqlite3.Error, OSError, ValueError) as exc:
            store = None
            warnings.warn(f"acp-notebook keeps no session store in this kernel: {path} cannot be used ({exc}). "
                          "Sessions are still recorded in the notebook's saved outputs; the file was left as "
                          f"it is (move it away, or set {STATE_ENV} to another directory).", StoreWarning,
                          stacklevel=3)
        _stores[path] = store
        return store
