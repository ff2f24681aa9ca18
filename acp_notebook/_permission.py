"""Requests a permission policy decides: what a policy receives (``PermissionRequest``, the agent's
``session/request_permission``; ``KernelApproval``, a kernel-tools ``run_code`` under the "ask" policy),
which policy answers a request (``policy_in_force``: the turn's, then the session's, then the agent's, for
permissions, forms and kernel calls alike), how a policy ("allow", "deny" or a callable) becomes an option
id (``decide_permission``, written once for both kinds of request), and the answer to the agent's
``session/request_permission``. A callable policy tells the two apart by type or by ``request.kind``
("permission" or "kernel").

A session is known here only as an ``AskingSession`` (what is read of it), so this module does not import
session.py. Threads: everything here runs on the background loop thread: ``decide_permission`` opens and
settles the session's ``PendingDecisions`` there, and the running turn's permission record is made there.
A callable policy may hand the decision to another thread (a widget's click) through a future.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, Union

from .connection.checks import update_problem
from .turn import KernelCall, PermissionRecord, Turn

__all__ = ["KERNEL_APPROVAL_TITLE", "PERMISSION_META_KEY", "AskingSession", "DecidedRequest", "KernelApproval",
           "PendingDecisions", "PermissionPolicy", "PermissionRequest", "PermissionWithdrawn", "answer_permission",
           "decide_permission", "policy_in_force"]

logger = logging.getLogger(__name__)

P = TypeVar("P")


def policy_in_force(turn_policy: P | None, session_policy: P | None, agent_policy: P) -> P:
    """The policy that answers a request (a permission, a form, a kernel call): the running turn's, else the
    session's, else the agent's. The one place this order is written."""
    return next(p for p in (turn_policy, session_policy, agent_policy) if p is not None)


class PendingDecisions:
    """The decisions a session is waiting on (permission requests, kernel calls being asked): each is answered
    "cancelled" at once when the session's turn is cancelled or its agent goes (``withdraw_all``)."""

    def __init__(self) -> None:
        self._waiting: set[asyncio.Future[Any]] = set()

    def open(self) -> asyncio.Future[Any]:
        """A future that ``withdraw_all`` resolves; ``settle`` it once the decision is made (loop thread)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.add(future)
        return future

    def settle(self, future: asyncio.Future[Any]) -> None:
        self._waiting.discard(future)

    def withdraw_all(self) -> None:
        for future in list(self._waiting):
            if not future.done():
                future.set_result(None)

    def __len__(self) -> int:
        return len(self._waiting)


class _PolicyHolder(Protocol):
    permission: Any
    permission_timeout: float | None


class AskingSession(Protocol):
    """What a permission request reads of its session (session.py's ``Session``)."""

    id: str
    permission: Any
    decisions: PendingDecisions

    @property
    def agent(self) -> _PolicyHolder: ...

    @property
    def running_turn(self) -> Turn | None: ...

# Where a permission answer says why it is "cancelled" when no one decided in time.
PERMISSION_META_KEY = "acp-notebook/permission"


class _Options:
    """What both kinds of request share: the options a policy picks one of, by id."""

    options: list[dict[str, Any]]

    def option_for(self, *kinds: str) -> str | None:
        """The id of the first option of one of ``kinds`` (``allow_once``, ``reject_once``...), in the order given."""
        for kind in kinds:
            for option in self.options:
                if option.get("kind") == kind:
                    return option.get("optionId")
        return None


@dataclass(frozen=True)
class PermissionRequest(_Options):
    """The agent's ``session/request_permission``, as a permission policy callable receives it; ``turn`` is the
    running turn, if any. ``kind`` is "permission" (a ``KernelApproval``'s is "kernel")."""

    kind: ClassVar[str] = "permission"

    session: AskingSession
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    raw: dict[str, Any]
    turn: Turn | None = None

    @property
    def title(self) -> str:
        """What the agent says it wants to do (its tool call's title); may be empty."""
        return str(self.tool_call.get("title") or "")


KERNEL_APPROVAL_TITLE = "Run code in your kernel"


@dataclass(frozen=True)
class KernelApproval(_Options):
    """A kernel-tools ``run_code`` asking to run ``code`` in the user's kernel (policy "ask"), as a permission
    policy callable receives it: not an ACP permission request, the agent did not send one. ``call`` is the
    kernel's record of the call (``turn.kernel_calls``); ``turn`` the running turn. ``options`` are of the ACP
    permission option kinds (allow_once, reject_once), so "allow" and "deny" policies answer it as they answer
    a permission request. ``kind`` is "kernel"."""

    kind: ClassVar[str] = "kernel"

    session: AskingSession
    turn: Turn | None
    call: KernelCall
    code: str
    options: list[dict[str, Any]]

    @property
    def title(self) -> str:
        return KERNEL_APPROVAL_TITLE


DecidedRequest = Union[PermissionRequest, KernelApproval]
PermissionPolicy = Union[str, Callable[[DecidedRequest], Any]]


async def answer_permission(session: AskingSession, params: dict[str, Any]) -> dict[str, Any]:
    """The answer to a ``session/request_permission`` for ``session``: its policy (the turn's, the session's or
    the agent's) asked; "cancelled" when the turn is cancelled,
    the agent goes, or the policy has not decided within the agent's ``permission_timeout``."""
    turn = session.running_turn
    tool_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
    if update_problem({"sessionUpdate": "tool_call_update", "toolCallId": "", **tool_call}) is not None:
        tool_call = {}  # malformed: not merged into the turn's tool calls (the policy still sees params)
    options = [o for o in params.get("options") or [] if isinstance(o, dict)] \
        if isinstance(params.get("options"), list) else []
    request = PermissionRequest(session, dict(tool_call), options, params, turn)
    chosen, reason = await decide_permission(session, request)
    if turn is not None:
        turn.record_permission(PermissionRecord(request.tool_call, request.options, chosen))
    if chosen is not None:
        return {"outcome": {"outcome": "selected", "optionId": chosen}}
    answer: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}
    if reason:
        logger.warning("permission request in session %s answered 'cancelled': %s", session.id, reason)
        answer["_meta"] = {PERMISSION_META_KEY: {"reason": reason}}
    return answer


async def decide_permission(session: AskingSession, request: DecidedRequest) -> tuple[str | None, str]:
    """The option id the policy chose for ``request`` (a permission request or a kernel approval; the policy is
    the turn's, the session's or the agent's), or None for "cancelled": the turn was cancelled, the agent went,
    or nobody decided within the agent's ``permission_timeout``, which the second item then says (else it is "").
    Loop thread."""
    turn = request.turn
    policy = policy_in_force(turn.permission if turn is not None else None, session.permission,
                             session.agent.permission)
    cancelled = session.decisions.open()
    limit = session.agent.permission_timeout
    why = ["the turn was cancelled"]  # what a question still shown is withdrawn with, should nobody decide
    decided = asyncio.ensure_future(_apply_policy(policy, request, why))
    try:
        done, _ = await asyncio.wait({decided, cancelled}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        chosen = decided.result() if decided in done else None
        if not done:
            why[0] = f"no decision within {limit:g} s"
    except asyncio.CancelledError:  # whoever asked gave up (an MCP client cancelling its tools/call)
        why[0] = "the agent cancelled its request"
        raise
    finally:
        session.decisions.settle(cancelled)
        if not decided.done():  # also when the asker itself is cancelled: its prompt is withdrawn, not left live
            decided.cancel()
    return chosen, "" if done else f"no decision within {limit:g} s (the permission_timeout)"


class PermissionWithdrawn(Exception):
    """Set on a callable policy's pending concurrent Future (a prompt's) when nobody may answer it any more;
    its text says why ("the turn was cancelled", "the agent cancelled its request")."""


async def _apply_policy(policy: PermissionPolicy, request: DecidedRequest,
                        why: list[str] | None = None) -> str | None:
    """Turn a policy ("allow", "deny", or a callable) into an option id, or None for 'cancelled'. Cancelled while
    a callable's concurrent Future waits, that Future gets PermissionWithdrawn(``why[0]``): a prompt behind it
    stops offering buttons nobody may use."""
    if policy in ("allow", "allow_once"):
        return request.option_for("allow_once", "allow_always")
    if policy == "allow_always":
        return request.option_for("allow_always", "allow_once")
    if policy in ("deny", "reject", "reject_once"):
        return request.option_for("reject_once", "reject_always")
    if not callable(policy):
        raise ValueError(f"permission policy must be 'allow', 'deny' or a callable, not {policy!r}")
    try:
        answer = policy(request)
        if isinstance(answer, concurrent.futures.Future):
            pending = answer
            try:
                answer = await asyncio.wrap_future(pending)
            except asyncio.CancelledError:
                if not pending.done():
                    with contextlib.suppress(concurrent.futures.InvalidStateError):  # answered meanwhile
                        pending.set_exception(PermissionWithdrawn(why[0] if why else "the request was cancelled"))
                raise
        elif inspect.isawaitable(answer):
            answer = await answer
    except Exception:  # noqa: BLE001 - a failing policy must not leave the agent waiting forever
        logger.exception("permission policy failed; answering with the reject option")
        return request.option_for("reject_once", "reject_always")
    if answer is None:
        return None
    if answer in ("allow", "deny", "allow_always", "reject"):
        return await _apply_policy(answer, request)
    ids = [o.get("optionId") for o in request.options]
    if answer in ids:
        return answer
    logger.warning("permission policy returned %r, not one of %r; rejecting", answer, ids)
    return request.option_for("reject_once", "reject_always")
