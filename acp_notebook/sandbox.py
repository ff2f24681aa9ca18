"""The bubblewrap sandbox an agent process (and a sweep's checks) can run in: the filesystem read-only except
the folders named writable, a private /tmp, the user's credential folders hidden, and optionally no network.

``Sandbox`` is plain picklable data (a Ray worker gets the same one); ``argv`` builds the ``bwrap`` command
line around a program (its /tmp a tmpfs, or a host folder the caller empties between a sweep slot's trials);
``wrap_spec`` turns an agent spec into one whose command runs inside it, its own state folders
(``AgentSpec.state_dirs``) writable. ``check_bwrap`` runs bwrap once per process to prove it can make
a sandbox here, and caches the answer (a lock guards it: callers may be on any thread).

What it is not: a VM or a container. The agent runs on the host's kernel as the same user; it can read
whatever that user can read outside the hidden folders, reach Unix sockets it can see, and use the network
unless ``network=False``. See the README's "Sandbox" section.

Process-wide: ``_checked``, whether bubblewrap works, by the program's path: checked once per
process (it starts a sandbox), made on first use, never emptied; ``_check_lock`` makes concurrent
first uses on several threads share one check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .errors import AcpError
from .kernel_tools.channel import channel_root
from .launch import AgentSpec, resolve_spec, spec_of

__all__ = ["HIDDEN", "SANDBOXES", "Sandbox", "SandboxUnavailable", "SandboxWrap", "agent_sandbox", "check_bwrap", "make_sandbox",
           "sandboxed_launch", "state_paths", "wrap_spec"]

# "bwrap": a sandbox per process; in a sweep, one sandboxed agent process per concurrency slot, writable only in
# the slot's folder, which holds the one trial the slot runs (sweep/slots.py);
# "bwrap-trial" (sweeps): a sandboxed agent process per trial, writable only in its own workspace;
# "bwrap-shared" (sweeps): one sandboxed process per agent, writable in every workspace of the sweep.
SANDBOXES = ("bwrap", "bwrap-trial", "bwrap-shared")
# Credential folders and files under HOME an agent never needs; each is replaced by an empty one inside.
HIDDEN = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".netrc", ".git-credentials",
          ".password-store", ".pypirc", ".npmrc", ".config/gh")
# Sockets that hand out the host (a container runtime's API is root on the host).
HIDDEN_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock")
INSTALL = ("install the bubblewrap package (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
           "bubblewrap; Arch: pacman -S bubblewrap)")
CHECK_TIMEOUT_S = 30.0


class SandboxUnavailable(AcpError):
    """``sandbox="bwrap"`` was asked for, but bubblewrap is not installed or cannot make a sandbox here."""


@dataclass(frozen=True)
class Sandbox:
    """Where a sandboxed process may write, and whether it keeps the network.

    ``writable``: host folders bound read-write at their own paths; ``mounts``: (host folder, path inside)
    pairs bound read-write elsewhere (a task's container paths); ``read_only_mounts`` likewise, read-only;
    ``hidden``: paths under HOME replaced by empty ones (None: ``HIDDEN``); ``masked``: absolute paths replaced
    by empty read-only ones, binds inside them still made (a sweep's run directory: other trials' workspaces and
    rows); ``tmp``: a host folder bound at /tmp instead of a tmpfs, so the caller can empty it while the
    process lives (a sweep's slot, between trials: sweep/slots.py).
    """

    kind: str = "bwrap"
    network: bool = True
    writable: tuple[str, ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()
    read_only_mounts: tuple[tuple[str, str], ...] = ()
    hidden: tuple[str, ...] | None = None
    masked: tuple[str, ...] = ()
    tmp: str | None = None

    def with_paths(self, writable: Iterable[str] = (), mounts: Iterable[tuple[str, str]] = (),
                   read_only_mounts: Iterable[tuple[str, str]] = ()) -> Sandbox:
        return replace(self, writable=(*self.writable, *writable), mounts=(*self.mounts, *mounts),
                       read_only_mounts=(*self.read_only_mounts, *read_only_mounts))

    def argv(self, command: Sequence[str], *, cwd: str | None = None, home: str | None = None) -> list[str]:
        """``bwrap ... -- command``: / read-only, a fresh /dev, /proc and /tmp, the credential folders hidden,
        the writable folders and mounts bound, no capabilities, its own pid namespace that dies with us."""
        private_tmp = ["--bind", os.path.realpath(self.tmp), "/tmp"] if self.tmp else ["--tmpfs", "/tmp"]
        args = [check_bwrap(), *self._root(), "--dev", "/dev", "--proc", "/proc", *private_tmp,
                "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--setenv", "TMPDIR", "/tmp", "--unsetenv", "SSH_AUTH_SOCK", "--unsetenv", "GPG_AGENT_INFO"]
        if not self.network:
            args.append("--unshare-net")
        home_dir = Path(home or os.path.expanduser("~"))
        for relative in (HIDDEN if self.hidden is None else self.hidden):
            args += _hide(home_dir / relative)
        for socket in HIDDEN_SOCKETS:
            args += _hide(Path(socket))
        writable = [os.path.realpath(p) for p in self.writable]
        masked = _outermost(path for path in (os.path.realpath(p) for p in self.masked if os.path.lexists(p))
                            if not any(_within(path, w) for w in writable))  # a writable folder stays as it is
        for path in masked:  # before the binds, so a workspace inside a masked folder is bound into the empty one
            args += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
        # After /tmp's tmpfs, so a folder under the host's /tmp (a workspace) is bound into the private one.
        for path in dict.fromkeys(os.path.realpath(p) for p in self.writable):
            args += ["--bind", path, path]
        for source, target in self.mounts:
            args += ["--bind", os.path.realpath(source), target]
        for source, target in self.read_only_mounts:
            args += ["--ro-bind", os.path.realpath(source), target]
        # The kernel tools' channels (under the host's /tmp or runtime folder): a sandboxed agent reaches its
        # notebook's kernel through the bridge, as any agent does; read-only, so it can remove none.
        kernel_channels = str(channel_root())
        args += ["--ro-bind", kernel_channels, kernel_channels]
        for path in masked:  # read-only once the binds inside are made (their mount points are made in it)
            if os.path.isdir(path):
                args += ["--remount-ro", path]
        if any(not os.path.lexists(target) for _, target in (*self.mounts, *self.read_only_mounts)):
            args += ["--remount-ro", "/"]  # the new root's own tmpfs: nothing but the mounts is writable
        if cwd is not None:
            args += ["--chdir", cwd]
        return [*args, "--", *command]

    def _root(self) -> list[str]:
        """/ read-only; when a mount goes where the host has nothing (a task's /app, /tests, /logs, /srv/app), a
        new root instead, holding the host's entries read-only, each folder on the way to such a mount made anew
        with the host's entries in it, so the missing folders can be made."""
        targets = [target for _, target in (*self.mounts, *self.read_only_mounts)]
        missing = [os.path.normpath(t) for t in targets if not os.path.lexists(t)]
        if not missing:
            return ["--ro-bind", "/", "/"]
        return _rebuilt("/", missing)

    @property
    def sweep_mode(self) -> str:
        """How a sweep gives trials their agents: "slot" (a sandboxed process per concurrency slot, its folder
        emptied between trials), "trial" (a process per trial) or "shared" (one per agent, every workspace
        writable)."""
        return {"bwrap-trial": "trial", "bwrap-shared": "shared"}.get(self.kind, "slot")

    def with_masks(self, paths: Iterable[str]) -> Sandbox:
        return replace(self, masked=tuple(dict.fromkeys((*self.masked, *paths))))

    def mount_points_in_tmp(self, home: str | None = None) -> list[str]:
        """Paths under /tmp (relative to it) where this sandbox mounts something: bwrap makes them in the folder
        bound at /tmp (``tmp``), and they must stay while the process lives (removing a mount point from the
        host would detach the mount inside)."""
        home_dir = Path(home or os.path.expanduser("~"))
        targets = [*self.writable, *(t for _, t in (*self.mounts, *self.read_only_mounts)), *self.masked,
                   str(channel_root()), *(str(home_dir / r) for r in (HIDDEN if self.hidden is None else self.hidden)),
                   *HIDDEN_SOCKETS]
        found = []
        for target in targets:
            real = os.path.realpath(target)
            if real != "/tmp" and real.startswith("/tmp/") and os.path.lexists(target):
                found.append(os.path.relpath(real, "/tmp"))
        return found

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "network": self.network}


def _rebuilt(folder: str, missing: Sequence[str]) -> list[str]:
    """``folder``'s entries bound read-only, except those on the way to a ``missing`` path, made as folders and
    filled the same way (/proc, /dev and /tmp at the top are the sandbox's own)."""
    args: list[str] = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if folder == "/" and entry.name in ("proc", "dev", "tmp"):
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        elif entry.is_dir() and any(m.startswith(entry.path + "/") for m in missing):
            args += ["--dir", entry.path, *_rebuilt(entry.path, missing)]
        else:
            args += ["--ro-bind", entry.path, entry.path]
    return args


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths that are not inside another of them (one empty folder hides what is inside it)."""
    unique = sorted(set(paths))
    return [p for p in unique if not any(p != q and _within(p, q) for q in unique)]


def _hide(path: Path) -> list[str]:
    """An empty read-only folder over a folder, /dev/null over a file (or a socket); nothing for a missing path."""
    if path.is_symlink() or not path.exists():
        return []
    if path.is_dir():
        return ["--tmpfs", str(path), "--remount-ro", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def make_sandbox(sandbox: Any, *, network: bool = True, where: str = "sandbox=") -> Sandbox | None:
    """None, "bwrap" or a Sandbox, checked: SandboxUnavailable where bwrap cannot run, ValueError for other
    words."""
    if sandbox is None or sandbox is False:
        if network is not True:
            raise ValueError(f"network=False cuts the network inside a sandbox: pass {where}'bwrap' too")
        return None
    if isinstance(sandbox, Sandbox):
        made = sandbox if network else replace(sandbox, network=False)
    elif sandbox in SANDBOXES:
        made = Sandbox(kind=str(sandbox), network=bool(network))
    else:
        raise ValueError(f"{where} is 'bwrap' (bubblewrap), 'bwrap-trial', 'bwrap-shared' or None, not {sandbox!r}")
    check_bwrap()
    return made


_checked: dict[str, str | SandboxUnavailable] = {}
_check_lock = threading.Lock()


def check_bwrap() -> str:
    """The path of a bwrap that can make a sandbox here (tried once per PATH), else SandboxUnavailable."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(f"the bwrap sandbox needs bubblewrap's `bwrap`, which is not on PATH: {INSTALL}",
                                 hint="")
    with _check_lock:
        if found not in _checked:
            _checked[found] = _try(found)
        answer = _checked[found]
    if isinstance(answer, SandboxUnavailable):
        raise answer
    return answer


def _try(bwrap: str) -> str | SandboxUnavailable:
    try:
        done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                               "--unshare-pid", "--cap-drop", "ALL", "--", "true"], capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxUnavailable(f"{bwrap} could not be run: {exc}; {INSTALL}", hint="")
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[-300:] or f"exit {done.returncode}"
        return SandboxUnavailable(
            f"{bwrap} cannot make a sandbox on this machine ({said})",
            hint="bubblewrap needs user namespaces: check `sysctl kernel.unprivileged_userns_clone` (Debian), "
                 "`kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 24.04+), or that a container you run in "
                 f"allows them; or reinstall it: {INSTALL}")
    return bwrap


def state_paths(spec: Any, env: Mapping[str, str] | None = None) -> list[str]:
    """An agent's own state folders and files (``AgentSpec.state_dirs``: ``~`` and ``$VAR`` expanded; entries
    naming an unset variable skipped), folders created so they can be bound; files only where they exist."""
    env = dict(os.environ if env is None else env)
    home = env.get("HOME") or os.path.expanduser("~")
    found: list[str] = []
    for entry in getattr(spec, "state_dirs", ()) or ():
        text = entry.replace("~", home, 1) if entry.startswith("~") else entry
        for name, value in env.items():
            text = text.replace(f"${{{name}}}", value).replace(f"${name}", value)
        if "$" in text or not os.path.isabs(text):
            continue
        path = Path(text)
        if path.suffix and not path.is_dir():  # a file such as ~/.claude.json: bound where it exists
            if path.is_file():
                found.append(str(path))
            continue
        path.mkdir(parents=True, exist_ok=True)
        found.append(str(path))
    return found


def agent_sandbox(spec: Any, sandbox: Sandbox, *, cwd: str, env: Mapping[str, str] | None = None,
                  writable_cwd: bool = True) -> Sandbox:
    """``sandbox`` as ``wrap_spec`` runs ``spec`` in it: its cwd (unless ``writable_cwd`` is False) and the agent's
    state folders added to the writable ones."""
    agent_env = {**os.environ, **(env or {})}
    return sandbox.with_paths([*([cwd] if writable_cwd else []), *state_paths(spec_of(spec), agent_env)])


def wrap_spec(spec: Any, sandbox: Sandbox, *, cwd: str, env: Mapping[str, str] | None = None,
              writable_cwd: bool = True) -> Any:
    """An AgentSpec that starts ``spec`` inside ``sandbox``: its cwd (unless ``writable_cwd`` is False) and its
    state folders writable. Registry facts (auth, key variables) are kept, so hints still name the agent."""
    name, argv, extra_env = resolve_spec(spec, env)
    base = spec_of(spec)
    agent_env = {**os.environ, **extra_env}
    full = agent_sandbox(spec, sandbox, cwd=cwd, env=extra_env, writable_cwd=writable_cwd)
    command = tuple(full.argv(argv, cwd=cwd, home=agent_env.get("HOME")))
    if base is None:
        return AgentSpec(name=name, command=command, env=extra_env)
    return replace(base, command=command, npm_package=None, args=(), cache_paths=())


@dataclass(frozen=True)
class SandboxWrap:
    """``Agent(wrap=...)`` for ``acpnb.start(sandbox=..., network=...)``: the agent's spec run under bubblewrap, its
    working directory writable (``sandboxed_launch``). Kept on the agent, so a relaunch is sandboxed alike."""

    sandbox: str | None
    network: bool = True

    def __call__(self, spec: Any, cwd: str, env: Mapping[str, str] | None) -> Any:
        return sandboxed_launch(spec, self.sandbox, network=self.network, cwd=cwd, env=env)


def sandboxed_launch(spec: Any, sandbox: Any, *, network: bool, cwd: str, env: Mapping[str, str] | None) -> Any:
    """What ``acpnb.start(spec, sandbox=..., network=...)`` launches: ``spec`` wrapped by ``wrap_spec``, its cwd
    writable. Only a process can be sandboxed: an agent object served in this process is refused."""
    made = make_sandbox(sandbox, network=network, where="acpnb.start(sandbox=)")
    if not isinstance(spec, (str, list, tuple, AgentSpec)):
        raise ValueError("sandbox= runs the agent's process under bubblewrap: give a registered name or a command "
                         f"line, not {type(spec).__name__} (an agent object runs inside this process)")
    assert made is not None
    return wrap_spec(spec, made, cwd=cwd, env=env)
