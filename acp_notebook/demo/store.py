"""The demo agent's session files: where the state directory is, and atomic reads and writes of one
JSON file per session in it.

Layout: ``<state dir>/<session id>.json``, one JSON object per file (see `DemoSession.to_record`).
The state directory is, in order of precedence, the ``--state-dir`` flag, ``$ACP_NOTEBOOK_DEMO_STATE``,
or the per-user default ``$XDG_DATA_HOME/acp-notebook/demo-sessions`` (``~/.local/share/...`` when
XDG_DATA_HOME is unset or not absolute). It is created on first write, readable by its owner only.

Several demo processes may share one directory. A write goes to a temporary file in the same
directory and is then renamed over the session's file (``os.replace``), so a reader in another
process sees either the old or the new content, never half of it. Concurrent writers of the same
session: the last rename wins. Nothing here is asynchronous: files are small, and the demo agent
calls the store from its one event loop, so no locking is needed inside a process.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "STATE_ENV",
    "SessionMissing",
    "SessionStore",
    "SessionUnreadable",
    "StoreError",
    "default_state_dir",
    "resolve_state_dir",
]

STATE_ENV = "ACP_NOTEBOOK_DEMO_STATE"
SUFFIX = ".json"
# Session ids become file names: only these characters, so an id can never name a path outside
# the state directory ("../x", "/etc/passwd", "a/b").
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class StoreError(Exception):
    """The state directory could not be read or written (permissions, disk full, ...)."""


class SessionMissing(StoreError):
    """No file for this session id in the state directory."""


class SessionUnreadable(StoreError):
    """The session's file exists but is not a valid session (bad JSON, wrong shape, unreadable)."""

    def __init__(self, session_id: str, path: Path, reason: str) -> None:
        super().__init__(f"session {session_id!r} is stored in {path} but cannot be read: {reason}")
        self.session_id = session_id
        self.path = path
        self.reason = reason


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user default: ``$XDG_DATA_HOME/acp-notebook/demo-sessions`` or ``~/.local/share/...``."""
    env = os.environ if environ is None else environ
    data_home = env.get("XDG_DATA_HOME", "")
    # The XDG spec says to ignore a relative XDG_DATA_HOME.
    base = Path(data_home) if data_home and os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "acp-notebook" / "demo-sessions"


def resolve_state_dir(flag: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The state directory to use: the command-line flag, else $ACP_NOTEBOOK_DEMO_STATE, else the default."""
    env = os.environ if environ is None else environ
    chosen = flag or env.get(STATE_ENV) or None
    if chosen is None:
        return default_state_dir(env)
    return Path(chosen).expanduser().absolute()


class SessionStore:
    """One JSON file per session in `root`; see the module docstring for the guarantees."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_for(self, session_id: str) -> Path:
        """The file of `session_id`; SessionMissing for an id that cannot be a file name here."""
        if not isinstance(session_id, str) or not _SAFE_ID.fullmatch(session_id):
            raise SessionMissing(f"no stored session has the id {session_id!r}")
        return self.root / f"{session_id}{SUFFIX}"

    def exists(self, session_id: str) -> bool:
        try:
            return self.path_for(session_id).is_file()
        except SessionMissing:
            return False

    def read(self, session_id: str) -> dict[str, Any]:
        """The stored JSON object; SessionMissing or SessionUnreadable (naming the file and the reason)."""
        path = self.path_for(session_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SessionMissing(f"no stored session has the id {session_id!r} (looked in {self.root})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SessionUnreadable(session_id, path, str(exc)) from None
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SessionUnreadable(session_id, path, f"not valid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise SessionUnreadable(session_id, path, "not a JSON object")
        return record

    def write(self, session_id: str, record: Mapping[str, Any]) -> None:
        """Replace the session's file atomically; StoreError naming the directory on failure."""
        path = self.path_for(session_id)
        data = json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8")
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            # mkstemp creates the file with mode 0600: conversations are the user's own.
            fd, temp = tempfile.mkstemp(dir=self.root, prefix=f".{session_id}.", suffix=".tmp")
        except OSError as exc:
            raise StoreError(f"cannot save session {session_id!r} in {self.root}: {exc}") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp, path)
        except OSError as exc:
            _remove_quietly(temp)
            raise StoreError(f"cannot save session {session_id!r} in {self.root}: {exc}") from None

    def delete(self, session_id: str) -> None:
        path = self.path_for(session_id)
        try:
            path.unlink()
        except FileNotFoundError:
            raise SessionMissing(f"no stored session has the id {session_id!r} (looked in {self.root})") from None
        except OSError as exc:
            raise StoreError(f"cannot delete session {session_id!r} from {self.root}: {exc}") from None

    def ids(self) -> list[str]:
        """Ids of every session file in the directory (temporary files of unfinished writes left out)."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot list the sessions in {self.root}: {exc}") from None
        ids = [name[: -len(SUFFIX)] for name in names if name.endswith(SUFFIX) and not name.startswith(".")]
        return sorted(i for i in ids if _SAFE_ID.fullmatch(i))

    def scan(self) -> Iterator[tuple[str, dict[str, Any] | SessionUnreadable]]:
        """Every stored session: (id, record), or (id, the error) for a file that cannot be read.
        A file removed by another process while scanning is skipped."""
        for session_id in self.ids():
            try:
                yield session_id, self.read(session_id)
            except SessionMissing:
                continue
            except SessionUnreadable as exc:
                yield session_id, exc


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
