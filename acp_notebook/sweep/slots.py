"""Sandbox slots (``sandbox="bwrap"`` in a sweep): one sandboxed agent process per concurrency slot, started
once, writable only in the slot's own folder, which holds one trial at a time.

A ``Slot`` is one agent's process in one slot and the two host folders its sandbox may write: ``work`` (bound at
its own path: the running trial's workspace, made in it by ``Workspace.fill``) and ``tmp`` (bound at the
sandbox's /tmp). ``Slots`` hands a trial an idle slot of its agent (``lease``), or makes one, so an agent has as
many slots as it has trials at once: the sweep's concurrency at most. The trial gives it back (``release``) once
its turn has ended and its workspace has been measured, kept and emptied; the slot's /tmp is emptied then, so
the next trial finds nothing of this one in either folder. A slot whose trial did not end cleanly, or whose
process exited, gets a fresh process for its next trial; one that could not be emptied is closed for good.

Every slot's sandbox hides the slots' root and the sweep's workspace root (other slots' trials, kept
workspaces) behind empty folders, so concurrent trials cannot see each other. What persists across a slot's
trials, unlike ``sandbox="bwrap-trial"`` (a process per trial): the agent process, its memory and whatever it
left running, and its own state folders (those are shared by every process of that agent in all modes).

Everything here runs on the background loop thread of the process that runs the trials (the notebook's, or a
Ray worker's), which alone mutates a ``Slots``; file work goes to worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..client import Agent, PermissionPolicy, astart
from ..sandbox import Sandbox, agent_sandbox, wrap_spec
from .workspace import empty_folder, remove_entry

__all__ = ["Slot", "Slots", "clear_private_tmp"]

CLOSE_TIMEOUT_S = 10.0


class Slot:
    """One agent's sandboxed process in one concurrency slot, and the folders it may write."""

    def __init__(self, agent_name: str | None, folder: Path) -> None:
        self.agent_name = agent_name
        self.folder = folder
        self.work = folder / "work"
        self.tmp = folder / "tmp"
        for path in (folder, self.work, self.tmp):
            path.mkdir(mode=0o700)
        self.agent: Agent | None = None
        self.mounts: tuple[tuple[str, str], ...] = ()
        self.mount_points: list[str] = []  # under /tmp: left in ``tmp`` while the process lives

    async def close(self) -> None:
        agent, self.agent = self.agent, None
        if agent is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(agent.aclose(), CLOSE_TIMEOUT_S)


class Slots:
    """Every slot of one agent pool: the idle ones per agent name, and how to start a slot's process."""

    def __init__(self, sandbox: Sandbox, *, root: str, permission: PermissionPolicy,
                 spec_for: Callable[[str | None], Any], started: list[Agent]) -> None:
        self.sandbox = sandbox
        self.root = Path(root)  # the workspace root: the slots' folder is made in it, and hidden from every slot
        self.permission = permission
        self.spec_for = spec_for
        self.started = started  # the pool's list: a slot's processes are reported with its agents
        self.folder: Path | None = None
        self.idle: dict[str, list[Slot]] = {}
        self.every: list[Slot] = []

    def lease(self, agent_name: str | None, workdir: str | None = None) -> Slot:
        """An idle slot of ``agent_name`` (first one whose process has the trial's container WORKDIR mounted), else
        a new one."""
        idle = self.idle.setdefault(agent_name or "", [])
        for slot in reversed(idle):
            if [target for _, target in slot.mounts] == ([workdir] if workdir else []):
                idle.remove(slot)
                return slot
        if idle:
            return idle.pop()
        if self.folder is None:
            self.root.mkdir(parents=True, exist_ok=True)
            self.folder = Path(tempfile.mkdtemp(prefix=".slots-", dir=self.root))
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", agent_name or "agent")[:40]
        slot = Slot(agent_name, self.folder / f"{name}-{sum(s.agent_name == agent_name for s in self.every)}")
        self.every.append(slot)
        return slot

    async def agent(self, slot: Slot, mounts: Sequence[tuple[str, str]] = ()) -> Agent:
        """The slot's process, started now if it has none, exited, or was started with other mounts."""
        mounts = tuple(mounts)
        if slot.agent is not None and (slot.agent.status == "exited" or slot.mounts != mounts):
            await slot.close()
        if slot.agent is None:
            spec = self.spec_for(slot.agent_name)
            cwd = str(slot.work)
            base = replace(self.sandbox.with_masks([str(self.root)]), tmp=str(slot.tmp),
                           mounts=(*self.sandbox.mounts, *mounts))
            full = await asyncio.to_thread(agent_sandbox, spec, base, cwd=cwd)
            slot.mount_points = full.mount_points_in_tmp()
            wrapped = await asyncio.to_thread(wrap_spec, spec, base, cwd=cwd)
            slot.mounts = mounts
            slot.agent = await astart(wrapped, cwd=cwd, permission=self.permission)
            self.started.append(slot.agent)
        return slot.agent

    async def release(self, slot: Slot, *, clean: bool) -> None:
        """Empty the slot's folders for its next trial (the workspace is normally empty already: the trial
        removed it); a trial that did not end cleanly leaves the slot without its process."""
        try:
            await asyncio.to_thread(_empty_slot, slot)
        except Exception:  # noqa: BLE001 - a slot that cannot be emptied is never used again
            await slot.close()
            self.every.remove(slot)
            await asyncio.to_thread(shutil.rmtree, slot.folder, True)
            return
        if not clean:
            await slot.close()
        self.idle.setdefault(slot.agent_name or "", []).append(slot)

    async def close(self) -> None:
        await asyncio.gather(*(slot.close() for slot in self.every))
        self.every.clear()
        self.idle.clear()
        if self.folder is not None:
            await asyncio.to_thread(shutil.rmtree, self.folder, True)


def _empty_slot(slot: Slot) -> None:
    if any(slot.work.iterdir()):
        empty_folder(slot.work)
    clear_private_tmp(slot.tmp, slot.mount_points)
    if any(slot.work.iterdir()):
        raise OSError(f"{slot.work} could not be emptied")


def clear_private_tmp(folder: str | os.PathLike[str], mount_points: Sequence[str]) -> None:
    """Empty a host folder bound at a living sandbox's /tmp, except its mount points and the folders that lead
    to them (bwrap made those in it; removing one from the host would detach the mount inside the sandbox):
    whatever is beside them goes."""
    leaves = {Path(p).parts for p in mount_points}
    on_the_way = {parts[:i] for parts in leaves for i in range(1, len(parts))}

    def clear(path: str, parts: tuple[str, ...]) -> None:
        with os.scandir(path) as entries:
            for entry in list(entries):
                here = (*parts, entry.name)
                if here in leaves:
                    continue
                if here in on_the_way and entry.is_dir(follow_symlinks=False):
                    clear(entry.path, here)
                else:
                    remove_entry(entry)

    clear(os.fspath(folder), ())
