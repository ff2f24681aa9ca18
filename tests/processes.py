"""Test helper: wait for a process to end, on a pidfd (an event), not by polling."""

from __future__ import annotations

import os
import select


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
