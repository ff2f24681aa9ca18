"""A task's environment without a container: what its Dockerfile asks for, and ``task_env="venv"``.

``read_dockerfile`` splits a task's ``environment/Dockerfile`` into what is emulated (its last
``WORKDIR``, mapped to the trial's workspace; the packages of its ``pip install`` commands) and the
instructions that are not (``FROM``, ``apt-get``, ``COPY``, ``ENV``...), which the sweep lists once.
``task_venv`` makes (once, then reuses) a virtualenv with those packages under the user's cache
folder, keyed by the Python version and the sorted requirements, for ``solve.sh`` and ``test.sh``.

``read_dockerfile`` runs on the caller's thread; ``task_venv`` in the trial (a worker thread does the
building), one build per key at a time: an asyncio lock within the process, a file lock across
processes (Ray workers, parallel sweeps).

Process-wide: ``_LOCKS``, one asyncio lock per virtualenv folder, so that trials of one process
never build the same environment at once; an entry is made on first use of its folder (on the
sweep's loop) and kept for the process (a handful of folders).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DockerfileFacts", "TASK_ENVS", "VenvError", "read_dockerfile", "task_venv", "venv_cache_dir"]

TASK_ENVS = ("venv",)
INSTALL_TIMEOUT_S = 900
# pip options that take a value (their value is not a requirement)
_VALUED = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
           "--find-links", "--target", "-t", "--prefix", "--root", "--platform", "--python-version", "-e",
           "--editable", "--trusted-host", "--cache-dir", "--progress-bar"}
_PIP = re.compile(r"^(?:(?:\S*/)?python3?(?:\.\d+)?\s+-m\s+)?(?:\S*/)?pip3?(?:\.\d+)?\s+install\s+(.*)$", re.DOTALL)


class VenvError(Exception):
    """A task's virtualenv could not be made (pip failed, or the index was out of reach)."""


@dataclass(frozen=True)
class DockerfileFacts:
    """What a Dockerfile asks for: the container's working directory, the pip requirements, and each
    instruction (or part of a RUN) that is not emulated."""

    workdir: str | None = None
    requirements: tuple[str, ...] = ()
    not_emulated: tuple[str, ...] = ()


def _instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\r?\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip()]


def _pip_requirements(command: str) -> list[str] | None:
    """The requirements of a ``pip install`` command, or None when it is not one (or needs a file: -r, -e)."""
    found = _PIP.match(command.strip())
    if found is None:
        return None
    try:
        words = shlex.split(found.group(1))
    except ValueError:
        return None
    requirements, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("-r", "--requirement", "-e", "--editable"):
            return None  # a file from the image's build context: not emulated
        elif word in _VALUED:
            skip = True
        elif not word.startswith("-"):
            requirements.append(word)
    return requirements


def read_dockerfile(path: str | os.PathLike[str]) -> DockerfileFacts:
    dockerfile = Path(path)
    if not dockerfile.is_file():
        return DockerfileFacts()
    workdir, requirements, other = None, [], []
    for instruction in _instructions(dockerfile.read_text(encoding="utf-8", errors="replace")):
        keyword, _, rest = instruction.partition(" ")
        keyword = keyword.upper()
        if keyword == "WORKDIR" and rest.strip().strip("\"'").startswith("/"):
            workdir = rest.strip().strip("\"'")
        elif keyword == "RUN":
            for command in re.split(r"\s*(?:&&|;)\s*", rest):
                pip = _pip_requirements(command)
                if pip is None:
                    other.append(f"RUN {command}")
                else:
                    requirements += pip
        else:
            other.append(instruction)
    return DockerfileFacts(workdir, tuple(dict.fromkeys(requirements)), tuple(other))


def venv_cache_dir() -> Path:
    """``$ACP_NOTEBOOK_TASK_VENVS``, else ``$XDG_CACHE_HOME/acp-notebook/task-venvs`` (~/.cache/...)."""
    explicit = os.environ.get("ACP_NOTEBOOK_TASK_VENVS")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "acp-notebook" / "task-venvs"


_LOCKS: dict[str, asyncio.Lock] = {}


async def task_venv(requirements: tuple[str, ...]) -> Path:
    """The virtualenv with ``requirements`` installed (made on first use, then reused across runs)."""
    key = hashlib.sha256(json.dumps([list(sys.version_info[:2]), sorted(requirements)]).encode()).hexdigest()[:16]
    folder = venv_cache_dir() / f"py{sys.version_info[0]}{sys.version_info[1]}-{key}"
    async with _LOCKS.setdefault(str(folder), asyncio.Lock()):
        if not (folder / ".complete").is_file():
            await asyncio.to_thread(_build, folder, requirements)
    return folder


def _build(folder: Path, requirements: tuple[str, ...]) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be making the same one
        try:
            if (folder / ".complete").is_file():
                return
            shutil.rmtree(folder, ignore_errors=True)  # a build that was cut off
            _run([sys.executable, "-m", "venv", str(folder)])
            if requirements:
                _run([str(folder / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                      *requirements])
            (folder / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
            (folder / ".complete").write_text("", encoding="utf-8")
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(lock, fcntl.LOCK_UN)


def _run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise VenvError(f"{' '.join(argv[-3:])} gave no result within {INSTALL_TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[-400:]
        raise VenvError(f"task_env='venv': {shlex.join(argv[2:])} failed: {said}")


def venv_env(folder: Path) -> dict[str, str]:
    """The environment a command runs with in the venv: its bin first on PATH, VIRTUAL_ENV set."""
    return {"VIRTUAL_ENV": str(folder), "PATH": f"{folder / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
