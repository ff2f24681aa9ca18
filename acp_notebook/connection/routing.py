"""Reply routing: each request's answer is applied to state in wire order, by whoever sent it.

Why not simply apply the awaited result? The SDK resolves a request's future when the answer
arrives, but the awaiting task resumes only later, after frames that followed the answer on
the wire have been handled. An agent that answers ``session/set_config_option`` and then
pushes a ``config_option_update`` would see its newer list overwritten by the older answer.
So state is changed from the frame tap, synchronously and in wire order, and the awaited
result is only returned to the caller.

How a request finds its applier: the sender wraps its send in ``router.sending(apply)``
(a context variable in the sending task); the transport tap sees the outgoing frame, in
that same task and before the frame is written, and calls ``on_send`` which files ``apply``
under the frame's id. The answer can therefore never arrive before its applier is known.

I/O-free and thread-free: ``on_send`` / ``on_receive`` are called by the tap on the loop thread
that owns the connection; appliers run there, synchronously.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Applier", "ReplyRouter"]

logger = logging.getLogger(__name__)

# Gets the whole response frame ({"id", "result"} or {"id", "error"}); runs in wire order. It may
# return a note for the frame log (what it did not apply, and why).
Applier = Callable[[dict[str, Any]], "str | None"]

# Ids of recent answers, to tell "answered twice" from "answers nothing we sent".
_ANSWERED_KEPT = 1024
# Recent answers that matched no request, quoted in timeout errors ("meanwhile it sent ...").
_STRAYS_KEPT = 8


@dataclass
class _Slot:
    apply: Applier | None
    request_id: Any = None  # filled in by on_send: the id the SDK gave the request
    used: bool = False


_next_applier: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("acp_notebook_next_applier",
                                                                             default=None)


@dataclass(frozen=True)
class Outstanding:
    method: str
    apply: Applier | None


class ReplyRouter:
    """Which request each id stands for, and how its answer changes state.

    A request the sender stopped waiting for (a timeout, a cancelled cell) stays outstanding:
    if the agent answers after all, the answer is still the agent's truth and is applied.
    """

    def __init__(self) -> None:
        self.outstanding: dict[Any, Outstanding] = {}
        self._answered: dict[Any, str] = {}
        self._strays: collections.deque[tuple[float, str]] = collections.deque(maxlen=_STRAYS_KEPT)

    @contextlib.contextmanager
    def sending(self, apply: Applier | None) -> Iterator[_Slot]:
        """Wrap the SDK's send of ONE request: its frame will carry ``apply``; the slot yielded tells
        the request's id once it was sent (for ``$/cancel_request``)."""
        slot = _Slot(apply)
        token = _next_applier.set(slot)
        try:
            yield slot
        finally:
            _next_applier.reset(token)

    def awaiting(self, *methods: str) -> bool:
        """Whether a request of one of ``methods`` is sent and not answered yet."""
        return any(request.method in methods for request in self.outstanding.values())

    def strays_since(self, since: float) -> list[str]:
        """Answers that matched no request, received after ``since`` (time.monotonic()): a timeout
        error quotes them, since an agent that answers with a wrong id looks like one that is silent."""
        return [text for at, text in self._strays if at >= since]

    def on_send(self, message: dict[str, Any]) -> None:
        """An outgoing frame, before it is written. Requests are filed under their id."""
        if "method" not in message or "id" not in message:
            return
        slot = _next_applier.get()
        apply = None
        if slot is not None and not slot.used:  # one request per sending() block
            apply, slot.apply, slot.used, slot.request_id = slot.apply, None, True, message["id"]
        self.outstanding[message["id"]] = Outstanding(message["method"], apply)

    def on_receive(self, message: dict[str, Any]) -> str | None:
        """An incoming frame. A response runs its request's applier; returns a note for the log
        when the frame answers nothing outstanding (a wrong id, or a second answer)."""
        if "method" in message or "id" not in message:
            return None
        request_id = message["id"]
        request = self.outstanding.pop(request_id, None)
        if request is None:
            if request_id in self._answered:
                return f"ignored: a second answer to request {request_id!r} ({self._answered[request_id]})"
            self._strays.append((time.monotonic(), f"an answer to no request we sent (id {request_id!r})"))
            return f"ignored: answers no request sent (id {request_id!r})"
        self._answered[request_id] = request.method
        if len(self._answered) > _ANSWERED_KEPT:
            del self._answered[next(iter(self._answered))]
        if request.apply is not None:
            try:
                note = request.apply(message)
            except Exception:  # noqa: BLE001 - a faulty applier must not stop the receive loop
                logger.exception("applying the answer to %s failed", request.method)
                return f"failed to apply the answer to {request.method} (see the logs)"
            return note if isinstance(note, str) else None
        return None
