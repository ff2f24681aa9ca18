"""What the agent sends the client: its session/update notifications and its requests (agent -> client).

- ``SessionUpdates``: each ``session/update`` applied in wire order to its session's ``SessionState``
  and running ``Turn`` (``Agent._on_frame`` calls ``route``), through the agent's session table
  (session_table.py); updates for a session being opened are held there until its state is made.
- ``AgentRequests``: the connection's request handler: permission requests, forms
  (``elicitation/create``), fs/* on a session's behalf, and the user's ``_extension`` handlers.

Both know the agent only as the ``RequestHost`` below (what they read of it), so this module does not
import client.py. Threads: both run, and change the table, only on the background loop thread.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Protocol

from ._permission import answer_permission, policy_in_force
from ._protocol import COMPACTION_UPDATES, INTERNAL_ERROR, INVALID_PARAMS
from .connection import AgentConnection, files
from .connection.checks import update_problem
from .elicitation import ElicitationPolicy, ElicitationRequest
from .elicitation import decide as decide_elicitation
from .elicitation import response as elicitation_response
from .session import Session
from .session_results import odd_values_note
from .session_table import EARLY_SESSIONS_KEPT, EARLY_UPDATES_KEPT, SessionTable
from .turn import PermissionRecord

__all__ = ["EARLY_SESSIONS_KEPT", "EARLY_UPDATES_KEPT", "TURN_UPDATES", "AgentRequests", "RequestHost",
           "SessionUpdates"]

# Update kinds that belong to a turn (the others describe the session: its options, title, commands).
TURN_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan",
                          "usage_update"})
OPENING_METHODS = ("session/new", "session/load", "session/resume", "session/fork")


class RequestHost(Protocol):
    """What the agent's updates and requests are answered with: the agent (client.py's ``Agent``) as read here."""

    session_table: SessionTable[Session]
    connection: AgentConnection
    fs: bool
    notebook_writes: bool
    elicitation: ElicitationPolicy


class SessionUpdates:
    """The session/update notifications applied to the host's sessions and their states."""

    def __init__(self, host: RequestHost) -> None:
        self._host = host

    def route(self, params: Any, *, checked: bool = False) -> str | None:
        """Apply one session/update; ``checked``: the caller knows it is a well-formed text chunk."""
        if not isinstance(params, dict):
            return "ignored: params is not an object"
        session_id = params.get("sessionId")
        update = params.get("update")
        if not isinstance(update, dict):
            return "ignored: no update object"
        problem = None if checked else update_problem(update)
        if problem is not None:
            return f"ignored: a malformed {update.get('sessionUpdate')} update: {problem}"
        table = self._host.session_table
        state = table.state(session_id)
        if state is None:
            return self._hold(session_id, update)
        known = state.apply_update(update)
        session = table.get(session_id)
        turn = session.running_turn if session is not None else None
        if turn is not None and turn.finished:
            turn = None  # answered (in wire order) though its task has not let go of it yet
        if turn is None and session is not None and session.turns and update.get("sessionUpdate") in TURN_UPDATES:
            # After the prompt's answer, before the next prompt: still that turn's (the TypeScript SDK
            # delivers an agent's last usage_update after the answer it was sent before).
            turn = session.turns[-1]
        if turn is not None:
            if update.get("sessionUpdate") in COMPACTION_UPDATES:
                turn.note_compaction(state.compactions[str(update.get("compactionId"))])
            turn.apply(update)
        else:
            state.keep_outside_turn(update)
        state.emit("update", {"turn": turn, "update": update})
        if not known:
            return f"ignored: unknown update kind {update.get('sessionUpdate')!r}"
        return odd_values_note(update.get("configOptions")) if "configOptions" in update else None

    def _hold(self, session_id: Any, update: dict[str, Any]) -> str:
        """An update for a session we do not know: kept if a session/new, load or resume is on its way
        (agents may stream before answering), else ignored."""
        opening = self._host.connection.router.awaiting(*OPENING_METHODS)
        if not opening or not isinstance(session_id, str):
            return "ignored: unknown session"
        self._host.session_table.hold(session_id, update)
        return "held: its session is being opened"


class AgentRequests:
    """The agent's requests to the client, answered for the agent's sessions (the connection's handler)."""

    def __init__(self, host: RequestHost) -> None:
        self._host = host
        self.ext_handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}

    def _session_named(self, params: dict[str, Any]) -> Session | None:
        """The open session a request names; None for an unknown id or one that is not a string."""
        return self._host.session_table.get(params.get("sessionId"))

    async def __call__(self, method: str, params: Any, is_notification: bool) -> Any:
        # The SDK is loaded on first use (_sdk.py): importing the client must not load it.
        from acp.exceptions import RequestError

        params = params if isinstance(params, dict) else {}
        if method == "session/update":
            return None  # applied in wire order by _on_frame
        if method in self.ext_handlers:
            result = self.ext_handlers[method](params)
            if inspect.isawaitable(result):
                result = await result
            return None if is_notification else (result if result is not None else {})
        if is_notification:
            return None  # unknown notifications are ignored
        if method == "session/request_permission":
            session = self._session_named(params)
            if session is None:
                return {"outcome": {"outcome": "cancelled"}}
            return await answer_permission(session, params)
        if method == "elicitation/create":
            return await self._elicit(params)
        if method in ("fs/read_text_file", "fs/write_text_file") and self._host.fs:
            session = self._session_named(params)
            if session is None:
                raise RequestError.invalid_params({"message": f"unknown session {params.get('sessionId')!r}"})
            return await self._fs(session, method, params)
        raise RequestError.method_not_found(method)

    async def _elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        """An ``elicitation/create`` request: the form is answered by the turn's, session's or agent's policy."""
        session = self._session_named(params)
        if params.get("mode") != "form" or not isinstance(params.get("requestedSchema"), dict):
            return {"action": "decline"}  # only forms are advertised
        turn = session.running_turn if session is not None else None
        request = ElicitationRequest(session, str(params.get("message") or ""), params["requestedSchema"],
                                     params, turn)
        policy = policy_in_force(turn.elicitation if turn is not None else None,
                                 session.elicitation if session is not None else None, self._host.elicitation)
        record = await decide_elicitation(policy, request)
        if turn is not None:
            turn.record_elicitation(record)
        return elicitation_response(record)

    async def _fs(self, session: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer fs/read_text_file or fs/write_text_file within the rules of connection/files.py.

        The file I/O runs on a worker thread (a slow disk must not stall every agent's frames);
        a refusal is recorded on the running turn here, on the loop thread, and answered as an error."""
        from acp.exceptions import RequestError  # the SDK, loaded on first use (_sdk.py)

        roots = [session.cwd, *session.additional_directories]
        raw = params.get("path")
        try:
            if method == "fs/read_text_file":
                text = await asyncio.to_thread(files.read_text, raw, roots, params.get("line"), params.get("limit"))
                return {"content": text}
            await asyncio.to_thread(files.write_text, raw, roots, params.get("content"),
                                    notebooks=self._host.notebook_writes, protected=files.kernel_notebooks())
            return {}
        except files.FileRefused as refused:
            message, code, data = refused.message, refused.code, refused.data
        except OSError as exc:
            message, code, data = f"{method} {raw}: {exc.strerror or exc}", INTERNAL_ERROR, {"path": raw}
        turn = session.running_turn
        if turn is not None and code == INVALID_PARAMS:
            # A refusal by the rules (outside the directories, a notebook, not a regular file...) is shown on
            # the turn as a denied request; a file that is simply missing is not a decision of ours.
            turn.record_permission(PermissionRecord({"path": raw}, [], None))
        raise RequestError(code, message, data)
