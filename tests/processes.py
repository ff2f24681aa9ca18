"""Test helpers: wait for a process to end, on a pidfd (an event), not by polling; a process's descendants; how long
a notebook's kernel may take to start."""

from __future__ import annotations

import os
import select
from pathlib import Path

# How long a kernel run by nbclient may take to be ready (nbclient's own default is 60 s): a clean clone's CI run
# under a loaded `make test` passed 60 s once.
KERNEL_START_S = 180


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """True once the process has ended, False if it is still alive after ``timeout`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def descendants(pid: int) -> list[int]:
    """Every living descendant of ``pid``, read from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        found += children
        frontier += children
    return found
