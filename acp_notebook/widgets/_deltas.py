"""What the delta-sending widgets (parts.py's ``LiveParts``, live_plan.py's ``PlanRows``) share: a version the
frontend's copy is at, and the whole copy sent again when a frontend says it is at another one (a reloaded page,
a message lost) or opens.

Threads: a subclass changes its copy and ``_version`` under ``_lock``; the frontend's "sync" message arrives on
the kernel thread (the comm handler) and takes the same lock.
"""

from __future__ import annotations

import threading
from typing import Any

import anywidget
import traitlets

__all__ = ["VersionedCopy"]


class VersionedCopy(anywidget.AnyWidget):
    """A widget whose frontend holds a copy (the synced trait named ``_copy_trait``) at version ``v``."""

    _copy_trait = ""  # the subclass's synced list its frontend opens with
    v = traitlets.Int(0).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        self._lock = threading.Lock()
        self._version = 0
        super().__init__(**kwargs)
        self.on_msg(self._on_frontend)

    def _snapshot(self) -> list[list[Any]]:
        """Under the lock: the copy last sent, as the synced trait holds it."""
        raise NotImplementedError

    def _send_whole(self) -> None:
        """Under the lock: send the whole copy at a new version."""
        raise NotImplementedError

    def _on_frontend(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and "sync" in content:
            with self._lock:
                if content["sync"] != self._version:
                    self._send_whole()

    def get_state(self, key: Any = None) -> dict[str, Any]:
        """The state the frontend opens with, or asks for when it reloads: the copy last sent, at its version."""
        state = super().get_state(key)
        with self._lock:
            if self._copy_trait in state:
                state[self._copy_trait] = self._snapshot()
            if "v" in state:
                state["v"] = self._version
        return state
