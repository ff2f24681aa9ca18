"""AgentProcess: an agent subprocess in its own process group, its stderr drained, its exit watched."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
from collections.abc import Callable, Mapping, Sequence

__all__ = ["EXIT_GRACE_S", "AgentProcess"]

STDIO_LIMIT = 50 * 1024 * 1024
STDERR_LINES_KEPT = 200
# How long an agent gets to exit by itself once its stdin is closed, and then once sent SIGTERM.
EXIT_GRACE_S = 2.0


class AgentProcess:
    """Spawns ``argv`` with pipes on stdin/stdout/stderr and keeps it tidy.

    - stderr is always read (a full pipe would freeze the agent); the last lines are kept for
      error messages and each line goes to ``on_stderr`` listeners;
    - the process leads its own process group, so ``terminate()`` also ends what it started
      (npx's node, a wrapper's native binary).
    Must be created and used on one event loop.
    """

    def __init__(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str],
                 exit_grace: float = EXIT_GRACE_S) -> None:
        """``exit_grace``: how long ``terminate()`` waits for the process to exit on EOF before SIGTERM (0 for
        an agent known to stay after its stdin closes)."""
        self.argv = list(argv)
        self.exit_grace = exit_grace
        self.cwd = cwd
        self.env = dict(env)
        self.process: asyncio.subprocess.Process | None = None
        self.exit_code: int | None = None
        self.exited = asyncio.Event()
        self.stderr_done = asyncio.Event()
        self.stderr_listeners: list[Callable[[str], None]] = []
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES_KEPT)
        self._stderr_task: asyncio.Task[None] | None = None
        self._exit_task: asyncio.Task[None] | None = None

    async def spawn(self) -> asyncio.subprocess.Process:
        """Start the process; OSError (FileNotFoundError, PermissionError...) when it cannot run."""
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
            start_new_session=True,
            limit=STDIO_LIMIT,
        )
        self._stderr_task = asyncio.create_task(self._drain_stderr(), name=f"acp-stderr-{self.pid}")
        self._exit_task = asyncio.create_task(self._watch_exit(), name=f"acp-exit-{self.pid}")
        return self.process

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def stdin(self) -> asyncio.StreamWriter:
        assert self.process is not None and self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self.process is not None and self.process.stdout is not None
        return self.process.stdout

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return list(self._stderr)[-lines:]

    async def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        stream = self.process.stderr
        try:
            while True:
                try:
                    line = await stream.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    continue  # an over-long line: skip it, keep draining
                if not line:
                    return
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                self._stderr.append(text)
                for listener in list(self.stderr_listeners):
                    with contextlib.suppress(Exception):
                        listener(text)
        finally:
            self.stderr_done.set()

    async def _watch_exit(self) -> None:
        assert self.process is not None
        self.exit_code = await self.process.wait()
        self.exited.set()

    async def settle(self, exit_timeout: float = 2.0, stderr_timeout: float = 1.0) -> None:
        """Give the exit watcher and the stderr drain a moment, so errors carry the exit code and last lines."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.exited.wait(), exit_timeout)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stderr_done.wait(), stderr_timeout)

    async def terminate(self, grace: float = EXIT_GRACE_S) -> None:
        """EOF on stdin (``exit_grace`` to exit), then SIGTERM (``grace``), then SIGKILL; finally SIGKILL to
        whatever is left in the group."""
        proc = self.process
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), self.exit_grace)
        except asyncio.TimeoutError:
            self.signal_group(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except asyncio.TimeoutError:
                self.signal_group(signal.SIGKILL)
                await proc.wait()
        self.signal_group(signal.SIGKILL)
        await self.settle(exit_timeout=0, stderr_timeout=1.0)
        for task in (self._stderr_task, self._exit_task):
            if task is not None:
                task.cancel()

    def signal_group(self, sig: signal.Signals) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)
