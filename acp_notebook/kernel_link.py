"""The client's side of the kernel tools: which sessions are offered the MCP server ``kernel``, one
``KernelTools`` per session, the policy's "ask" answered in the running turn, and what the tools did
recorded on that turn.

The server itself (channel, bridge, tools, policy enforcement) is ``acp_notebook.kernel_tools``; here:

- ``resolve_policy`` turns what ``acpnb.start(kernel_tools=...)`` was given into a policy: None means
  "ask" inside a Jupyter kernel and "off" in plain Python (a script has no notebook to show a question
  in, and its namespace is not a user's live work).
- ``KernelToolsExtension`` is the kernel tools as a session extension (extensions.py), installed on an
  agent by ``acpnb.start`` (starting.py) and the %acp magics: it holds the policy, and for each session
  about to be opened (unless the policy is "off") starts one ``KernelLink``: a ``KernelTools`` with its
  own private channel and its ``mcpServers`` entry. The session adopts the link once the agent has
  answered (``bind``), tells it of each answered turn (the "never connected" notice, kernel_tools/
  connect.py), and closes it when it closes or its agent goes.
- ``run_code`` under "ask" becomes a ``KernelApproval`` (_permission.py: its own request type, not an
  ACP permission request) decided by the running turn's permission policy (the turn's, the session's,
  then the agent's) as permission requests are: in a ``%%acp`` cell that is an Allow / Reject prompt
  showing the code, or ``AcpMagics.permission`` = "allow" / "deny" for unattended runs. With no turn
  running (a background ``session.prompt`` from code is still a turn; an agent acting between turns is
  not) nobody can be asked and the call is refused, saying so.
- Every event of the tools becomes a ``KernelCall`` on the running turn (``turn.kernel_calls``),
  which the turn's view shows and saves; between turns they are kept on the link (``link.calls``). A
  run_code whose code outlived its stop is "held" (it holds the kernel) until its real end is reported.
- For agents on the other side (the demo agent, CellAgent), ``kernel_tools.client.kernel_entry`` finds the ``kernel``
  server among the ``mcpServers`` a session request brought: they do not import this module.

Threads: everything here runs on the background loop thread (the ``KernelTools`` callbacks are made
there); ``resolve_policy`` and the policy setter may be called from any thread. Process-wide: ``_ids``, the
counter that numbers kernel calls (``kernel-N``, the cards' own ids), one per process so that no two calls of
any session share an id; made at import, advanced on the loop thread.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._permission import KernelApproval, decide_permission
from ._protocol import KERNEL_SERVER_NAME
from ._redact import secret_values
from .extensions import close_links
from .kernel_tools import KernelTools
from .kernel_tools.connect import connect_facts, note_answer
from .kernel_tools.policy import OFF_REFUSAL, POLICIES, READ_ONLY_REFUSAL, parse_policy
from .session import Session, SessionHost
from .turn import KernelCall

__all__ = ["KernelLink", "KernelToolsExtension", "close_links", "entry_secrets", "in_ipython_kernel",
           "resolve_policy"]

logger = logging.getLogger(__name__)

# The options of a run_code approval: of the kinds of ACP permission options, so a policy "allow" picks
# allow_once and "deny" reject_once, as for a permission request.
RUN_OPTIONS = ({"optionId": "allow", "name": "Allow", "kind": "allow_once"},
               {"optionId": "reject", "name": "Reject", "kind": "reject_once"})
# How a question nobody answered ends: the turn was cancelled (or its agent went), or the agent took its call back.
WITHDRAWN = "withdrawn: the turn was cancelled before anyone answered"
WITHDRAWN_BY_AGENT = "withdrawn: the agent cancelled its call before anyone answered"
CALLS_KEPT = 200  # kernel calls kept on a link between turns
_ids = itertools.count(1)


def in_ipython_kernel() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel), without importing IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def resolve_policy(value: str | None, *, api: str = "acpnb.start") -> str:
    """The policy for ``kernel_tools=value``: None is "ask" in a Jupyter kernel and "off" elsewhere; a word
    is checked. ValueError naming ``api`` and the words otherwise."""
    if value is None:
        return "ask" if in_ipython_kernel() else "off"
    try:
        return parse_policy(value)
    except ValueError:
        raise ValueError(f"{api}(kernel_tools={value!r}): the kernel tools' policy is one of "
                         f"{', '.join(repr(w) for w in POLICIES)} (or None: 'ask' in a Jupyter kernel, "
                         "'off' in plain Python)") from None


def entry_secrets(entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The secret values of a ``kernel`` entry's environment (its token), to be masked wherever frames are kept."""
    env = {str(pair.get("name")): str(pair.get("value")) for pair in entry.get("env") or [] if isinstance(pair, dict)}
    return secret_values(env)


class KernelToolsExtension:
    """The kernel tools as a session extension: the policy, and a ``KernelLink`` for each session opened under a
    policy other than "off". Changing ``policy`` applies at once to the links of open sessions."""

    name = KERNEL_SERVER_NAME

    def __init__(self, policy: str | None = None, *, api: str = "acpnb.start") -> None:
        self._policy = resolve_policy(policy, api=api)
        self._links: list[KernelLink] = []  # the open ones (closed links leave on the next change)

    @property
    def policy(self) -> str:
        return self._policy

    @policy.setter
    def policy(self, value: str) -> None:
        """Any thread; "off" keeps the open links' channels (every call is refused), so switching back on works."""
        self._policy = resolve_policy(value, api="agent.kernel_tools = ")
        self._links = [link for link in self._links if not link.closed]
        for link in self._links:
            link.policy = self._policy

    async def open(self, agent: SessionHost) -> KernelLink | None:
        """A started link for a session ``agent`` is about to open; None when the policy is "off"."""
        if self._policy == "off":
            return None
        link = KernelLink(agent, self._policy)
        # The SDK is imported at once unless the agent is known to connect only when a prompt needs the kernel.
        facts = connect_facts(agent)
        link.entry = dict(await link.tools.start(import_sdk_now=facts is None or facts.mcp_connect != "lazy"))
        self._links.append(link)
        return link


class KernelLink:
    """One session's kernel tools: the ``KernelTools`` with its channel, and what its calls did."""

    name = KERNEL_SERVER_NAME

    def __init__(self, agent: SessionHost, policy: str) -> None:
        self.agent = agent
        self.session: Session | None = None
        self.entry: dict[str, Any] | None = None
        self.calls: list[KernelCall] = []  # calls made while no turn ran
        self._open: dict[str, KernelCall] = {}  # calls not answered yet (or held), by their MCP identity
        self._turns: dict[str, Any] = {}  # call id -> the turn it began in, until it ends (a Turn)
        self.tools = KernelTools(policy=policy, ask=self._ask, on_event=self._on_event)
        self.closed = False
        self._policy_observers: list[Callable[[str], None]] = []

    def bind(self, session: Session) -> None:
        self.session = session

    def secrets(self) -> list[tuple[str, str]]:
        """The token in its entry, to be masked wherever frames are written down."""
        return entry_secrets(self.entry) if self.entry is not None else []

    def turn_answered(self, session: Session, turn: Any, result: Mapping[str, Any]) -> None:
        """A turn of its session ended with the agent's answer: say once if the agent never connected."""
        note_answer(session, turn, dict(result))

    @property
    def policy(self) -> str:
        return str(self.tools.policy)

    @policy.setter
    def policy(self, value: str) -> None:
        """Any thread; "off" keeps the channel open (every call is refused), so switching back on works again."""
        if self.closed:
            return
        before = self.tools.policy
        self.tools.policy = value
        if self.tools.policy != before:
            for observer in list(self._policy_observers):
                try:
                    observer(self.tools.policy)
                except Exception:  # noqa: BLE001 - a view's failure must not stop the change
                    logger.exception("a kernel tools policy observer failed")

    def mcp_frames(self) -> list[dict[str, Any]]:
        """The MCP messages between the agent and these tools, as the kernel's side saw them (a snapshot; see
        KernelTools.mcp_frames); the inspector shows them among the ACP frames."""
        return list(self.tools.mcp_frames)

    def observe_policy(self, observer: Callable[[str], None]) -> Callable[[], None]:
        """Call ``observer(policy)`` (on the thread that changed it) whenever the policy changes; the unsubscribe."""
        self._policy_observers.append(observer)

        def unsubscribe() -> None:
            if observer in self._policy_observers:
                self._policy_observers.remove(observer)

        return unsubscribe

    async def close(self) -> None:
        """Close the channel (idempotent): the bridge the agent runs gets refused from now on."""
        if self.closed:
            return
        self.closed = True
        for call in list(self._open.values()):
            if call.status == "asking":
                self._note(call, status="withdrawn", decision="withdrawn: the session closed")
        await self.tools.close()

    # --- the policy's question (loop thread) ---------------------------------------
    async def _ask(self, request: Any) -> bool | str:
        """Whether ``request.code`` may run (True), or why not: the running turn's permission policy decides.

        A user's click on Reject answers False (the tools say the user rejected it); anything else that is not
        a yes answers its reason, so the agent is not told a person refused when nobody was asked.
        """
        code = str(getattr(request, "code", "") or "")
        session = self.session
        turn = session.running_turn if session is not None else None
        call = self._call_for(str(getattr(request, "call_id", "") or ""), "run_code", {"code": code})
        if session is None or turn is None:
            why = "no turn is running in this session, so nobody could be asked (kernel_tools='ask')"
            self._note(call, status="refused", decision=f"refused: {why}")
            return why
        self._note(call, status="asking")
        approval = KernelApproval(session, turn, call, code, [dict(o) for o in RUN_OPTIONS])
        try:
            chosen, reason = await decide_permission(session, approval)
        except asyncio.CancelledError:  # the agent cancelled its call (notifications/cancelled) while it was asked
            self._note(call, status="withdrawn", decision=WITHDRAWN_BY_AGENT)
            raise
        allowed = chosen == "allow"
        if chosen is None and not reason:  # the turn was cancelled (Cancel turn, an interrupt) or the agent went
            self._note(call, status="withdrawn", decision=WITHDRAWN)
            return WITHDRAWN
        words = "allowed" if allowed else "rejected" if chosen == "reject" else "not answered"
        decision = f"{words} ({reason})" if reason else words
        self._note(call, status="running" if allowed else "refused", decision=decision)
        return allowed or (False if chosen == "reject" and not reason else decision)

    # --- what the tools did (loop thread) ------------------------------------------
    def _call_for(self, call_id: str, tool: str, arguments: Mapping[str, Any]) -> KernelCall:
        """The record of the MCP call ``call_id`` (its identity: connection and request), made on its first event."""
        call = self._open.get(call_id) if call_id else None
        if call is None:
            code = str(arguments.get("code") or "") if tool in ("run_code", "propose_cell") else ""
            call = KernelCall(id=f"kernel-{next(_ids)}", tool=tool, arguments=dict(arguments), code=code,
                              request=call_id)
            if call_id:
                self._open[call_id] = call
        return call

    def _on_event(self, event: Any) -> None:
        kind = getattr(event, "kind", "")
        try:
            call = self._call_for(str(getattr(event, "call_id", "") or ""), str(event.tool), event.arguments or {})
            self._apply(kind, call, event)
        except Exception:  # noqa: BLE001 - a view's record must never fail the tool call itself
            logger.exception("could not record a kernel tool event %r", kind)

    def _apply(self, kind: str, call: KernelCall, event: Any) -> None:
        """One event of ``call``: its status, decision, outputs and error as the kernel saw them."""
        error = str(event.error or "")
        if kind == "tool_call":
            policy = self.policy
            if policy == "off" or (call.tool == "run_code" and policy == "read-only"):
                # Refused by the policy before anything runs: no start or finish event follows.
                self._note(call, status="refused", error=OFF_REFUSAL if policy == "off" else READ_ONLY_REFUSAL,
                           decision=f"refused by the policy (kernel_tools = {policy!r})")
            elif call.tool == "run_code" and policy == "allow":
                self._note(call, status="running", decision="allowed by the policy (kernel_tools = 'allow')")
            elif call.tool != "run_code":
                self._note(call, status="running")
        elif kind == "run_code_started":
            self._note(call, status="running")
        elif kind == "run_code_held":  # still running after its stop: open until its run_code_finished
            self._note(call, status="held", outputs=list(event.outputs or []), error=error)
        elif kind == "run_code_finished":
            was_held = call.status == "held"  # its answer went long ago: this end closes it
            self._note(call, status="failed" if error else "done", outputs=list(event.outputs or []), error=error)
            if was_held:
                self._open.pop(call.request, None)
        elif kind == "propose_cell":
            self._note(call, status="proposed", code=str(event.code or ""), explanation=str(event.explanation or ""))
        elif kind == "tool_answered":
            if call.tool not in ("run_code", "propose_cell") and call.status == "running":
                self._note(call, status="failed" if error else "done", error=error, outputs=list(event.outputs or []))
            elif call.status == "running" and error:  # run_code answered before it ran (busy, a bad argument)
                self._note(call, status="failed", error=error)
            if call.status != "held":  # a held run_code's end comes later, as run_code_finished
                self._open.pop(call.request, None)

    def _note(self, call: KernelCall, **changes: Any) -> None:
        """Apply ``changes`` to ``call`` and record it on the turn it began in (the running one when it began;
        on the link when none ran). A call that ended is forgotten here: a later one is a new call."""
        for name, value in changes.items():
            setattr(call, name, value)
        session = self.session
        turn = self._turns.get(call.id) or (session.running_turn if session is not None else None)
        ended = call.status not in ("asking", "running", "held")
        if ended:
            self._turns.pop(call.id, None)
        elif turn is not None:
            self._turns[call.id] = turn
        if turn is not None:
            turn.record_kernel(call)
            return
        if not any(known is call for known in self.calls):
            self.calls.append(call)
            del self.calls[:-CALLS_KEPT]

