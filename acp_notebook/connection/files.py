"""File access on an agent's behalf (``fs/read_text_file``, ``fs/write_text_file``): what is allowed.

The rules, checked on every request:

- the path is a string, absolute, with no NUL byte, encodable as a file name, at most
  ``PATH_LIMIT`` bytes long with no name in it over ``NAME_LIMIT`` bytes; once every symlink in
  it is resolved (a loop of symlinks is refused), it lies inside one of the session's roots (its
  cwd and additional directories);
- the file is reached by walking that resolved path from its root one folder at a time, each
  opened relative to the one before with ``O_NOFOLLOW | O_DIRECTORY``; a write's missing folders
  are made with ``mkdir`` relative to their parent's descriptor, and the file is opened with
  ``O_NOFOLLOW`` relative to its folder's. A folder or file swapped for a symlink after the check
  is refused, never followed, so nothing is read, made or written outside the roots whatever is
  swapped when (the walk starts at a root the user chose, and never goes up). The file actually
  opened is checked once more where ``/proc/self/fd`` says where it is;
- only regular files: devices, FIFOs and sockets are refused (opening is non-blocking, so a FIFO
  with no writer cannot stall anything);
- files and contents over ``FILE_LIMIT`` bytes are refused (an answer must fit in one frame,
  JSON escapes included);
- writes never replace a notebook (``*.ipynb``) unless the agent was started with
  ``notebook_writes=True``, and never the notebook this kernel runs, even then. The kernel
  cannot know which notebooks a front end has open (several tabs, paths relative to a server
  root it does not see), and a write under an open notebook is lost or clobbers the user's
  edits at the next save; so every notebook is refused by default;
- a file with other hard links is neither read nor written unless every one of its names is in
  its own folder: another name may be outside the roots (a hard link made inside a root to a file
  outside it would otherwise be a way out).

Refusals raise ``FileRefused`` with a message naming the rule (the path in it spelled out by
``_visible.visible``); the client turns it into the error answer. The functions here do blocking
file I/O and touch no shared state: the client runs them on a worker thread, off the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._protocol import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND
from .._visible import visible

__all__ = ["FILE_LIMIT", "NAME_LIMIT", "PATH_LIMIT", "FileRefused", "kernel_notebooks", "read_text", "write_text"]

# Largest file read, or content written, on an agent's behalf: 8 MiB keeps the answer under the
# 50 MiB frame limit even if every character needs a six-byte JSON escape.
FILE_LIMIT = 8 * 1024 * 1024
# Linux's PATH_MAX (4096 with the closing NUL) and NAME_MAX, in bytes of the encoded name.
PATH_LIMIT = 4095
NAME_LIMIT = 255
# Entries of a file's folder looked through for its other hard links before it is refused.
LINK_SCAN_LIMIT = 10_000

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_SHOWN_CHARS = 120  # of an over-long path in a message


class FileRefused(Exception):
    """A request the rules refuse; ``code`` is the JSON-RPC error code to answer with."""

    def __init__(self, message: str, *, code: int, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.data = data or {}


def _invalid(message: str, **data: Any) -> FileRefused:
    return FileRefused(message, code=INVALID_PARAMS, data=_sendable(data))


def _missing(shown: str, raw: str) -> FileRefused:
    return FileRefused(f"{shown} does not exist", code=RESOURCE_NOT_FOUND, data=_sendable({"path": raw}))


def _sendable(data: dict[str, Any]) -> dict[str, Any]:
    """An answer's data with its strings spelled out: a path may hold a lone surrogate, which no JSON writer
    encodes as UTF-8 (the answer would never leave, and the agent would wait for it)."""
    return {key: visible(value) if isinstance(value, str) else
            [visible(item) if isinstance(item, str) else item for item in value] if isinstance(value, list) else value
            for key, value in data.items()}


@dataclass(frozen=True)
class _Target:
    """Where a request's path leads: its root, the names from there, the resolved path, and how to show it."""

    raw: str
    shown: str
    root: Path
    names: tuple[str, ...]
    resolved: Path


# --- the path as given -------------------------------------------------------------------------
def _checked_text(raw: Any) -> str:
    """``raw`` if it can name a file at all (a string, absolute, no NUL, encodable, within the length limits)."""
    if not isinstance(raw, str):
        raise _invalid(f"path must be a string, got {type(raw).__name__}", path=raw)
    shown = visible(raw)
    if not os.path.isabs(raw):
        raise _invalid(f"path must be absolute, got {shown!r}", path=raw)
    if "\x00" in raw:
        raise _invalid(f"{shown} holds a NUL byte (at character {raw.index(chr(0))}), which no file name can hold",
                       path=raw)
    try:
        encoded = os.fsencode(raw)
    except UnicodeError:
        raise _invalid(f"{shown} cannot be a file name: it holds characters no file name encodes", path=raw) from None
    if len(encoded) > PATH_LIMIT:
        raise _invalid(f"path is {len(encoded):,} bytes long, over the {PATH_LIMIT:,}-byte limit for a path: "
                       f"{_start_of(shown)}", path=_start_of(raw), size=len(encoded), limit=PATH_LIMIT)
    longest = max(encoded.split(b"/"), key=len)
    if len(longest) > NAME_LIMIT:
        raise _invalid(f"{_start_of(shown)} has a name {len(longest):,} bytes long, over the {NAME_LIMIT}-byte limit "
                       "for one name in a path", path=_start_of(raw), size=len(longest), limit=NAME_LIMIT)
    return raw


def _start_of(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def _locate(raw: Any, roots: Sequence[str]) -> _Target:
    """Where ``raw`` leads once its symlinks are resolved, if that is inside one of ``roots``; else FileRefused."""
    path = _checked_text(raw)
    shown = visible(path)
    try:
        resolved = Path(path).resolve()
    except RuntimeError:  # Python before 3.13 says a loop of symlinks this way
        raise _invalid(f"{shown} goes through a loop of symbolic links", path=raw) from None
    except OSError as exc:
        raise _invalid(f"{shown} cannot be resolved: {_reason(exc)}", path=raw) from None
    real_roots = _real(roots)
    for root in sorted(real_roots, key=lambda r: len(r.parts), reverse=True):  # the nearest root: fewest steps
        if resolved == root or resolved.is_relative_to(root):
            return _Target(path, shown, root, resolved.relative_to(root).parts, resolved)
    raise _invalid(f"{shown} is outside the session's directories", path=raw,
                   allowed=[str(root) for root in real_roots])


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it goes through a loop of symbolic links"
    if exc.errno == errno.ENAMETOOLONG:
        return "a name in it is too long for the file system"
    return exc.strerror or str(exc)


# --- the walk ----------------------------------------------------------------------------------
@contextlib.contextmanager
def _folder_of(target: _Target, *, create: bool) -> Iterator[int]:
    """A descriptor of the folder that holds the target's file, reached from its root without following a
    symlink; with ``create``, missing folders are made on the way. Closed on leaving."""
    if not target.names:
        raise _invalid(f"{target.shown} is not a regular file (a directory)", path=target.raw)
    try:
        fd = os.open(target.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise _invalid(f"{target.shown}: the session's directory {target.root} cannot be opened: {_reason(exc)}",
                       path=target.raw) from None
    try:
        for name in target.names[:-1]:
            inner = _open_folder(target, fd, name, create)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _open_folder(target: _Target, parent: int, name: str, create: bool) -> int:
    """The folder ``name`` in ``parent``, never through a symlink; made first when ``create`` and missing."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise _missing(target.shown, target.raw) from None
    except OSError as exc:
        raise _not_a_folder(target, parent, name, exc) from None
    try:
        os.mkdir(name, 0o777, dir_fd=parent)
    except FileExistsError:
        pass  # made meanwhile, maybe as something else: opened or refused below like any folder
    except OSError as exc:
        raise _invalid(f"{target.shown}: the folder {visible(name)} cannot be made: {_reason(exc)}",
                       path=target.raw) from None
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _not_a_folder(target, parent, name, exc) from None


def _not_a_folder(target: _Target, parent: int, name: str, exc: OSError) -> FileRefused:
    """Why ``name`` in ``parent`` could not be opened as a folder: a symlink swapped in, a file, or else."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        mode = None
    if mode is not None and stat.S_ISLNK(mode):
        return _swapped(target, parent, name)
    if mode is not None and not stat.S_ISDIR(mode):
        return _invalid(f"{target.shown} cannot be opened: {visible(name)} is not a folder", path=target.raw)
    return _invalid(f"{target.shown} cannot be opened: {_reason(exc)}", path=target.raw)


def _swapped(target: _Target, folder: int, name: str) -> FileRefused:
    """The refusal of a symlink met where the resolved path had none: a loop, or one put there since."""
    try:
        os.stat(name, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _invalid(f"{target.shown} goes through a loop of symbolic links", path=target.raw)
    return _invalid(f"{target.shown} changed while it was opened: {visible(name)} is a symbolic link now, "
                    "and it is not followed (it could lead outside the session's directories)", path=target.raw)


def _check_kind(target: _Target, folder: int) -> bool:
    """Whether the target's file exists; refused if it is not a regular file (said before opening: a FIFO
    opened for writing would only say ENXIO) or is a symlink swapped in after the check."""
    try:
        mode = os.stat(target.names[-1], dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _invalid(f"{target.shown} cannot be opened: {_reason(exc)}", path=target.raw) from None
    if stat.S_ISLNK(mode):
        raise _swapped(target, folder, target.names[-1])
    if not stat.S_ISREG(mode):
        raise _invalid(f"{target.shown} is not a regular file ({_file_kind(mode)})", path=target.raw)
    return True


def _opened(target: _Target, fd: int, roots: Sequence[str]) -> os.stat_result:
    """The checks on the file actually opened: its kind, where it is, its other names, its size."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _invalid(f"{target.shown} is not a regular file ({_file_kind(info.st_mode)})", path=target.raw)
    where = _opened_path(fd)
    if where is not None and not any(where == root or where.is_relative_to(root) for root in _real(roots)):
        raise _invalid(f"{target.shown} is outside the session's directories", path=target.raw)
    return info


def _real(roots: Sequence[str]) -> list[Path]:
    """The roots with their symlinks resolved; one that cannot be resolved leads nowhere."""
    found = []
    for root in roots:
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            found.append(Path(root).resolve())
    return found


def _opened_path(fd: int) -> Path | None:
    """Where an open file really is (Linux: its /proc/self/fd link); None where that cannot be told."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def _check_links(target: _Target, info: os.stat_result, folder: int, verb: str) -> None:
    """Refuse a file with other hard links unless all of its names are in its own folder."""
    if info.st_nlink <= 1:
        return
    here = 0
    with contextlib.suppress(OSError):  # a folder that cannot be listed shows no other name: refused below
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count >= LINK_SCAN_LIMIT:
                    break
                if entry.inode() != info.st_ino:
                    continue
                with contextlib.suppress(OSError):
                    seen = entry.stat(follow_symlinks=False)
                    here += seen.st_ino == info.st_ino and seen.st_dev == info.st_dev
    if here < info.st_nlink:
        raise _invalid(f"{target.shown} has other hard links, which may be outside the session's directories "
                       f"(only {here} of its {info.st_nlink} names are in its folder): it is not {verb} on an "
                       "agent's behalf", path=target.raw, links=info.st_nlink)


def _too_large(target: _Target, size: int) -> FileRefused:
    return _invalid(f"{target.shown} is {_size(size)}, over the {_size(FILE_LIMIT)} limit for files read or written "
                    "on an agent's behalf", path=target.raw, size=size, limit=FILE_LIMIT)


# --- reading and writing -----------------------------------------------------------------------
def read_text(raw: Any, roots: Sequence[str], line: Any = None, limit: Any = None) -> str:
    """The text of a file inside ``roots`` (invalid UTF-8 replaced), or lines ``line``.. (1-based) of it."""
    target = _locate(raw, roots)
    with _folder_of(target, create=False) as folder:
        if not _check_kind(target, folder):
            raise _missing(target.shown, target.raw)
        fd = _open_file(target, folder, os.O_RDONLY)
        try:
            info = _opened(target, fd, roots)
            _check_links(target, info, folder, "read")
            if info.st_size > FILE_LIMIT:
                raise _too_large(target, info.st_size)
        except BaseException:
            os.close(fd)
            raise
    with _io(target, "read"), os.fdopen(fd, "rb") as stream:
        data = stream.read(FILE_LIMIT + 1)
    if len(data) > FILE_LIMIT:  # it grew after the check
        raise _too_large(target, len(data))
    text = data.decode("utf-8", errors="replace")
    if line is None and limit is None:
        return text
    try:
        start = max(int(line or 1) - 1, 0)
        end = start + int(limit) if limit is not None else None
    except (TypeError, ValueError):
        raise _invalid(f"line and limit must be integers, got {line!r} and {limit!r}", path=raw) from None
    return "".join(text.splitlines(keepends=True)[start:end])


def _open_file(target: _Target, folder: int, flags: int) -> int:
    try:
        return os.open(target.names[-1], flags | _FILE_FLAGS, 0o666, dir_fd=folder)
    except FileNotFoundError:
        raise _missing(target.shown, target.raw) from None
    except FileExistsError:  # O_EXCL: made by someone else between the look and the open
        raise _invalid(f"{target.shown} changed while it was opened (it was made meanwhile); try again",
                       path=target.raw) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink put there after the check
            raise _swapped(target, folder, target.names[-1]) from None
        raise _invalid(f"{target.shown} cannot be opened: {_reason(exc)}", path=target.raw) from None


def write_text(raw: Any, roots: Sequence[str], content: Any, *, notebooks: bool,
               protected: Sequence[Path] = ()) -> None:
    """Write ``content`` to a file inside ``roots`` (folders made), within the rules of the module docstring."""
    target = _locate(raw, roots)
    if not isinstance(content, str):
        raise _invalid("content must be a string", path=raw)
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate came through the JSON
        raise _invalid("content cannot be written as UTF-8: it holds a lone surrogate", path=raw) from None
    if len(data) > FILE_LIMIT:
        raise _too_large(target, len(data))
    _check_notebook(target, notebooks, protected)
    with _folder_of(target, create=True) as folder:
        existed = _check_kind(target, folder)
        fd = _open_file(target, folder, os.O_WRONLY if existed else os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            info = _opened(target, fd, roots)
            _check_links(target, info, folder, "written")
        except BaseException:
            os.close(fd)
            if not existed:  # made by this call in a folder that has moved outside: taken back
                with contextlib.suppress(OSError):
                    os.unlink(target.names[-1], dir_fd=folder)
            raise
        try:
            with _io(target, "written"):
                os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)


@contextlib.contextmanager
def _io(target: _Target, verb: str) -> Iterator[None]:
    """A failure of the disk itself (full, an I/O error) as an internal error whose message and data can be
    sent, whatever the path holds."""
    try:
        yield
    except OSError as exc:
        raise FileRefused(f"{target.shown} could not be {verb}: {_reason(exc)}", code=INTERNAL_ERROR,
                          data=_sendable({"path": target.raw})) from None


def _check_notebook(target: _Target, allowed: bool, protected: Sequence[Path]) -> None:
    path, shown = target.resolved, target.shown
    if path.suffix.lower() != ".ipynb":
        return
    if any(path == notebook for notebook in protected):
        raise _invalid(f"{shown} is the notebook this kernel runs: an agent never writes it", path=target.raw)
    if not allowed:
        raise _invalid(f"{shown} is a notebook: agents may not write notebooks (one open in Jupyter would be "
                       "overwritten or lost at its next save); start the agent with notebook_writes=True to allow it",
                       path=target.raw)


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
