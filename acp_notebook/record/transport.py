"""ReplayTransport: a recording in place of an agent, under the same AgentConnection as a real one.

Everything above the transport (Agent, Session, panels, %%acp cells, the inspector, sweeps)
works unchanged on a replayed agent. ``Pacer`` hands the agent's recorded frames on as fast
as possible, or at the recorded pace (``speed=1.0``) or a multiple of it; ``acp-notebook replay``
uses it too.

Threads: runs on the loop thread of the connection that uses it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
from collections.abc import Callable
from typing import Any

from ..connection.transport import Transport
from ..errors import ReplayMismatch
from .engine import Emission, ReplayEngine
from .format import Recording

__all__ = ["Pacer", "ReplayTransport"]


class Pacer:
    """Delivers emissions in order: at once (``speed=None``), or keeping the recorded gaps divided by ``speed``."""

    def __init__(self, deliver: Callable[[dict[str, Any]], None], speed: float | None) -> None:
        if speed is not None and speed <= 0:
            raise ValueError(f"speed must be positive (1.0 is the recorded pace), not {speed!r}")
        self._deliver = deliver
        self._speed = speed
        self._queue: collections.deque[Emission] = collections.deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def push(self, emissions: list[Emission]) -> None:
        if self._speed is None:
            for emission in emissions:
                self._deliver(emission.frame)
            return
        self._queue.extend(emissions)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        assert self._speed is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                emission = self._queue.popleft()
                if emission.gap > 0:
                    await asyncio.sleep(emission.gap / self._speed)  # replaying the recorded pace is the point
                self._deliver(emission.frame)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


class ReplayTransport(Transport):
    """Answers the client from a recording (see record/engine.py for how frames are matched)."""

    def __init__(self, recording: Recording | str | os.PathLike[str], *, speed: float | None = None,
                 cwd: str | None = None) -> None:
        super().__init__()
        self.recording = recording if isinstance(recording, Recording) else Recording.load(recording)
        self.description = f"replay of {self.recording.name}"
        self.speed = speed
        self.cwd = cwd
        self.mismatches: list[ReplayMismatch] = []
        self._inbox: asyncio.Queue[dict[str, Any] | None] | None = None
        self._engine: ReplayEngine | None = None
        self._pacer: Pacer | None = None

    async def open(self) -> None:
        self.ended = asyncio.Event()
        self._inbox = asyncio.Queue()
        self._engine = ReplayEngine(self.recording, cwd=self.cwd)
        self._pacer = Pacer(self._inbox.put_nowait, self.speed)
        self._pacer.push(self._engine.opening())

    async def send(self, message: dict[str, Any]) -> None:
        assert self._engine is not None and self._pacer is not None and self._inbox is not None
        if self.ended is not None and self.ended.is_set():
            raise ConnectionError("the replay has been closed")
        try:
            emissions = self._engine.receive(message)
        except ReplayMismatch as mismatch:
            self.mismatches.append(mismatch)
            if "method" in message:
                raise  # the request's sender gets it; the replay stays where it was, a corrected request goes on
            for answer in self._engine.failure_answers(mismatch):  # an answer nobody awaits: fail what waits
                self._inbox.put_nowait(answer)
            return
        self._pacer.push(emissions)

    async def receive(self) -> dict[str, Any] | None:
        assert self._inbox is not None
        return await self._inbox.get()

    async def close(self) -> None:
        if self._pacer is not None:
            self._pacer.close()
        if self.ended is not None and not self.ended.is_set():
            self.ended.set()
            assert self._inbox is not None
            with contextlib.suppress(Exception):
                self._inbox.put_nowait(None)
