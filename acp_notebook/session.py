"""Session: one ACP session of an Agent (client.py): its state, its turns, and the calls that change it.

Each operation is one core coroutine (``_set``, ``_prompt``, ``_cancel``, ``_close``...) run on the
loop thread; ``twins()`` derives the public blocking and awaitable pair. ``start_turn`` may be called
from any thread: it queues the turn under the session's lock and hands it to the loop.

Opening a session is here too (``open_session``, ``open_fork``), so that ``Session.fork`` needs nothing
of client.py: the agent is known here only as a ``SessionHost`` (what a session reads and calls of it).
Session extensions (extensions.py; the notebook's kernel tools are one) are opened before a session opens,
told of each answered turn, and closed with the session.

Threads: ``turns``, ``_running``, ``closed``, the session's ``SessionState`` and its turns are mutated
only on the background loop thread (``_last_queued`` under ``_queue_lock``, from any thread). The
agent's session table is changed here on the loop thread too (an open adds, a close or delete forgets).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from . import _loop, _schema, attachments
from ._facade import twins
from ._permission import PendingDecisions, PermissionPolicy
from ._protocol import REQUEST_CANCELLED, system_prompt_modes
from ._redact import Redactor
from ._timeout import CANCEL_GRACE_S
from .connection import AgentConnection
from .connection.checks import options_problem
from .elicitation import ElicitationPolicy
from .errors import (
    AcpError,
    AgentClosedError,
    CapabilityError,
    ConfigOptionError,
    ProtocolError,
    ReplayMismatch,
    RpcError,
    data_details,
)
from .extensions import SessionExtension, SessionLink, close_links, open_links, servers_with
from .remedies import Remedy
from .session_results import apply_session_result, state_applier
from .session_table import SessionTable
from .state import ConfigOption, ConfigOptions, SessionState
from .turn import Turn

__all__ = ["Session", "SessionHost", "agent_deadline", "not_a_directory", "open_fork", "open_session",
           "open_session_links", "require_capability", "session_directory"]

logger = logging.getLogger(__name__)

# The blocking/awaitable twins wait this much longer than the agent's request deadline, so that a
# request nobody answers fails with the connection's error (which names the method and any stray
# answer) rather than the facade's plainer one.
_FACADE_MARGIN_S = 1.0


class SessionHost(Protocol):
    """What a session reads and calls of its agent (client.py's ``Agent``)."""

    name: str
    cwd: str
    connection: AgentConnection
    timeout: float | None
    permission: PermissionPolicy
    permission_timeout: float | None
    elicitation: ElicitationPolicy
    extensions: list[SessionExtension]
    system_prompt: str | Callable[[Any], str | None] | None
    system_prompt_mode: str
    session_table: SessionTable[Session]

    @property
    def capabilities(self) -> dict[str, Any]: ...

    @property
    def redactor(self) -> Redactor: ...

    @property
    def status(self) -> str: ...


def agent_deadline(agent: SessionHost, *_: Any, **__: Any) -> float | None:
    """How long the blocking twin of an agent's request waits: the agent's request deadline and a margin."""
    return None if agent.timeout is None else agent.timeout + _FACADE_MARGIN_S


def _session_timeout(session: Session, *_: Any, **__: Any) -> float | None:
    return agent_deadline(session.agent)


class Session:
    """One ACP session: its live state (config, title, usage), turns, and the calls that change it.

    Turns run one at a time, in the order they were started (``start_turn`` queues).
    """

    def __init__(self, agent: SessionHost, session_id: str, state: SessionState, cwd: str,
                 additional_directories: Sequence[str], permission: PermissionPolicy | None) -> None:
        self.agent = agent
        self.id = session_id
        self.state = state
        self.cwd = cwd
        self.additional_directories = list(additional_directories)
        self.permission = permission
        self.elicitation: ElicitationPolicy | None = None  # overrides the agent's form policy when set
        self.turns: list[Turn] = []
        self.closed = False
        self._running: Turn | None = None  # the turn whose prompt is on the wire
        self._queue_lock = threading.Lock()
        self._last_queued: Turn | None = None  # the latest turn made by start_turn / prompt
        self.decisions = PendingDecisions()  # permission requests and kernel calls waiting on a decision
        # What the agent's extensions opened for this session, by name (extensions.py), closed with it.
        self.links: dict[str, SessionLink] = {}
        self.forked_from: str | None = None  # the id of the session this one was forked from (session/fork)
        self.system_prompt: dict[str, Any] | None = None  # the systemPrompt sent when it opened (mode, content)
        # Branches (branching.py): take a Checkpoint before each prompt (turn.checkpoint); the Branch of a
        # conversation this session carries; the Handover its first prompt carries (a conversation it did not see).
        self.checkpoints = False
        # What takes a checkpoint (branching.take_checkpoint, set by the conversation that adopts this session).
        self.checkpointer: Callable[[Session], Awaitable[Any]] | None = None
        # What lets go of the checkpoints it took, when it closes (branching.release_checkpoints), if any.
        self.checkpoint_release: Callable[[Session], Awaitable[Any]] | None = None
        self.checkpoint_of: str | None = None  # this session is a checkpoint of that one (listings leave it out)
        self.branch: Any = None
        self.handover: Any = None

    @property
    def running_turn(self) -> Turn | None:
        """The turn whose prompt is on the wire, or None (read on any thread; changed on the loop)."""
        return self._running

    @property
    def kernel_tools(self) -> Any:
        """This session's kernel tools (kernel_link.py's ``KernelLink``: the link of the extension named "kernel"),
        or None when it was offered none."""
        return self.links.get("kernel")

    def adopt_links(self, links: Sequence[SessionLink]) -> None:
        """Serve this session with ``links`` (what the extensions opened for it), closed when the session closes."""
        self.links = {link.name: link for link in links}
        for link in links:
            link.bind(self)

    def _tell_links(self, turn: Turn, result: Mapping[str, Any]) -> None:
        for link in list(self.links.values()):
            try:
                link.turn_answered(self, turn, result)
            except Exception:  # noqa: BLE001 - an extension's failure must not keep the turn from ending
                logger.exception("session extension %r failed on an answered turn", link.name)

    # --- state -----------------------------------------------------------
    @property
    def config(self) -> ConfigOptions:
        return self.state.config

    @property
    def title(self) -> str | None:
        return self.state.title

    @property
    def display_title(self) -> str | None:
        """The agent's title, else the first prompt's (``state.title_source`` says which)."""
        return self.state.display_title

    @property
    def updated_at(self) -> str | None:
        return self.state.updated_at

    @property
    def meta(self) -> dict[str, Any]:
        return self.state.meta

    @property
    def usage(self) -> dict[str, Any] | None:
        return self.state.usage

    @property
    def history(self) -> list[dict[str, Any]]:
        """Updates received outside any turn (a load's replay, agent-initiated messages)."""
        return self.state.history

    @property
    def model_option(self) -> ConfigOption | None:
        return self.config.model_option

    @property
    def model(self) -> str | bool | None:
        return self.state.model

    @model.setter
    def model(self, value: str) -> None:
        option = self.model_option
        if option is None:
            raise ConfigOptionError(f"agent '{self.agent.name}' offers no model option in this session",
                                    config_id="model", value=value, valid=self.config.ids())
        self.set(option.id, value)

    @property
    def busy(self) -> bool:
        """Whether a turn's prompt is on the wire and not answered yet."""
        running = self._running
        return running is not None and not running.finished

    def __repr__(self) -> str:
        return f"<acp Session {self.id} of {self.agent.name!r} title={self.title!r} model={self.model!r}>"

    # --- set -------------------------------------------------------------
    def check_value(self, config_id: str, value: Any) -> ConfigOption:
        """The option ``set(config_id, value)`` would change; raises the ConfigOptionError that ``set``
        would raise for a value the session does not offer, without sending anything."""
        return self._check_value(config_id, value)

    def _check_value(self, config_id: str, value: Any) -> ConfigOption:
        if self.closed:
            raise AgentClosedError(f"session {self.id} is closed")
        option = self.config.get(config_id)
        if option is None:
            ids = self.config.ids()
            # Of the close names, the option whose choices hold the value given first: `modle=smart` means model.
            close = sorted(difflib.get_close_matches(config_id, ids, n=3),
                           key=lambda i: value not in [str(v) for v in getattr(self.config.get(i), "values", None) or ()])
            raise ConfigOptionError(
                f"no config option {config_id!r} in this session",
                config_id=config_id, value=value, valid=ids,
                hint=(f"Did you mean {close[0]!r}? " if close else "") + f"Options: {', '.join(ids) or 'none'}.",
            )
        if option.read_only:
            raise ConfigOptionError(
                f"option {config_id!r} is read-only: agent '{self.agent.name}' reports it only through the old "
                "`models` field and offers no way to change it over ACP",
                config_id=config_id, value=value, valid=option.values,
            )
        if option.type == "boolean":
            if not isinstance(value, bool):
                raise ConfigOptionError(f"option {config_id!r} is on/off: pass True or False, not {value!r}",
                                        config_id=config_id, value=value, valid=[False, True])
            return option
        if not isinstance(value, str) or value not in option.values:
            values = [str(v) for v in option.values]
            close = difflib.get_close_matches(str(value), values, n=1)
            raise ConfigOptionError(
                f"{value!r} is not a choice of {config_id!r}",
                config_id=config_id, value=value, valid=values,
                hint=(f"Did you mean {close[0]!r}? " if close else "") + f"Valid values: {', '.join(values)}.",
            )
        return option

    async def _set(self, config_id: str, value: str | bool) -> ConfigOptions:
        """Change one option; returns the complete new ConfigOptions. Bad values raise ConfigOptionError
        (locally, or when the agent refuses) and leave the session's state unchanged."""
        option = self._check_value(config_id, value)
        state = self.state
        try:
            if option.legacy_source == "modes":
                params = {"sessionId": self.id, "modeId": value}
                await self.agent.connection.request("session/set_mode", params,
                                                 apply=state_applier(state, "session/set_mode", params))
                return self.config
            params = {"sessionId": self.id, "configId": config_id, "value": value}
            if option.type == "boolean":
                params["type"] = "boolean"
            result = await self.agent.connection.request(
                "session/set_config_option", params, apply=state_applier(state, "session/set_config_option", params))
        except ReplayMismatch:
            raise  # not the agent refusing: the recording has no such step
        except RpcError as exc:
            details = data_details(exc.data)
            raise ConfigOptionError(
                f"agent '{self.agent.name}' refused {config_id}={value!r}: {exc.rpc_message}"
                # The reason is often only in data: {"details": ...} (claude, gemini) or a string (codex).
                + (f" ({details})" if details else ""),
                config_id=config_id, value=value, valid=option.values,
                hint="The session's settings are unchanged.",
            ) from exc
        if not isinstance(result, dict) or options_problem(result.get("configOptions")) is not None:
            problem = options_problem(result.get("configOptions")) if isinstance(result, dict) else "not an object"
            raise ProtocolError(f"agent '{self.agent.name}' answered set_config_option without a valid option list "
                                f"({problem}); the session's settings are unchanged")
        return self.config

    set, aset = twins(_set, what="set_config_option", default_timeout=_session_timeout)

    # --- turns -----------------------------------------------------------
    def start_turn(self, prompt: str | Sequence[Mapping[str, Any]], *, attach: Any = None,
                   permission: PermissionPolicy | None = None, elicitation: ElicitationPolicy | None = None,
                   timeout: float | None = None) -> Turn:
        """Queue a prompt and return its Turn at once (from any thread); views observe the turn.

        It is sent when the session's earlier turns have ended. ``turn.future`` resolves when it
        ends; ``attach`` adds objects as content blocks (see ``prompt``); ``permission`` and
        ``elicitation`` answer this turn's permission requests and forms; ``timeout`` cancels the
        turn (session/cancel) when it runs longer.
        """
        turn, previous = self._queue(prompt, permission, elicitation, attach)
        _loop.submit(_loop.run_async(self._run_turn(turn, previous), timeout, what="the prompt turn"))
        return turn

    def start_prompt(self, prompt: str | Sequence[Mapping[str, Any]],
                     timeout: float | None = None) -> concurrent.futures.Future[Turn]:
        """``start_turn(prompt).future``: a concurrent Future of the Turn."""
        return self.start_turn(prompt, timeout=timeout).future

    def _queue(self, prompt: Any, permission: PermissionPolicy | None,
               elicitation: ElicitationPolicy | None = None, attach: Any = None) -> tuple[Turn, Turn | None]:
        """A new turn, and the one it must wait for (turns of a session run in the order they were made)."""
        if self.closed:
            raise AgentClosedError(f"session {self.id} is closed")
        if not isinstance(prompt, (str, Sequence)):
            raise TypeError(f"a prompt is a string or a list of content blocks (dicts), not {type(prompt).__name__}")
        if not isinstance(prompt, str):
            wrong = next((i for i, block in enumerate(prompt) if not isinstance(block, Mapping)), None)
            if wrong is not None:
                raise TypeError(f"a prompt's list holds content blocks (dicts such as {{'type': 'text', 'text': "
                                f"'...'}}); item {wrong} is {type(prompt[wrong]).__name__}")
            problem = next(((i, said) for i, block in enumerate(prompt)
                            if (said := _schema.content_block_problem(block)) is not None), None)
            if problem is not None:
                raise ValueError(f"item {problem[0]} of the prompt is no ACP content block: {problem[1]} (e.g. "
                                 f"{{'type': 'text', 'text': '...'}})")
        attached = attachments.collect(attach, self.agent.capabilities, redactor=self.agent.redactor) \
            if attach is not None else []
        if attached:
            prompt = attachments.prompt_blocks(prompt, attached)
        with self._queue_lock:
            turn = Turn(prompt, self.id, self.model, session=self, permission=permission, elicitation=elicitation)
            turn.attachments = attached
            previous, self._last_queued = self._last_queued, turn
        return turn, previous

    async def _prompt(self, prompt: str | Sequence[Mapping[str, Any]], *, attach: Any = None,
                      permission: PermissionPolicy | None = None, elicitation: ElicitationPolicy | None = None) -> Turn:
        """Send a prompt (after any turn still running in this session) and wait for the turn to end.
        A timeout or Ctrl-C sends session/cancel. Raises the error that ended the turn, if any.

        ``attach``: objects sent with the text as content blocks (``attach=[df, fig]``; name them with
        ``(name, object)`` pairs or a dict): a DataFrame as a CSV resource, a figure or image as an image
        when the agent accepts images (else a note that it was left out), others as text; each capped,
        secrets masked (``acp_notebook.attachments``). ``turn.attachments`` lists what was sent."""
        return await self._run_turn(*self._queue(prompt, permission, elicitation, attach))

    prompt, aprompt = twins(_prompt, what="the prompt turn")

    async def _run_turn(self, turn: Turn, previous: Turn | None) -> Turn:
        try:
            if previous is not None and not previous.finished:
                await asyncio.wait({asyncio.wrap_future(previous.future)})
        except asyncio.CancelledError:
            turn.finish({"stopReason": "cancelled"}, self.model)  # given up while queued: never sent
            raise
        if self.closed:
            turn.finish(None, self.model, AgentClosedError(f"session {self.id} is closed"))
        else:
            await self._send_turn(turn)
        if turn.error is not None:
            raise turn.error
        return turn

    async def _checkpoint(self, turn: Turn) -> None:
        """Keep the conversation as it stands before ``turn`` goes (branching.py), where checkpoints are on."""
        if not self.checkpoints or self.checkpointer is None:
            return
        try:
            turn.checkpoint = await self.checkpointer(self)
        except asyncio.CancelledError:
            turn.finish({"stopReason": "cancelled"}, self.model)  # given up before it was sent
            raise

    def _prompt_params(self, turn: Turn) -> dict[str, Any]:
        """session/prompt's params; the first prompt of a session handed a conversation carries it first, and
        says so in ``_meta`` (branching.HANDOVER_META)."""
        blocks = [{"type": "text", "text": turn.prompt}] if isinstance(turn.prompt, str) \
            else [dict(b) for b in turn.prompt]
        params: dict[str, Any] = {"sessionId": self.id, "prompt": blocks}
        if self.handover is not None and not self.turns:
            turn.handover = self.handover
            blocks.insert(0, {"type": "text", "text": self.handover.text()})
            params["_meta"] = self.handover.meta()
        return params

    async def _send_turn(self, turn: Turn) -> None:
        await self._checkpoint(turn)
        params = self._prompt_params(turn)
        self._running = turn
        self.turns.append(turn)
        self.state.note_prompt(turn.prompt if isinstance(turn.prompt, str) else
                               " ".join(str(b.get("text", "")) for b in turn.prompt if b.get("type") == "text"))
        self.state.set_status("working")
        turn.mark_sent()

        def answered(answer: dict[str, Any]) -> None:
            if isinstance(answer.get("result"), dict):
                self._tell_links(turn, answer["result"])  # before finish: what they add is in the turn's views
                turn.finish(answer["result"], self.state.model)
            elif isinstance(answer.get("error"), dict) and answer["error"].get("code") == REQUEST_CANCELLED:
                # An agent that ended the turn by cancelling its handler (some SDKs do on $/cancel_request) says
                # no stop reason; the turn was cancelled all the same, and nothing more will come for it.
                turn.finish({"stopReason": "cancelled"}, self.state.model)

        try:
            with _loop.switch_interval.streaming():
                await self.agent.connection.request("session/prompt", params, apply=answered, timeout=None)
        except asyncio.CancelledError:
            await self._cancel_running(turn)
            raise
        except AcpError as exc:
            if isinstance(exc, RpcError) and exc.code == REQUEST_CANCELLED:  # as ``answered`` reads it
                turn.finish({"stopReason": "cancelled"}, self.state.model)
                self.state.set_status("idle", "cancelled")
                return
            turn.finish(None, self.state.model, exc)
            self.state.set_status("error", str(exc).splitlines()[0])
            return
        finally:
            if self._running is turn:
                self._running = None
        self.state.set_status("idle")

    async def _cancel_running(self, turn: Turn) -> None:
        """The caller gave up on the turn (interrupt, timeout): tell the agent, give it a moment to stop."""
        await asyncio.shield(self._cancel())
        if not turn.finished and self.agent.status == "running":
            with contextlib.suppress(asyncio.TimeoutError, AcpError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(turn.future)), CANCEL_GRACE_S)
        turn.finish({"stopReason": "cancelled"}, self.state.model)
        self.state.set_status("idle", "cancelled")

    async def _cancel(self) -> None:
        """Ask the agent to stop the running turn; pending permission requests are answered 'cancelled'."""
        self.decisions.withdraw_all()
        await self.agent.connection.notify("session/cancel", {"sessionId": self.id})

    cancel, acancel = twins(_cancel, what="session/cancel", default_timeout=_session_timeout)

    async def _close(self) -> None:
        """End the session (session/close where the agent supports it); the agent keeps running."""
        if self.closed:
            return
        if self._running is not None:
            await self._cancel()
        connection = self.agent.connection
        if self.checkpoint_release is not None and connection.state == "running":
            await self.checkpoint_release(self)
        if connection.state == "running" and connection.supports("close"):
            await connection.request("session/close", {"sessionId": self.id})
        self.closed = True
        self.agent.session_table.forget(self.id, self)
        await close_links(list(self.links.values()))

    close, aclose = twins(_close, what="session/close", default_timeout=_session_timeout)

    async def _delete(self) -> None:
        """Delete the session from the agent's list (``session/delete``, where the agent offers it); it is closed."""
        if self._running is not None:
            await self._cancel()
        await delete_session(self.agent, self.id)

    delete, adelete = twins(_delete, what="session/delete", default_timeout=_session_timeout)

    async def _fork(self, cwd: str | None = None, *, permission: PermissionPolicy | None = None,
                    kernel_tools: bool = True) -> Session:
        """A new session that starts with this one's history (``session/fork``, unstable in ACP v1), where the
        agent advertises ``sessionCapabilities.fork``; a CapabilityError naming the agent where it does not.
        The new session gets its own kernel tools (none with ``kernel_tools=False``), this one's directories
        (``cwd`` to change its working directory) and permission policy; ``forked_from`` names this session.
        This one goes on unchanged."""
        if self.closed:
            raise AgentClosedError(f"session {self.id} is closed")
        return await open_fork(self, cwd, permission=permission, kernel_tools=kernel_tools)

    fork, afork = twins(_fork, what="session/fork", default_timeout=_session_timeout)

    # --- the agent ended (loop thread) -------------------------------------
    def agent_gone(self, error: AcpError) -> None:
        """The agent closed or exited: the running turn ends with ``error``, pending decisions are withdrawn."""
        turn = self._running
        if turn is not None and not turn.finished:
            turn.finish(None, self.model, error)
        self.decisions.withdraw_all()
        self.state.set_status("error", str(error).splitlines()[0])



# --- opening and deleting sessions (loop thread) ---------------------------------------------------
def not_a_directory(path: str) -> str | None:
    """Why ``path`` cannot be a working directory ("PATH does not exist", "PATH is not a directory"), or None."""
    if os.path.isdir(path):
        return None
    return f"{path} {'is not a directory' if os.path.exists(path) else 'does not exist'}"


def session_directory(path: str | os.PathLike[str] | None, default: str, what: str = "working directory") -> str:
    """A session's directory as sent to the agent (absolute); AcpError, before anything is sent, for one that is
    not a directory here (the agent could only fail later, in its own words)."""
    if path is None:
        return default
    resolved = str(Path(path).resolve())
    if (problem := not_a_directory(resolved)) is not None:
        raise AcpError(f"the session's {what} {problem}", remedy=Remedy("existing_directory", {"what": "session"}))
    return resolved


def require_capability(agent: SessionHost, capability: str, method: str) -> None:
    """A CapabilityError unless the agent advertised ``capability`` (for ``method``) in initialize."""
    if not agent.connection.supports(capability):
        raise CapabilityError(
            f"agent '{agent.name}' does not support {method} (it did not advertise it in initialize)",
            remedy=Remedy("show_capabilities"),
        )


def system_prompt_params(agent: SessionHost) -> dict[str, Any] | None:
    """The ``systemPrompt`` of a session request: the agent's system prompt in its mode, where the agent takes
    one (None: no text, or an agent that advertises no systemPrompt, to which none may be sent); a
    CapabilityError, before anything is sent, for a mode the agent does not offer."""
    wanted = agent.system_prompt(agent) if callable(agent.system_prompt) else agent.system_prompt
    offered = system_prompt_modes(agent.capabilities)
    if not wanted or not offered:
        return None
    if agent.system_prompt_mode not in offered:
        raise CapabilityError(
            f"agent '{agent.name}' does not take a system prompt in {agent.system_prompt_mode!r} mode (it offers "
            f"{', '.join(offered)})", remedy=Remedy("system_prompt_mode", {"mode": "append"}))
    return {"mode": agent.system_prompt_mode, "content": [{"type": "text", "text": str(wanted)}]}


async def open_session_links(agent: SessionHost) -> list[SessionLink]:
    """The agent's extensions' links for a session about to open; their secrets (a kernel-tools token) are masked
    from here on wherever frames are written down (the log, recordings, the inspector)."""
    links = await open_links(agent, agent.extensions)
    for link in links:
        agent.redactor.add(link.secrets())
    return links


async def open_session(agent: SessionHost, method: str, lead: dict[str, Any], tail: dict[str, Any],
                       extra: Sequence[str], permission: PermissionPolicy | None,
                       mcp_servers: Sequence[Mapping[str, Any]] = (), kernel_tools: bool = True) -> Session:
    """session/new or session/fork: the request (``lead``, the MCP servers with the extensions' entries (the
    notebook's ``kernel``), ``tail``, the system prompt where the agent takes one), and the Session its answer
    opens, served by its extensions' links (none with ``kernel_tools=False``: a branch's checkpoint, never
    prompted itself)."""
    prompt = system_prompt_params(agent)  # before the links: a refused mode leaves nothing to close
    links = await open_session_links(agent) if kernel_tools else []
    servers, offered, unused = servers_with(mcp_servers, links)
    await close_links(unused)
    params: dict[str, Any] = {**lead, "mcpServers": servers, **tail}
    if prompt is not None:
        params["systemPrompt"] = prompt
    table = agent.session_table

    def opened(answer: dict[str, Any]) -> str | None:
        result = answer.get("result")
        if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            return apply_session_result(table.state_for(result["sessionId"]), result)
        return None

    try:
        result = await agent.connection.request(method, params, apply=opened)
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise ProtocolError(f"agent '{agent.name}' answered {method} without a sessionId: {result!r}")
    except BaseException:
        await close_links(offered)
        raise
    session = Session(agent, result["sessionId"], table.state_for(result["sessionId"]), lead["cwd"], extra,
                      permission)
    session.system_prompt = prompt
    session.adopt_links(offered)
    table.add(session)
    return session


async def open_fork(source: Session, cwd: str | os.PathLike[str] | None = None, *,
                    permission: PermissionPolicy | None = None, kernel_tools: bool = True) -> Session:
    """session/fork (unstable) for ``Session.fork``: a new session of the same agent that starts from ``source``'s
    history, in ``cwd`` (default: the source's), with the source's additional directories and permission policy
    and kernel tools of its own (none with ``kernel_tools=False``). A CapabilityError naming the agent unless it
    advertises ``sessionCapabilities.fork``."""
    agent = source.agent
    require_capability(agent, "fork", "session/fork")
    root = session_directory(cwd, source.cwd)
    extra = list(source.additional_directories)
    session = await open_session(agent, "session/fork", {"sessionId": source.id, "cwd": root},
                                 {"additionalDirectories": extra} if extra else {}, extra,
                                 source.permission if permission is None else permission, kernel_tools=kernel_tools)
    session.forked_from = source.id
    return session


async def delete_session(agent: SessionHost, session_id: str) -> None:
    """``session/delete`` (where the agent offers it): the session leaves the agent's list; an open one here is
    closed too."""
    require_capability(agent, "delete", "session/delete")
    await agent.connection.request("session/delete", {"sessionId": session_id})
    session = agent.session_table.forget(session_id)
    if session is not None:
        session.closed = True
