"""Session: one ACP session of an Agent (client.py): its state, its turns, and the calls that change it.

Each operation is one core coroutine (``_set``, ``_prompt``, ``_cancel``, ``_close``...) run on the
loop thread; ``twins()`` derives the public blocking and awaitable pair. ``start_turn`` may be called
from any thread: it queues the turn under the session's lock and hands it to the loop.

Threads: ``turns``, ``_running``, ``closed``, the session's ``SessionState`` and its turns are mutated
only on the background loop thread (``_last_queued`` under ``_queue_lock``, from any thread). The
agent's session tables are changed here on the loop thread too (a close or delete forgets the session).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _loop, _schema, attachments
from ._facade import twins
from ._permission import PermissionPolicy
from ._protocol import REQUEST_CANCELLED
from ._timeout import CANCEL_GRACE_S
from .connection.checks import odd_current_values, options_problem
from .connection.routing import Applier
from .elicitation import ElicitationPolicy
from .errors import (
    AcpError,
    AgentClosedError,
    ConfigOptionError,
    ProtocolError,
    ReplayMismatch,
    RpcError,
    _data_details,
)
from .kernel_link import KernelLink, close_links
from .kernel_tools.connect import note_answer
from .state import ConfigOption, ConfigOptions, SessionState
from .turn import Turn

if TYPE_CHECKING:
    from .client import Agent

__all__ = ["Session"]

# The blocking/awaitable twins wait this much longer than the agent's request deadline, so that a
# request nobody answers fails with the connection's error (which names the method and any stray
# answer) rather than the facade's plainer one.
_FACADE_MARGIN_S = 1.0


def _agent_timeout(agent: Agent, *_: Any, **__: Any) -> float | None:
    return None if agent.timeout is None else agent.timeout + _FACADE_MARGIN_S


def _session_timeout(session: Session, *_: Any, **__: Any) -> float | None:
    return _agent_timeout(session.agent)


class Session:
    """One ACP session: its live state (config, title, usage), turns, and the calls that change it.

    Turns run one at a time, in the order they were started (``start_turn`` queues).
    """

    def __init__(self, agent: Agent, session_id: str, state: SessionState, cwd: str,
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
        self._pending_permissions: set[asyncio.Future[Any]] = set()
        # The session's kernel tools (kernel_link.KernelLink): None when its agent offered none.
        self.kernel_tools: KernelLink | None = None
        self.forked_from: str | None = None  # the id of the session this one was forked from (session/fork)
        self.system_prompt: dict[str, Any] | None = None  # the systemPrompt sent when it opened (mode, content)
        # Branches (branching.py): take a Checkpoint before each prompt (turn.checkpoint); the Branch of a
        # conversation this session carries; the Handover its first prompt carries (a conversation it did not see).
        self.checkpoints = False
        self.checkpoint_of: str | None = None  # this session is a checkpoint of that one (listings leave it out)
        self.branch: Any = None
        self.handover: Any = None

    @property
    def running_turn(self) -> Turn | None:
        """The turn whose prompt is on the wire, or None (read on any thread; changed on the loop)."""
        return self._running

    def _adopt_kernel_tools(self, link: KernelLink | None) -> None:
        self.kernel_tools = link
        if link is not None:
            link.bind(self)

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
                                                 apply=_state_applier(state, "session/set_mode", params))
                return self.config
            params = {"sessionId": self.id, "configId": config_id, "value": value}
            if option.type == "boolean":
                params["type"] = "boolean"
            result = await self.agent.connection.request(
                "session/set_config_option", params, apply=_state_applier(state, "session/set_config_option", params))
        except ReplayMismatch:
            raise  # not the agent refusing: the recording has no such step
        except RpcError as exc:
            details = _data_details(exc.data)
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
        if not self.checkpoints:
            return
        from .branching import take_checkpoint  # it imports nothing of this module at run time

        try:
            turn.checkpoint = await take_checkpoint(self)
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
                note_answer(self, turn, answer["result"])  # an agent that never connected to its kernel tools
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
        for future in list(self._pending_permissions):
            if not future.done():
                future.set_result(None)
        await self.agent.connection.notify("session/cancel", {"sessionId": self.id})

    cancel, acancel = twins(_cancel, what="session/cancel", default_timeout=_session_timeout)

    async def _close(self) -> None:
        """End the session (session/close where the agent supports it); the agent keeps running."""
        if self.closed:
            return
        if self._running is not None:
            await self._cancel()
        connection = self.agent.connection
        if connection.state == "running" and connection.supports("close"):
            await connection.request("session/close", {"sessionId": self.id})
        self.closed = True
        if self.agent._sessions.get(self.id) is self:
            self.agent._sessions.pop(self.id, None)
            self.agent._updates.states.pop(self.id, None)
        await close_links([self.kernel_tools])

    close, aclose = twins(_close, what="session/close", default_timeout=_session_timeout)

    async def _delete(self) -> None:
        """Delete the session from the agent's list (``session/delete``, where the agent offers it); it is closed."""
        if self._running is not None:
            await self._cancel()
        await self.agent._delete_session(self.id)

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
        from .client import open_fork  # client.py imports this module

        return await open_fork(self, cwd, permission=permission, kernel_tools=kernel_tools)

    fork, afork = twins(_fork, what="session/fork", default_timeout=_session_timeout)

    async def _branch_sweep(self, prompt: str, models: Sequence[str], *, agents: Mapping[str, Any] | None = None,
                            scorers: Any = None, target: Any = None, turn_timeout: float | None = None) -> Any:
        """Ask several models the same ``prompt`` from this conversation's current point: a fork per model of this
        session's agent (``"smart"``, or ``"a:fast"`` through the proxy), a handover to a new session for
        ``AGENT:MODEL`` of another agent in ``agents`` ({name: Agent}); each answer stays in its own session
        (``result.sessions``), this one goes on unchanged. Returns a sweep result (``to_pandas()``, ``compare``,
        ``scorers=`` as for ``acpnb.sweep``, ``target=`` for them) shown side by side with time, tokens, cost."""
        if self.closed:
            raise AgentClosedError(f"session {self.id} is closed")
        from .branch_sweep import branch_sweep

        return await branch_sweep(self, prompt, models, agents=agents, scorers=scorers, target=target,
                                  timeout=turn_timeout)

    branch_sweep, abranch_sweep = twins(_branch_sweep, what="the branch sweep")

    # --- agent requests for this session (loop thread) -------------------
    def _agent_gone(self, error: AcpError) -> None:
        turn = self._running
        if turn is not None and not turn.finished:
            turn.finish(None, self.model, error)
        for future in list(self._pending_permissions):
            if not future.done():
                future.set_result(None)
        self.state.set_status("error", str(error).splitlines()[0])


def _state_applier(state: SessionState, method: str, params: dict[str, Any]) -> Applier | None:
    """How the answer to ``method`` changes the session's state, in wire order: the complete option list of a
    set_config_option answer, the mode of an accepted set_mode; None for requests that change nothing here."""
    def options(answer: dict[str, Any]) -> str | None:
        result = answer.get("result")
        if not isinstance(result, dict) or "configOptions" not in result:
            return None
        problem = options_problem(result["configOptions"])
        if problem is not None:
            return f"not applied: {problem}"
        state.set_options(result["configOptions"])
        return _odd_values_note(result["configOptions"])

    def mode(answer: dict[str, Any]) -> None:
        if "result" in answer and isinstance(params.get("modeId"), str):
            state.set_legacy_mode(params["modeId"])

    return {"session/set_config_option": options, "session/set_mode": mode}.get(method)


def _apply_session_result(state: SessionState, result: dict[str, Any]) -> str | None:
    """Apply a session/new, load or resume result; a note naming what was left out, or options that look odd.

    A malformed field is left out (the rest applies): the session is open either way."""
    clean, notes = dict(result), []
    options = clean.get("configOptions")
    if options is not None and options_problem(options) is not None:
        notes.append(f"config options not applied: {options_problem(clean.pop('configOptions'))}")
    for legacy in ("modes", "models"):
        value = clean.get(legacy)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(v, list) for k, v in value.items() if k.startswith("available") and v is not None)):
            notes.append(f"its {legacy} field not applied: not an object with lists of choices")
            del clean[legacy]
    state.apply_session_result(clean)
    odd = _odd_values_note(clean.get("configOptions"))
    return "; ".join(notes + ([odd] if odd else [])) or None


def _odd_values_note(options: Any) -> str | None:
    """A note for options whose current value is not among their choices (kept and shown as the agent says)."""
    odd = odd_current_values(options)
    return "; ".join(odd) if odd else None
