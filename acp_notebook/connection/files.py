"""File access on an agent's behalf (``fs/read_text_file``, ``fs/write_text_file``): what is allowed.

The rules, checked on every request:

- the path is absolute and, once every symlink in it is resolved, inside one of the session's
  roots (its cwd and additional directories). The check is repeated on the file actually opened
  (through ``/proc/self/fd`` where there is one), so a symlink swapped in between the check and
  the open cannot lead outside; the last component is opened with ``O_NOFOLLOW``;
- only regular files: devices, FIFOs and sockets are refused (opening is non-blocking, so a FIFO
  with no writer cannot stall anything);
- files and contents over ``FILE_LIMIT`` bytes are refused (an answer must fit in one frame,
  JSON escapes included);
- writes never replace a notebook (``*.ipynb``) unless the agent was started with
  ``notebook_writes=True``, and never the notebook this kernel runs, even then. The kernel
  cannot know which notebooks a front end has open (several tabs, paths relative to a server
  root it does not see), and a write under an open notebook is lost or clobbers the user's
  edits at the next save; so every notebook is refused by default;
- a write to a file with other hard links is refused: they may be outside the roots.

Refusals raise ``FileRefused`` with a message naming the rule; the client turns it into the
error answer. The functions here do blocking file I/O and touch no shared state: the client
runs them on a worker thread, off the event loop.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["FILE_LIMIT", "FileRefused", "kernel_notebooks", "read_text", "write_text"]

# Largest file read, or content written, on an agent's behalf: 8 MiB keeps the answer under the
# 50 MiB frame limit even if every character needs a six-byte JSON escape.
FILE_LIMIT = 8 * 1024 * 1024

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class FileRefused(Exception):
    """A request the rules refuse; ``code`` is the JSON-RPC error code to answer with."""

    def __init__(self, message: str, *, code: int, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.data = data or {}


def _invalid(message: str, **data: Any) -> FileRefused:
    from .._protocol import INVALID_PARAMS

    return FileRefused(message, code=INVALID_PARAMS, data=data)


def confined(raw: Any, roots: Sequence[str]) -> Path:
    """``raw`` resolved through its symlinks, if that lies inside one of ``roots``; else FileRefused."""
    if not isinstance(raw, str) or not os.path.isabs(raw):
        raise _invalid(f"path must be absolute, got {raw!r}", path=raw)
    resolved = Path(raw).resolve()
    _check_inside(raw, resolved, roots)
    return resolved


def _check_inside(raw: str, resolved: Path, roots: Sequence[str]) -> None:
    real_roots = [Path(root).resolve() for root in roots]
    if not any(resolved == root or resolved.is_relative_to(root) for root in real_roots):
        raise _invalid(f"{raw} is outside the session's directories", path=raw,
                       allowed=[str(root) for root in real_roots])


def _opened_path(fd: int, fallback: Path) -> Path:
    """Where an open file really is (Linux: its /proc/self/fd link), to check the file actually opened."""
    link = f"/proc/self/fd/{fd}"
    try:
        return Path(os.readlink(link))
    except OSError:
        return fallback


def _open_checked(raw: str, path: Path, roots: Sequence[str], flags: int) -> int:
    """Open ``path`` without following a final symlink or blocking; refuse anything but a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        pass  # a file to create, or one that is gone: the open below says which
    else:
        if not stat.S_ISREG(mode):  # said before opening: a FIFO opened for writing would only say ENXIO
            raise _invalid(f"{raw} is not a regular file ({_file_kind(mode)})", path=raw)
    try:
        fd = os.open(path, flags | _OPEN_FLAGS, 0o666)
    except FileNotFoundError:
        from .._protocol import RESOURCE_NOT_FOUND

        raise FileRefused(f"{raw} does not exist", code=RESOURCE_NOT_FOUND, data={"path": raw}) from None
    except OSError as exc:
        raise _invalid(f"{raw} cannot be opened: {exc.strerror or exc}", path=raw) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _invalid(f"{raw} is not a regular file ({_file_kind(info.st_mode)})", path=raw)
        _check_inside(raw, _opened_path(fd, path), roots)
        if info.st_size > FILE_LIMIT:
            raise _too_large(raw, info.st_size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _too_large(raw: str, size: int) -> FileRefused:
    return _invalid(f"{raw} is {_size(size)}, over the {_size(FILE_LIMIT)} limit for files read or written on an "
                    "agent's behalf", path=raw, size=size, limit=FILE_LIMIT)


def read_text(raw: Any, roots: Sequence[str], line: Any = None, limit: Any = None) -> str:
    """The text of a file inside ``roots`` (invalid UTF-8 replaced), or lines ``line``.. (1-based) of it."""
    path = confined(raw, roots)
    fd = _open_checked(raw, path, roots, os.O_RDONLY)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(FILE_LIMIT + 1)
    if len(data) > FILE_LIMIT:  # it grew after the check
        raise _too_large(raw, len(data))
    text = data.decode("utf-8", errors="replace")
    if line is None and limit is None:
        return text
    try:
        start = max(int(line or 1) - 1, 0)
        end = start + int(limit) if limit is not None else None
    except (TypeError, ValueError):
        raise _invalid(f"line and limit must be integers, got {line!r} and {limit!r}", path=raw) from None
    return "".join(text.splitlines(keepends=True)[start:end])


def write_text(raw: Any, roots: Sequence[str], content: Any, *, notebooks: bool,
               protected: Sequence[Path] = ()) -> None:
    """Write ``content`` to a file inside ``roots`` (parents made), within the rules of the module docstring."""
    path = confined(raw, roots)
    if not isinstance(content, str):
        raise _invalid("content must be a string", path=raw)
    data = content.encode("utf-8")
    if len(data) > FILE_LIMIT:
        raise _too_large(raw, len(data))
    _check_notebook(raw, path, notebooks, protected)
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_inside(raw, path.parent.resolve() / path.name, roots)  # the parents as they are now
    fd = _open_checked(raw, path, roots, os.O_WRONLY | os.O_CREAT)
    try:
        if os.fstat(fd).st_nlink > 1:
            raise _invalid(f"{raw} has other hard links, which may be outside the session's directories", path=raw)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _check_notebook(raw: str, path: Path, allowed: bool, protected: Sequence[Path]) -> None:
    if path.suffix.lower() != ".ipynb":
        return
    if any(path == notebook for notebook in protected):
        raise _invalid(f"{raw} is the notebook this kernel runs: an agent never writes it", path=raw)
    if not allowed:
        raise _invalid(f"{raw} is a notebook: agents may not write notebooks (one open in Jupyter would be "
                       "overwritten or lost at its next save); start the agent with notebook_writes=True to allow it",
                       path=raw)


def kernel_notebooks() -> list[Path]:
    """The notebook(s) this kernel runs, as far as it can tell: Jupyter server's ``JPY_SESSION_NAME``
    and the ``__session__`` / ``__vsc_ipynb_file__`` names front ends set in the user namespace."""
    names: list[str] = [os.environ.get("JPY_SESSION_NAME", "")]
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    if shell is not None:
        names += [str(shell.user_ns.get(key) or "") for key in ("__session__", "__vsc_ipynb_file__")]
    found: list[Path] = []
    for name in names:
        if not name.lower().endswith(".ipynb"):
            continue
        # Jupyter server gives the path relative to its root, which the kernel does not know; the
        # kernel starts in the notebook's directory, so its own file name there is the best guess.
        candidates = [Path(name)] if os.path.isabs(name) else [Path.cwd() / name, Path.cwd() / Path(name).name]
        found += [candidate.resolve() for candidate in candidates]
    return found


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"
