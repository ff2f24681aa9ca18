"""Folders shipped to Ray workers: no shared filesystem is assumed between the caller and the nodes.

The caller packs each folder the trials read (workspace sources, task tests) once as a tar in memory,
and the Ray executor puts it in the object store. A worker unpacks a folder the first time one of its
trials needs it (``Unpacked``, guarded by a lock: an actor runs trials on several threads) and runs the
trial on its own copy (``localize``); what the trial leaves that the caller keeps (a kept workspace)
comes back as a tar (``pack_kept``) and is unpacked in the caller's run directory (``unpack_into``);
the row names the caller's paths again (``restore_paths``). Plain functions over plain data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .checks import WorkspaceScorer
from .workspace import EMPTY

__all__ = ["Unpacked", "localize", "pack", "pack_kept", "restore_paths", "shipped_paths", "unpack_into"]


def pack(folder: str | os.PathLike[str]) -> bytes:
    """``folder``'s files (a repository's .git included, so a worker makes the same worktree) as a tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(os.fspath(folder), arcname=".")
    return buffer.getvalue()


def unpack_into(data: bytes, target: str | os.PathLike[str]) -> None:
    """Extract a tar made by ``pack`` into ``target`` (made; links and paths outside it refused)."""
    Path(target).mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
        if hasattr(tarfile, "tar_filter"):  # Python 3.10.12+/3.11.4+: refuse members that leave the target
            archive.extractall(os.fspath(target), filter="tar")
        else:  # pragma: no cover - older patch releases; our own tar, made by pack()
            archive.extractall(os.fspath(target))


def shipped_paths(settings: Any, samples: Any) -> list[str]:
    """Every folder a trial of this sweep reads on the machine that runs it: workspace sources and what the
    checks read (a task's tests)."""
    found = [settings.workspace, *(getattr(s, "workspace", None) for s in samples)]
    for check in settings.checks:
        found += check.shipped_paths()
    return list(dict.fromkeys(p for p in found if p and p != EMPTY))


class Unpacked:
    """A worker's copies of the shipped folders: caller path -> local path, each unpacked on first use."""

    def __init__(self, refs: Mapping[str, Any], fetch: Callable[[Any], bytes]) -> None:
        self.refs = dict(refs)
        self.fetch = fetch
        self.root = Path(tempfile.mkdtemp(prefix="acp-notebook-shipped-"))
        self.local: dict[str, str] = {}
        self.lock = threading.Lock()

    def path(self, caller_path: str | None) -> str | None:
        if caller_path is None or caller_path not in self.refs:
            return caller_path
        with self.lock:
            if caller_path not in self.local:
                digest = hashlib.sha256(caller_path.encode()).hexdigest()[:12]
                target = self.root / f"{Path(caller_path).name or 'root'}-{digest}"
                unpack_into(self.fetch(self.refs[caller_path]), target)
                self.local[caller_path] = str(target)
            return self.local[caller_path]

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def localize(trial: Any, settings: Any, unpacked: Unpacked) -> tuple[Any, Any]:
    """The trial and settings with every shipped path replaced by the worker's copy, and workspaces made under
    the worker's own temporary root (the caller's run directory is not on this machine)."""
    sample = trial.sample
    if sample.workspace:
        local = dataclasses.replace(sample, workspace=unpacked.path(sample.workspace))
        trial = dataclasses.replace(trial, sample=local)
    checks = tuple(c.with_paths(unpacked.path) if isinstance(c, WorkspaceScorer) else c for c in settings.checks)
    settings = dataclasses.replace(settings, workspace=unpacked.path(settings.workspace), checks=checks,
                                   workspaces=dataclasses.replace(settings.workspaces, root=None))
    return trial, settings


def pack_kept(row: Mapping[str, Any]) -> bytes | None:
    """A kept workspace, packed to go back to the caller, then removed here; None when there is none."""
    path = row.get("workspace_path")
    if not path or not os.path.isdir(path):
        return None
    data = pack(path)
    shutil.rmtree(path, ignore_errors=True)
    return data


def restore_paths(row: dict[str, Any], caller_source: str | None, caller_root: str | None) -> None:
    """The row as the caller knows it: its source path, and its kept workspace's path in the caller's root."""
    if row.get("workspace") is not None and caller_source is not None:
        row["workspace"] = caller_source
    if row.get("workspace_path") and caller_root is not None:
        row["workspace_path"] = str(Path(caller_root) / Path(row["workspace_path"]).name)
