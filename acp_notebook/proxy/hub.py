"""What the proxy's parts share: the session table, the backends, the bindings file, the way to the client.

``ProxyServer`` (server.py) is a ``Hub``; the parts that do one job each (``Binder``, ``OptionsView``,
``Reopener``) are given the hub, and each other where one needs another, and never import the server:
the server imports them. Everything here is read and mutated on the proxy's one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from acp.connection import Connection
from acp.exceptions import RequestError

from .._protocol import unknown_session
from .backend import Backend
from .ids import BindingStore
from .models import AgentModels
from .session import Candidate, ProxySession

__all__ = ["Hub"]


class Hub:
    """The proxy's shared tables (``sessions``, ``backends``, ``bindings``) and its sends to the client."""

    def __init__(self, backends: Mapping[str, Backend[Candidate]], *, probe_timeout: float, start_timeout: float,
                 state_dir: Path | None) -> None:
        self.order = list(backends)
        self.backends: dict[str, Backend[Candidate]] = dict(backends)
        self.probe_timeout = probe_timeout
        self.start_timeout = start_timeout
        self.marker = uuid.uuid4().hex[:12]  # tells this process's rewritten options from anyone else's
        self.client: Connection | None = None
        self.client_init: dict[str, Any] = {}
        self.sessions: dict[str, ProxySession] = {}
        self.bindings = BindingStore(state_dir)
        # Each agent's models as last seen in any of its sessions: a session that never probed an agent (a fork, a
        # reopen) still lists that agent's models, so the client can hand its conversation over to it.
        self.known_models: dict[str, AgentModels] = {}
        self._forwarding: set[asyncio.Task[Any]] = set()

    def note_models(self, models: AgentModels | None) -> None:
        if models is not None:
            self.known_models[models.agent] = models

    def running(self) -> list[Backend[Candidate]]:
        return [b for b in self.backends.values() if b.ready]

    def session_of(self, params: dict[str, Any]) -> ProxySession:
        """The open session a request names, or the client's error naming the open ones."""
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.closed:
            raise self.unknown_session(session_id)
        return session

    def unknown_session(self, session_id: Any, how: str = "") -> RequestError:
        return RequestError(*unknown_session(session_id, [s.id for s in self.sessions.values() if not s.closed], how))

    def send_to_client(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification to the client now, so notifications keep the order they are queued in.

        The SDK's send enqueues its frame in the first step of the task, and tasks take their
        first step in creation order: frames leave in the order of these calls, and before any
        response computed after them."""
        if self.client is None:
            return
        self.spawn(self.send_now(method, params))

    async def send_now(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to the client before returning (nothing when no client is connected)."""
        if self.client is None:
            return
        with contextlib.suppress(ConnectionError):
            await self.client.send_notification(method, params)

    def spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._forwarding.add(task)
        task.add_done_callback(self._forwarding.discard)
