"""Per-trial workspaces: a fresh copy of a directory for each trial, a shell command run in it, and its diff.

A trial whose sample names a workspace (the sweep's ``workspace=`` or the sample's ``workspace``
field) gets its own directory under the sweep's workspace root: a ``git worktree`` of HEAD when the
source is the top of a git repository with a commit, else a copy (``cp --reflink=auto``, so a
copy-on-write clone where the filesystem offers one), else an empty directory for a sample whose
``workspace`` field is empty. What changed is measured against the state the agent was given (after
``setup``): ``git diff`` between two trees for worktrees (objects written to a private object
directory, so the user's repository gains nothing), a difflib unified diff for copies.

Everything here runs in the process that executes the trial (the notebook's, or a Ray worker's), on
its background loop; file work is done in worker threads through ``asyncio.to_thread``, commands as
subprocesses in their own process group (killed as a group on timeout). A ``Workspace`` belongs to
one trial and is touched by that trial's task alone.

Process-wide: ``_LOCKS``, one asyncio lock per source repository, so that worktrees of one
repository are added and removed one at a time (git's own lock would fail the others); an entry is
made on first use of its repository (on the sweep's loop) and kept for the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import difflib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sandbox import Sandbox

__all__ = ["COMMAND_SANDBOX", "CommandResult", "Workspace", "WorkspaceError", "WorkspaceSettings", "directory_size",
           "empty_folder", "git_head", "remove_entry", "run_command", "workspace_method"]

OUTPUT_LIMIT = 64 * 1024   # bytes of a command's output kept (the tail)
DIFF_FILE_LIMIT = 2 * 1024 * 1024  # larger files are named in a diff, not compared line by line
# A file whose time is this close to the snapshot is compared by content: the kernel stamps files with a coarse
# clock (a tick of 4-10 ms), so a later write within the same tick could leave size and time unchanged.
RACY_WINDOW_NS = 20_000_000
EMPTY = ""  # a sample's ``workspace`` field that asks for an empty directory
_SKIP = {".git"}  # never part of a copy's diff


# The sandbox a trial's commands run in (sandbox="bwrap"), set by the trial around its checks, so command checks
# and task tests run in it without each check being handed it; None: commands run unsandboxed.
COMMAND_SANDBOX: contextvars.ContextVar[Sandbox | None] = contextvars.ContextVar("command_sandbox",
                                                                                 default=None)


class WorkspaceError(Exception):
    """A workspace could not be made, set up or measured; the message says which step and why."""


@dataclass(frozen=True)
class WorkspaceSettings:
    """How a sweep makes workspaces; plain data, the same on every worker."""

    root: str | None = None        # where trial workspaces are made; None: a temporary directory per process
    setup: str | None = None       # a shell command run in each workspace before the session opens
    setup_timeout: float = 600.0
    keep: bool = False             # keep workspaces after grading
    keep_sessions: bool = False    # keep the trials' sessions in the agent's list


@dataclass
class CommandResult:
    """A finished (or timed-out) command: exit code (None on timeout), the tail of its output, its duration."""

    command: str
    exit_code: int | None
    output: str
    duration_s: float
    timed_out: bool = False

    def summary(self, limit: int = 4000) -> str:
        head = (f"timed out after {self.duration_s:.1f} s" if self.timed_out else f"exit {self.exit_code}")
        tail = self.output[-limit:]
        return f"{head}\n{tail}".rstrip() if tail.strip() else head


def tool_path() -> str:
    """PATH with this interpreter's directory first, so ``python``/``pytest`` in a check are the sweep's own."""
    here = os.path.dirname(sys.executable)
    return os.pathsep.join([here, os.environ.get("PATH", "")])


async def run_command(command: str, cwd: str | os.PathLike[str], *, timeout: float | None,
                      env: Mapping[str, str] | None = None, sandbox: Sandbox | None = None,
                      inside: str | None = None) -> CommandResult:
    """Run ``command`` in a shell in ``cwd``, its own process group; on timeout the whole group is killed.

    In ``sandbox`` (default: the trial's, COMMAND_SANDBOX) the shell runs under bwrap, in ``inside`` (the path
    ``cwd`` is mounted at there; default ``cwd`` itself); killing the group ends bwrap and so the sandbox."""
    started = time.monotonic()
    full_env = {**os.environ, "PATH": tool_path(), **(env or {})}
    sandbox = sandbox if sandbox is not None else COMMAND_SANDBOX.get()
    if sandbox is None:
        argv = ["/bin/sh", "-c", command]
    else:
        argv = await asyncio.to_thread(sandbox.argv, ["/bin/sh", "-c", command], cwd=inside or os.fspath(cwd),
                                       home=full_env.get("HOME"))
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=os.fspath(cwd), env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True)
    chunks = bytearray()

    async def drain() -> None:
        assert process.stdout is not None
        while piece := await process.stdout.read(65536):
            chunks.extend(piece)
            if len(chunks) > 2 * OUTPUT_LIMIT:
                del chunks[:-OUTPUT_LIMIT]

    reader = asyncio.ensure_future(drain())
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(process.wait()), timeout)
    except asyncio.TimeoutError:
        timed_out = True
    finally:
        if process.returncode is None:
            _kill_group(process.pid)
            await process.wait()
        # A grandchild that kept the pipe open is in the same group, so it is gone too; the reader ends.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(reader, 5)
        reader.cancel()
    text = bytes(chunks[-OUTPUT_LIMIT:]).decode("utf-8", "replace")
    return CommandResult(command, None if timed_out else process.returncode, text, time.monotonic() - started,
                         timed_out)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _git(args: list[str], cwd: str | os.PathLike[str], env: Mapping[str, str] | None = None,
         check: bool = True, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=os.fspath(cwd), capture_output=True, text=True, input=stdin,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}, check=False)
    if check and done.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args[:2])} failed in {cwd}: {done.stderr.strip()[-500:]}")
    return done.stdout


def git_head(source: str | os.PathLike[str]) -> str | None:
    """HEAD's commit when ``source`` is the top of a git repository with one, else None."""
    if not (Path(source) / ".git").exists() or shutil.which("git") is None:
        return None
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=os.fspath(source),
                          capture_output=True, text=True, check=False)
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=os.fspath(source), capture_output=True,
                         text=True, check=False)
    if done.returncode != 0 or Path(top.stdout.strip()).resolve() != Path(source).resolve():
        return None
    return done.stdout.strip() or None


def workspace_method(source: str) -> str:
    """How a trial's copy of ``source`` is made: "empty", "worktree" or "copy"."""
    if source == EMPTY:
        return "empty"
    return "worktree" if git_head(source) else "copy"


def directory_size(path: str | os.PathLike[str], limit: int, *, skip_git: bool = False) -> int:
    """The bytes of the files under ``path``, counting stops just past ``limit`` (enough to refuse it)."""
    total = 0
    for folder, dirs, files in os.walk(path):
        if skip_git and ".git" in dirs:
            dirs.remove(".git")
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
        if total > limit:
            return total
    return total


# --- snapshots and the copies' diff -----------------------------------------------------------
Stat = tuple[int, int]  # (size, mtime_ns): what says a file is unchanged without reading it


def snapshot(root: Path) -> dict[str, Stat]:
    """Every regular file or symlink under ``root`` (relative path -> size, mtime), ``.git`` left out."""
    found: dict[str, Stat] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        for name in files:
            full = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                info = os.lstat(full)
                found[os.path.relpath(full, root)] = (info.st_size, info.st_mtime_ns)
    return found


def _read(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        if path.is_symlink():
            return ("-> " + os.readlink(path)).encode()
        return path.read_bytes() if path.stat().st_size <= DIFF_FILE_LIMIT else b"\0(large file)"
    except OSError:
        return None


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def file_diff(relative: str, old: bytes | None, new: bytes | None) -> str:
    """One file's unified diff (``a/``, ``b/``, /dev/null for added or deleted); binary files named only."""
    left = f"a/{relative}" if old is not None else "/dev/null"
    right = f"b/{relative}" if new is not None else "/dev/null"
    old_lines, new_lines = _text(old or b""), _text(new or b"")
    if old_lines is None or new_lines is None:
        return f"Binary files {left} and {right} differ\n"
    lines = list(difflib.unified_diff(old_lines, new_lines, left, right))
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


@dataclass
class Workspace:
    """One trial's directory, how it was made, and what it started as (for the diff)."""

    path: Path
    source: str
    method: str
    commit: str | None = None
    start: dict[str, Stat] = field(default_factory=dict)
    saved: Path | None = None            # copies of files setup changed: their starting content
    removed_by_setup: set[str] = field(default_factory=set)
    start_tree: str | None = None        # worktrees: the tree the agent was given
    started_ns: int = 0
    in_slot: bool = False                # made in a sandbox slot's folder: emptied at the end, never removed

    # --- making one ---------------------------------------------------------------------------
    @classmethod
    async def create(cls, source: str, root: Path, name: str) -> Workspace:
        root.mkdir(parents=True, exist_ok=True)
        path = root / name
        method = workspace_method(source)
        workspace = cls(path, source, method)
        if path.exists():  # kept by an earlier attempt or run of the same trial (keep_workspaces=True)
            await workspace.remove()
        if method == "empty":
            path.mkdir()
        elif method == "worktree":
            workspace.commit = git_head(source)
            async with _repo_lock(source):
                await asyncio.to_thread(_git, ["worktree", "add", "--detach", "--quiet", str(path),
                                               workspace.commit or "HEAD"], source)
        else:
            await asyncio.to_thread(_copy_tree, Path(source), path)
        return workspace

    @classmethod
    async def fill(cls, source: str, folder: Path) -> Workspace:
        """A trial's copy made inside ``folder``, an existing empty folder a living sandbox has bound (a slot's):
        the folder itself stays, only its content is the trial's (``remove`` empties it again)."""
        method = workspace_method(source)
        workspace = cls(folder, source, method, in_slot=True)
        if method == "worktree":
            workspace.commit = git_head(source)
            async with _repo_lock(source):  # git accepts an empty folder as a new worktree's place
                await asyncio.to_thread(_git, ["worktree", "add", "--detach", "--quiet", str(folder),
                                               workspace.commit or "HEAD"], source)
        elif method == "copy":
            await asyncio.to_thread(_copy_tree, Path(source), folder)
        return workspace

    async def keep_at(self, target: Path) -> None:
        """Copy a slot's workspace to ``target`` (kept after the trial) before the slot is emptied: a copy, not a
        move, so nothing the slot's agent still holds open is in it; a worktree's registration follows it."""
        if target.exists():
            await asyncio.to_thread(_remove_tree, target)
        target.mkdir(parents=True)
        await asyncio.to_thread(_copy_tree, self.path, target)
        if self.method == "worktree":
            async with _repo_lock(self.source):
                await asyncio.to_thread(_git, ["worktree", "repair", str(target)], self.source, None, False)

    async def mark_start(self, *, after_setup: bool) -> None:
        """Record what the agent is given: each file's size and time, and for worktrees the tree too."""
        if self.method == "worktree":
            self.start_tree = await asyncio.to_thread(self._tree) if after_setup else \
                (await asyncio.to_thread(_git, ["rev-parse", "HEAD^{tree}"], self.path)).strip()
        current = await asyncio.to_thread(snapshot, self.path)
        if after_setup and self.method == "copy":
            await asyncio.to_thread(self._save_setup_changes, current)
        self.start = current
        self.started_ns = time.time_ns()

    def _save_setup_changes(self, current: dict[str, Stat]) -> None:
        """Files setup added or changed keep their post-setup content beside the workspace, for the diff."""
        original = snapshot(Path(self.source))
        self.removed_by_setup = set(original) - set(current)
        changed = [rel for rel, stat in current.items() if original.get(rel) != stat]
        if changed:
            self.saved = self.path.with_name(self.path.name + ".start")
            for rel in changed:
                target = self.saved / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self.path / rel, target, follow_symlinks=False)

    # --- what changed -------------------------------------------------------------------------
    async def diff(self) -> tuple[str, int]:
        """The unified diff of the workspace against its start, and how many files it touches."""
        if self.method == "worktree":
            return await asyncio.to_thread(self._git_diff)
        return await asyncio.to_thread(self._copy_diff)

    def _object_env(self) -> dict[str, str]:
        """New git objects go to a directory of the trial's own; the repository's objects are read alongside."""
        common = Path(_git(["rev-parse", "--git-common-dir"], self.path).strip())
        common = common if common.is_absolute() else (self.path / common)
        objects = self.path.with_name(self.path.name + ".objects")
        objects.mkdir(exist_ok=True)
        return {"GIT_OBJECT_DIRECTORY": str(objects), "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(common / "objects")}

    def _tree(self) -> str:
        """The workspace as it is now, as a tree object (in the trial's own object directory)."""
        env = self._object_env()
        _git(["add", "--all", "."], self.path, env)
        return _git(["write-tree"], self.path, env).strip()

    def _changed(self) -> list[str]:
        """Paths whose size or time differs from the start (or whose time is too close to it to tell)."""
        now = snapshot(self.path)
        return [relative for relative in sorted(set(now) | set(self.start))
                if self.start.get(relative) != now.get(relative)
                or (relative in now and now[relative][1] >= self.started_ns - RACY_WINDOW_NS)]

    def _git_diff(self) -> tuple[str, int]:
        """``git diff`` of the starting tree against the index, once the changed paths are added to it. Only
        those paths are handed to git: with second-granular index times it would otherwise re-read every file
        of a fresh checkout ("racily clean") to find the few that changed."""
        changed = self._changed()
        if not changed:
            return "", 0
        env = self._object_env()
        _git(["add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul"], self.path, env,
             stdin="\0".join(changed))
        base = self.start_tree or "HEAD"
        names = _git(["diff", "--cached", "--name-only", "--no-renames", base], self.path, env)
        text = _git(["-c", "core.quotepath=off", "diff", "--cached", "--no-color", "--no-ext-diff", "--no-renames",
                     base], self.path, env)
        return text, len([n for n in names.splitlines() if n.strip()])

    def _baseline(self, relative: str) -> Path | None:
        if self.saved is not None and (self.saved / relative).exists():
            return self.saved / relative
        if relative in self.removed_by_setup or self.method == "empty":
            return None
        return Path(self.source) / relative

    def _copy_diff(self) -> tuple[str, int]:
        parts: list[str] = []
        for relative in self._changed():
            old = _read(self._baseline(relative)) if relative in self.start else None
            new = _read(self.path / relative) if os.path.lexists(self.path / relative) else None
            if old != new:
                parts.append(file_diff(relative, old, new))
        return "".join(parts), len(parts)

    # --- the end ------------------------------------------------------------------------------
    async def remove(self) -> None:
        """Delete the copy (and what was kept beside it); a worktree's registration goes with ``worktree prune``
        (``worktree remove`` would first re-read every file to look for changes). A slot's folder is emptied,
        not removed: a sandbox holds it."""
        if self.in_slot:
            await asyncio.to_thread(empty_folder, self.path)
        for path in ((() if self.in_slot else (self.path,)) + (self.path.with_name(self.path.name + ".start"),
                                                                self.path.with_name(self.path.name + ".objects"))):
            if path.exists():
                await asyncio.to_thread(_remove_tree, path)
        if self.method == "worktree":
            async with _repo_lock(self.source):
                await asyncio.to_thread(_git, ["worktree", "prune"], self.source, None, False)


_LOCKS: dict[str, asyncio.Lock] = {}


def _repo_lock(source: str) -> asyncio.Lock:
    """Worktrees of one repository are added and removed one at a time (git locks its admin files)."""
    return _LOCKS.setdefault(os.path.realpath(source), asyncio.Lock())


def _copy_tree(source: Path, target: Path) -> None:
    """``cp -a --reflink=auto`` (a copy-on-write clone where the filesystem offers it), else shutil. A link already
    in ``target`` is replaced, never written through (a slot's process could have made one there)."""
    cp = shutil.which("cp")
    if cp is not None and sys.platform.startswith("linux"):
        done = subprocess.run([cp, "-a", "--reflink=auto", "--remove-destination", f"{source}/.", str(target)],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        raise WorkspaceError(f"copying {source} failed: {done.stderr.strip()[-500:]}")
    shutil.copytree(source, target, symlinks=True)


def empty_folder(path: Path) -> None:
    """Remove everything in ``path``, keeping ``path`` itself."""
    with os.scandir(path) as entries:
        for entry in list(entries):
            remove_entry(entry)


def remove_entry(entry: os.DirEntry[str]) -> None:
    """Remove a file, link or whole folder (one an agent made read-only too: write permission is given back on
    each folder first)."""
    if not entry.is_dir(follow_symlinks=False):
        os.unlink(entry.path)
        return
    for folder, dirs, _ in os.walk(entry.path):
        for name in (".", *dirs):
            with contextlib.suppress(OSError):
                if not os.path.islink(os.path.join(folder, name)):
                    os.chmod(os.path.join(folder, name), 0o700)
    _remove_tree(Path(entry.path))


def _remove_tree(path: Path) -> None:
    def unlock(function: Any, name: str, _: Any) -> None:  # read-only files (git objects) in a workspace
        with contextlib.suppress(OSError):
            os.chmod(name, 0o700)
            function(name)

    shutil.rmtree(path, onerror=unlock)


def temporary_root() -> Path:
    """A directory for one process's workspaces when the sweep has no run directory."""
    return Path(tempfile.mkdtemp(prefix="acp-notebook-workspaces-"))
