"""Check scorers: grades computed in a trial's workspace after its turn (a command's exit code, a file's text,
any function of the row and the workspace).

They run inside the trial, in the process that made the workspace (the notebook's, or a Ray worker's),
on its background loop, before the workspace is deleted; their scores reach the sweep in the row. A
check that cannot grade (a command that times out, a task whose tests wrote no reward) raises
``CheckError``: the row becomes an error row, never a fail. Check objects are plain picklable data.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .score import Score, Scorer, check_name, to_score
from .workspace import run_command

__all__ = ["CheckError", "Command", "FileContains", "WorkspaceCallable", "WorkspaceScorer", "command",
           "file_contains", "takes_workspace"]

DEFAULT_CHECK_TIMEOUT = 120.0


class CheckError(Exception):
    """A check that could not grade the trial; the row is recorded as an error with this message."""


class WorkspaceScorer(Scorer):
    """A scorer that needs the trial's workspace; ``check(row, workspace)`` runs after the turn."""

    async def check(self, row: Mapping[str, Any], workspace: Path) -> Score:
        raise NotImplementedError

    async def ascore(self, row: Mapping[str, Any], context: Any) -> Score:
        # Reached only for a row scored after its trial ended (its workspace is gone).
        return Score(None, f"{self.name} runs in the trial's workspace; run the trial again to grade it")

    def score(self, row: Mapping[str, Any]) -> Any:
        return None, f"{self.name} runs in the trial's workspace"

    def shipped_paths(self) -> list[str]:
        """Folders besides the workspace this check reads, which a Ray worker gets a copy of (shipping.py)."""
        return []

    def with_paths(self, local: Callable[[str], str | None]) -> WorkspaceScorer:
        """This check reading the worker's copies (``local`` maps a caller's path to one)."""
        return self

    def workdir_for(self, sample_id: str) -> str | None:
        """The container path a task expects its workspace at (a task's WORKDIR), mounted there in a sandbox."""
        return None


class Command(WorkspaceScorer):
    """1 when ``command`` exits 0 in the workspace, 0 otherwise; its output is the explanation."""

    def __init__(self, command: str, *, timeout: float | None = DEFAULT_CHECK_TIMEOUT, name: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        if not isinstance(command, str) or not command.strip():
            raise ValueError(f"command() takes a shell command such as 'pytest -q', not {command!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or timeout <= 0):
            raise ValueError(f"command(timeout=) is a number of seconds > 0 (or None), not {timeout!r}")
        self.command = command
        self.timeout = None if timeout is None else float(timeout)
        self.env = dict(env or {})
        self.name = check_name(name if name is not None else _name_of(command))

    async def check(self, row: Mapping[str, Any], workspace: Path) -> Score:
        result = await run_command(self.command, workspace, timeout=self.timeout, env=self.env)
        if result.timed_out:
            raise CheckError(f"check {self.command!r} gave no result within {self.timeout:g} s; its processes were "
                             f"killed. Output so far: {result.output[-300:].strip() or '(none)'}")
        return Score(1.0 if result.exit_code == 0 else 0.0, result.summary())

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "command", "command": self.command, "timeout": self.timeout}


def _name_of(command: str) -> str:
    try:
        first = shlex.split(command)[0]
    except (ValueError, IndexError):
        first = command.split()[0] if command.split() else "command"
    return re.sub(r"\W+", "_", os.path.basename(first)).strip("_") or "command"


def _inside(workspace: Path, relative: str) -> Path:
    path = (workspace / relative).resolve()
    if not path.is_relative_to(workspace.resolve()):
        raise CheckError(f"file_contains({relative!r}) names a file outside the workspace")
    return path


class FileContains(WorkspaceScorer):
    """1 when the workspace's ``path`` exists and contains ``text`` (a regular expression with ``regex=True``)."""

    def __init__(self, path: str, text: str, *, regex: bool = False, name: str = "file_contains") -> None:
        if not isinstance(path, str) or not path.strip() or os.path.isabs(path):
            raise ValueError(f"file_contains() takes a path relative to the workspace, not {path!r}")
        if not isinstance(text, str):
            raise TypeError(f"file_contains() looks for a str, not {type(text).__name__}")
        if regex:
            re.compile(text)
        self.path, self.text, self.regex = path, text, regex
        self.name = check_name(name)

    async def check(self, row: Mapping[str, Any], workspace: Path) -> Score:
        target = _inside(workspace, self.path)
        if not target.is_file():
            return Score(0.0, f"{self.path} does not exist")
        content = await asyncio.to_thread(target.read_text, encoding="utf-8", errors="replace")
        found = re.search(self.text, content, re.MULTILINE) is not None if self.regex else self.text in content
        return Score(1.0 if found else 0.0, None if found else f"{self.text!r} not in {self.path}")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "file_contains", "path": self.path, "text": self.text, "regex": self.regex}


def takes_workspace(function: Callable[..., Any]) -> bool:
    """A function is given the workspace when it has a parameter named ``workspace`` or two positional ones."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.name == "workspace" for p in parameters):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 and not any(p.kind is p.VAR_POSITIONAL for p in parameters)


class WorkspaceCallable(WorkspaceScorer):
    """A function ``(row, workspace) -> score | (score, explanation)``, run in a worker thread."""

    def __init__(self, function: Callable[..., Any], name: str) -> None:
        self.function = function
        self.name = check_name(name)

    async def check(self, row: Mapping[str, Any], workspace: Path) -> Score:
        names = list(inspect.signature(self.function).parameters)
        if "workspace" in names and names.index("workspace") != 1:
            call = lambda: self.function(row, workspace=workspace)  # noqa: E731
        else:
            call = lambda: self.function(row, workspace)  # noqa: E731
        return to_score(await asyncio.to_thread(call), self.name)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "callable",
                "function": getattr(self.function, "__qualname__", repr(self.function)), "workspace": True}


def command(command: str, *, timeout: float | None = DEFAULT_CHECK_TIMEOUT, name: str | None = None,
            env: Mapping[str, str] | None = None) -> Scorer:
    """Run ``command`` in the trial's workspace after the turn: 1 when it exits 0, else 0; its output is kept.

    ``name`` defaults to the program's name (``command("pytest -q")`` fills ``score_pytest``). A check
    running longer than ``timeout`` s is killed with its process group and the row is an error, not a fail.
    The sweep's Python comes first on PATH, so ``python`` and ``pytest`` are those of the notebook's
    environment.
    """
    return Command(command, timeout=timeout, name=name, env=env)


def file_contains(path: str, text: str, *, regex: bool = False, name: str = "file_contains") -> Scorer:
    """1 when the trial's workspace has ``path`` and it contains ``text`` (a pattern with ``regex=True``)."""
    return FileContains(path, text, regex=regex, name=name)
