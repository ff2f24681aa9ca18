"""CellAgent: an ACP agent written as a small Python class in a notebook cell, for learning the protocol.

A learner subclasses ``CellAgent`` and writes plain (not async) methods for the parts of the
protocol the lesson is about; the base class answers the rest::

    class Parrot(CellAgent):
        name = "parrot"
        options = [select("tone", ["plain", "pirate"])]

        def prompt(self, text):
            self.think("Nothing to think about: I repeat.")
            self.say(f"Arr, {text}" if self.values["tone"] == "pirate" else text)

    agent = acpnb.start(Parrot())        # or %acp start --object parrot_instance

What the base class does for each request (the wire side lives in ``_Wire``):

- ``initialize``: protocol version, capabilities (list and close sessions) and ``agentInfo``
  from ``name`` / ``title`` / ``version``; the ``initialize(client)`` hook may change the answer.
- ``session/new``: a session holding a copy of ``options`` (boolean options only for clients
  that advertise ``clientCapabilities.session.configOptions.boolean``), then the ``new_session()`` hook.
- ``session/set_config_option``: the value is checked against the option's choices and stored,
  then the ``set_config_option(option_id, value)`` hook runs (it may add, remove or change
  other options; raising refuses the change and restores the list); the answer is the complete list.
- ``session/prompt``: the ``prompt(text)`` hook; inside it ``say`` / ``think`` / ``set_title`` /
  ``update_options`` / ``send_update`` send ``session/update`` notifications, and a returned
  string is said too. The answer is ``end_turn``, or ``cancelled`` as soon as ``session/cancel`` arrives.
- ``session/list`` and ``session/close``.

Errors are the agent's, never a hung cell: an exception in a hook becomes the error answer of
the request that ran it (naming the hook, the exception and the learner's line), and a hook
that blocks (``time.sleep``) blocks only its own thread, so ``session/cancel`` (sent by a
turn's timeout or a kernel interrupt) still ends the turn.

Serving. ``acp_notebook.agent_side`` (the package's one agent-side path, on the SDK's public
``Connection``) serves a ``_Wire``: in memory through ``serve_acp`` (``acpnb.start(agent)``), or on
stdio through ``run_stdio()`` (a script any ACP client can start). The SDK's own ``run_agent`` is
refused with a message: its typed side would drop what its models do not know (``_custom`` option
categories) from the updates a hook sends.

Threads. The ``_Wire`` lives on the agent's own thread and loop (``MemoryTransport``; with
``run_stdio``, the process's main thread); that loop is the only code that mutates ``_Wire._sessions`` and a turn's cancel state. Each hook
runs on a fresh daemon thread (so blocking code cannot stall the loop, and a hook that never
returns cannot keep the kernel from exiting). A ``CellSession``'s option list and title are
mutated by hooks and read by the loop: both hold ``CellSession._lock``. Notifications a hook
sends are handed to the agent's loop and the hook waits until they are written, so they
arrive in the order the hook sent them.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import datetime
import inspect
import itertools
import logging
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._protocol import INTERNAL_ERROR, INVALID_PARAMS, PROTOCOL_VERSION, prompt_text, unknown_session
from ._sdk import defer_sdk_package, stdio_streams
from .kernel_tools.client import kernel_entry, open_kernel_tools, result_text

__all__ = ["CellAgent", "CellSession", "KernelToolError", "TurnCancelled", "boolean", "select"]

# How long a hook waits for one notification to be written before giving up (the agent's loop is
# gone, e.g. the client closed the connection mid-turn).
SEND_TIMEOUT = 10.0
KERNEL_CALL_TIMEOUT = 120.0  # a kernel tool call from a hook (run_code may wait for the user's click)
HOOKS = ("initialize", "new_session", "set_config_option", "prompt")

_current: contextvars.ContextVar[CellSession | None] = contextvars.ContextVar("acp_cell_session", default=None)


class TurnCancelled(Exception):
    """Raised by ``say`` and the other senders once the client cancelled the turn (it is already answered)."""


# --- declaring options ------------------------------------------------------------------
def _label(value: str) -> str:
    """A readable name for an id or value: ``thought_level`` -> ``Thought level``."""
    text = str(value).replace("_", " ")
    return text[:1].upper() + text[1:]


def _choice(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        if not isinstance(item.get("value"), str):
            raise ValueError(f"a choice given as a dict needs a string 'value': {dict(item)!r}")
        return {"value": item["value"], "name": str(item.get("name") or _label(item["value"])),
                **({"description": str(item["description"])} if item.get("description") else {})}
    if isinstance(item, tuple) and len(item) == 2:
        return {"value": str(item[0]), "name": str(item[1])}
    if isinstance(item, str):
        return {"value": item, "name": _label(item)}
    raise ValueError(f"a choice is a string, a (value, name) pair or a dict with 'value', not {item!r}")


def _choices(choices: Sequence[Any] | Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The wire form of a select's choices: a flat list, or groups when given a mapping label -> choices."""
    if isinstance(choices, Mapping):
        return [{"group": re.sub(r"\W+", "_", label.lower()).strip("_") or f"group{n}", "name": str(label),
                 "options": [_choice(c) for c in items]} for n, (label, items) in enumerate(choices.items())]
    if isinstance(choices, str) or not isinstance(choices, Iterable):
        raise ValueError(f"choices are a list (or a dict of group label -> list), not {choices!r}")
    return [_choice(c) for c in choices]


def _values_of(option: Mapping[str, Any]) -> list[str]:
    values = []
    for item in option.get("options") or []:
        if isinstance(item, Mapping) and "group" in item:
            values += [c["value"] for c in item.get("options") or [] if isinstance(c, Mapping)]
        elif isinstance(item, Mapping):
            values.append(item.get("value"))
    return values


def select(id: str, choices: Sequence[Any] | Mapping[str, Sequence[Any]], *, name: str | None = None,
           default: str | None = None, category: str | None = None,
           description: str | None = None) -> dict[str, Any]:
    """A ``select`` config option as it travels in ``configOptions``.

    ``choices``: strings (the name is made from the value), ``(value, name)`` pairs, dicts with
    ``value``/``name``/``description``, or a dict of group label -> such a list. ``default``: the
    first choice when not given. ``category``: ``model``, ``mode``, ``thought_level`` or your own
    ``_name``; clients use it only for presentation.
    """
    option: dict[str, Any] = {"id": id, "name": name or _label(id), "type": "select", "options": _choices(choices)}
    values = _values_of(option)
    if not values:
        raise ValueError(f"option {id!r} needs at least one choice")
    option["currentValue"] = values[0] if default is None else default
    if category:
        option["category"] = category
    if description:
        option["description"] = description
    return _checked_option(option)


def boolean(id: str, *, name: str | None = None, default: bool = False, category: str | None = None,
            description: str | None = None) -> dict[str, Any]:
    """An on/off config option (``type: boolean``); only clients that advertise boolean support get it."""
    option: dict[str, Any] = {"id": id, "name": name or _label(id), "type": "boolean", "currentValue": bool(default)}
    if category:
        option["category"] = category
    if description:
        option["description"] = description
    return _checked_option(option)


def _checked_option(option: Any) -> dict[str, Any]:
    """``option`` as a plain dict, or ValueError saying what is wrong with it (for the class's cell)."""
    if not isinstance(option, Mapping):
        raise ValueError(f"a config option is a dict (use select(...) or boolean(...)), not {option!r}")
    option = copy.deepcopy(dict(option))
    oid = option.get("id")
    if not isinstance(oid, str) or not oid:
        raise ValueError(f"a config option needs a string 'id': {option!r}")
    option.setdefault("name", _label(oid))
    kind = option.get("type")
    if kind == "select":
        values = _values_of(option)
        if option.get("currentValue") not in values:
            raise ValueError(f"option {oid!r}: currentValue {option.get('currentValue')!r} is not one of its "
                             f"choices {values}")
    elif kind == "boolean":
        if not isinstance(option.get("currentValue"), bool):
            raise ValueError(f"option {oid!r}: a boolean option's currentValue is True or False")
    else:
        raise ValueError(f"option {oid!r}: type is 'select' or 'boolean', not {kind!r}")
    return option


def _checked_options(options: Iterable[Any]) -> list[dict[str, Any]]:
    checked = [_checked_option(o) for o in options]
    ids = [o["id"] for o in checked]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"option ids must be unique; repeated: {', '.join(duplicates)}")
    return checked


# --- sessions ---------------------------------------------------------------------------
class _Turn:
    """One prompt turn: cancelled by session/cancel (set on the agent's loop, read by the hook's thread)."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.cancel_seen = asyncio.Event()  # the same, awaitable on the agent's loop


class _Call:
    """What a running hook is working on: its session (None during initialize) and its turn (prompt only)."""

    def __init__(self, session: CellSession | None, turn: _Turn | None) -> None:
        self.session = session
        self.turn = turn


class KernelToolError(Exception):
    """A kernel tool answered with an error (refused by the notebook's policy or the user, a name that does not
    exist, code that raised...): the message is the tool's own."""


class CellSession:
    """One session of a CellAgent: its config options, its title, and the senders of ``session/update``.

    Inside a hook, ``CellAgent.session`` is the session the request is about; the same methods
    are on the agent itself (``self.say(...)``) as shortcuts.
    """

    def __init__(self, wire: _Wire, session_id: str, cwd: str, options: list[dict[str, Any]]) -> None:
        self.id = session_id
        self.cwd = cwd
        self.title: str | None = None
        self.updated_at = _now()
        self._wire = wire
        self._options = options
        self._lock = threading.RLock()
        self.kernel: dict[str, Any] | None = None  # the `kernel` MCP server the client offered (kernel_tools.client.kernel_entry)

    def __repr__(self) -> str:
        return f"<CellSession {self.id} {self.values}>"

    # --- config options (state only: the answer, or update_options(), tells the client) ---
    @property
    def values(self) -> dict[str, Any]:
        """Each option's current value, by id (a snapshot)."""
        with self._lock:
            return {o["id"]: o["currentValue"] for o in self._options}

    @property
    def options(self) -> list[dict[str, Any]]:
        """The complete option list as it is sent to the client (a copy)."""
        with self._lock:
            return copy.deepcopy(self._options)

    def option(self, option_id: str) -> dict[str, Any]:
        """One option (a copy); KeyError naming the session's options when there is none."""
        with self._lock:
            for option in self._options:
                if option["id"] == option_id:
                    return copy.deepcopy(option)
            raise KeyError(f"no option {option_id!r}; this session has: {', '.join(self.values) or 'none'}")

    def set_value(self, option_id: str, value: Any) -> None:
        """Change one option's current value; ValueError when the option does not take it."""
        with self._lock:
            option = next((o for o in self._options if o["id"] == option_id), None)
            if option is None:
                raise KeyError(f"no option {option_id!r}; this session has: {', '.join(self.values) or 'none'}")
            _check_value(option, value)
            option["currentValue"] = value

    def add_option(self, option: Mapping[str, Any], *, after: str | None = None) -> None:
        """Add an option (or replace the one with its id, in place); ``after``: the id it follows."""
        checked = _checked_option(option)
        if checked["type"] == "boolean" and not self._wire.client_booleans:
            return  # this client cannot show on/off options: the protocol says not to send them
        with self._lock:
            ids = [o["id"] for o in self._options]
            if checked["id"] in ids:
                self._options[ids.index(checked["id"])] = checked
            elif after is not None and after in ids:
                self._options.insert(ids.index(after) + 1, checked)
            else:
                self._options.append(checked)

    def remove_option(self, option_id: str) -> bool:
        """Remove an option if the session has it; True when it did."""
        with self._lock:
            kept = [o for o in self._options if o["id"] != option_id]
            removed = len(kept) != len(self._options)
            self._options = kept
            return removed

    def _restore(self, options: list[dict[str, Any]]) -> None:
        with self._lock:
            self._options = options

    # --- session/update notifications (from a hook's thread) -------------------------
    def send_update(self, update: Mapping[str, Any]) -> None:
        """Send one ``session/update`` with this ``update`` object (``sessionUpdate`` says which kind)."""
        call = _current.get()
        if call is not None and call.turn is not None and call.turn.cancelled.is_set():
            raise TurnCancelled("the client cancelled this turn (it has been answered 'cancelled')")
        self._wire.send_from_hook(self.id, dict(update))

    def say(self, text: str) -> None:
        """Stream a piece of the reply: an ``agent_message_chunk``."""
        self.send_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(text)}})

    def think(self, text: str) -> None:
        """Stream a piece of reasoning: an ``agent_thought_chunk``."""
        self.send_update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": str(text)}})

    def set_title(self, title: str | None, *, meta: Mapping[str, Any] | None = None) -> None:
        """A ``session_info_update``: the new title (None clears it), the time, and ``_meta`` if given."""
        with self._lock:
            self.title, self.updated_at = title, _now()
            update: dict[str, Any] = {"sessionUpdate": "session_info_update", "title": title,
                                      "updatedAt": self.updated_at}
        if meta is not None:
            update["_meta"] = dict(meta)
        self.send_update(update)

    def update_options(self) -> None:
        """Push the complete option list (``config_option_update``), e.g. after changing it during a turn."""
        self.send_update({"sessionUpdate": "config_option_update", "configOptions": self.options})

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled the turn this hook runs for (a long loop may check it)."""
        call = _current.get()
        return bool(call is not None and call.turn is not None and call.turn.cancelled.is_set())

    def listing(self) -> dict[str, Any]:
        """This session as ``session/list`` shows it."""
        with self._lock:
            entry = {"sessionId": self.id, "cwd": self.cwd, "updatedAt": self.updated_at}
            if self.title is not None:
                entry["title"] = self.title
            return entry


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _check_value(option: Mapping[str, Any], value: Any) -> None:
    if option["type"] == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"{option['id']} is on/off: its value is true or false, not {value!r}")
        return
    values = _values_of(option)
    if value not in values:
        raise ValueError(f"{value!r} is not a choice of {option['id']}; its choices: {', '.join(values)}")


# --- the learner's class ------------------------------------------------------------------
class CellAgent:
    """Subclass it and write the hooks a lesson is about; ``acpnb.start(YourAgent())`` serves it in memory.

    Class attributes: ``name`` (default: the class name in lower case, words joined by "-"), ``title``, ``version``,
    ``options`` (config options each new session starts with: ``select(...)``, ``boolean(...)``
    or dicts in the protocol's shape). Hooks, all plain methods run on a thread of their own:
    ``prompt(text)``, ``set_config_option(option_id, value)``, ``new_session()``, ``initialize(client)``.
    Inside a hook, ``self.session`` is the session concerned and ``self.say`` / ``self.think`` /
    ``self.set_title`` / ``self.update_options`` / ``self.values`` ... act on it.
    """

    name: str = "cell-agent"
    title: str | None = None
    version: str = "0.1.0"
    options: Sequence[Mapping[str, Any]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", cls.__name__).lower()
        # Checked here so that a mistake shows in the cell that defines the class, not at session/new.
        cls.options = _checked_options(cls.options)
        for hook in HOOKS:
            method = cls.__dict__.get(hook)
            if inspect.iscoroutinefunction(method):
                raise TypeError(f"{cls.__name__}.{hook}: write `def {hook}(...)`, not `async def`: CellAgent runs "
                                "each hook on a thread of its own, so blocking code (time.sleep) is fine there")

    async def serve_acp(self, transport: Any) -> None:
        """Serve this agent on an SDK message transport until the client goes (``MemoryTransport`` calls it for
        ``acpnb.start(YourAgent())``): the package's one agent-side path, ``agent_side``, with a ``_Wire``."""
        from .agent_side import serve  # the acp SDK's Connection: a CellAgent loads it only once it is served

        await serve(_Wire(self), transport)

    def run_stdio(self) -> None:
        """Speak ACP on this process's stdin and stdout until the client closes stdin: a script that defines the
        class and ends with ``YourAgent().run_stdio()`` is an agent any ACP client can start."""
        asyncio.run(self._serve_stdio())

    async def _serve_stdio(self) -> None:
        defer_sdk_package()  # the SDK's modules without its schema models, as the demo's process loads them
        from .agent_side import serve  # the acp SDK's Connection: after the line above
        reader, writer = await stdio_streams()
        # stdout is the protocol's pipe now: what a hook prints goes to stderr instead of corrupting it.
        real_stdout, sys.stdout = sys.stdout, sys.stderr
        try:
            await serve(_Wire(self), writer, reader)
        finally:
            sys.stdout = real_stdout

    def __call__(self, connection: Any) -> Any:
        """Refuses the SDK's ``run_agent`` / ``AgentSideConnection``, which would call this as an agent factory: their
        typed side cannot send a CellAgent's updates as they are (it drops fields its models do not know)."""
        raise TypeError(f"serve a CellAgent with {type(self).__name__}().run_stdio() (or acpnb.start(agent) in a "
                        "notebook), not with acp.run_agent: it speaks through acp_notebook.agent_side")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.version}>"

    # --- hooks (override the ones your lesson needs) ----------------------------------
    def initialize(self, client: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``initialize``. ``client``: its ``protocolVersion``, ``clientCapabilities``, ``clientInfo``."""
        asked = client.get("protocolVersion")
        # The rule: answer the client's version when we speak it, else the latest we speak.
        version = asked if isinstance(asked, int) and asked <= PROTOCOL_VERSION else PROTOCOL_VERSION
        info = {"name": self.name, "version": self.version, **({"title": self.title} if self.title else {})}
        return {
            "protocolVersion": version,
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "sessionCapabilities": {"list": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": info,
        }

    def new_session(self) -> None:
        """Called when a session opens (``self.session`` holds the declared options); may change them."""

    def set_config_option(self, option_id: str, value: Any) -> None:
        """Called after the client changed an option (the value is already stored and valid).

        May add, remove or change other options: the answer carries the complete list as it is
        when this returns. Raising refuses the change (the list is restored).
        """

    def prompt(self, text: str) -> str | None:
        """A turn: stream with ``self.say`` / ``self.think``; a returned string is said too."""
        return f"You said: {text}"

    # --- shortcuts to the current session, for use inside hooks ---------------------------
    @property
    def session(self) -> CellSession:
        call = _current.get()
        if call is None or call.session is None:
            raise RuntimeError("self.session (and say, think, set_title, ...) work inside the hooks that concern a "
                               "session: new_session, set_config_option and prompt")
        return call.session

    @property
    def values(self) -> dict[str, Any]:
        return self.session.values

    @property
    def cancelled(self) -> bool:
        return self.session.cancelled

    def say(self, text: str) -> None:
        self.session.say(text)

    def think(self, text: str) -> None:
        self.session.think(text)

    def set_title(self, title: str | None, *, meta: Mapping[str, Any] | None = None) -> None:
        self.session.set_title(title, meta=meta)

    def update_options(self) -> None:
        self.session.update_options()

    def send_update(self, update: Mapping[str, Any]) -> None:
        self.session.send_update(update)

    def add_option(self, option: Mapping[str, Any], *, after: str | None = None) -> None:
        self.session.add_option(option, after=after)

    def remove_option(self, option_id: str) -> bool:
        return self.session.remove_option(option_id)

    def set_value(self, option_id: str, value: Any) -> None:
        self.session.set_value(option_id, value)

    # --- the notebook's kernel tools, over MCP as any agent calls them ----------------------
    def kernel_tool(self, tool: str, **arguments: Any) -> str:
        """Call one of the tools of the ``kernel`` MCP server the client offered this session and return its text
        (an image is named). KernelToolError when the tool answered an error; RuntimeError when the session was
        offered no kernel server (``kernel_tools="off"``)."""
        session = self.session
        if session.kernel is None:
            raise RuntimeError("this session was offered no `kernel` MCP server (the client's kernel_tools is 'off', "
                               "or it is not acp-notebook)")
        return session._wire.kernel_call(session.kernel, tool, arguments)

    def list_variables(self) -> str:
        return self.kernel_tool("list_variables")

    def inspect_variable(self, name: str, rows: int = 10) -> str:
        return self.kernel_tool("inspect_variable", name=name, rows=rows)

    def run_code(self, code: str) -> str:
        """Run code in the user's kernel (as the notebook's policy allows: it may ask the user, or refuse)."""
        return self.kernel_tool("run_code", code=code)

    def notebook_history(self, n: int = 10) -> str:
        return self.kernel_tool("notebook_history", n=n)

    def propose_cell(self, code: str, explanation: str = "") -> str:
        return self.kernel_tool("propose_cell", code=code, explanation=explanation)


# --- the wire side ------------------------------------------------------------------------------
_CANCELLED = object()


def _plain(value: Any) -> dict[str, Any]:
    """An optional JSON object param (``agent_side`` has checked it is an object when present) as a dict."""
    return dict(value) if value else {}


def _learner_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The traceback's frames outside this module: the learner's code."""
    return [f for f in traceback.extract_tb(error.__traceback__) if f.filename != __file__]


def _settle(future: asyncio.Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    if not future.done():
        future.set_result(outcome)


async def _kernel_call(entry: dict[str, Any], tool: str, arguments: dict[str, Any]) -> str:
    async with open_kernel_tools(entry) as client:
        result = await client.call_tool(tool, arguments)
    text = result_text(result)
    if getattr(result, "is_error", False):
        raise KernelToolError(text)
    return text


class _Wire:
    """The object the SDK serves: the SDK's agent interface, answered with the CellAgent's hooks.

    Lives on the agent's loop (see the module docstring); hooks run on threads of their own.
    """

    def __init__(self, agent: CellAgent) -> None:
        self.agent = agent
        self.connection: Any = None  # the SDK's Connection, from on_connect
        self.client_booleans = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: dict[str, CellSession] = {}
        self._turns: dict[str, _Turn] = {}
        self._numbers = itertools.count(1)
        self._prefix = re.sub(r"[^a-z0-9]+", "-", str(agent.name).lower()).strip("-") or "session"

    def on_connect(self, connection: Any) -> None:
        """Called by ``agent_side.serve`` on the agent's loop with the SDK's ``Connection``, before any request."""
        self.connection = connection
        self._loop = asyncio.get_running_loop()

    # --- sending ----------------------------------------------------------------------
    async def send(self, session_id: str, update: dict[str, Any]) -> None:
        # The SDK's public Connection sends our dicts unchanged (`_custom` option categories included).
        await self.connection.send_notification("session/update", {"sessionId": session_id, "update": update})

    def send_from_hook(self, session_id: str, update: dict[str, Any]) -> None:
        """Send from a hook's thread and wait until it is written (so updates keep the hook's order)."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            raise RuntimeError("session updates are sent from the hooks (prompt, set_config_option, new_session)")
        try:
            asyncio.run_coroutine_threadsafe(self.send(session_id, update), loop).result(SEND_TIMEOUT)
        except (RuntimeError, TimeoutError) as exc:  # the loop is closed, or no longer runs
            raise ConnectionError("the client has disconnected; the update was not sent") from exc

    def kernel_call(self, entry: dict[str, Any], tool: str, arguments: dict[str, Any]) -> str:
        """From a hook's thread: one kernel tool call over MCP (a bridge started from ``entry``), on the agent's loop."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the kernel tools are called from the hooks (prompt, set_config_option, new_session)")
        return asyncio.run_coroutine_threadsafe(_kernel_call(entry, tool, arguments), loop).result(KERNEL_CALL_TIMEOUT)

    # --- running hooks --------------------------------------------------------------------
    async def run_hook(self, hook: str, session: CellSession | None, args: tuple[Any, ...] = (), *,
                       turn: _Turn | None = None, body: Callable[..., Any] | None = None) -> Any:
        """Run a hook on a thread of its own and return its result; its exception becomes the error answer.
        With a ``turn``: returns ``_CANCELLED`` as soon as the turn is cancelled, without waiting for the hook."""
        from acp.exceptions import RequestError  # the acp SDK: a CellAgent is served only once started

        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()
        call, target = _Call(session, turn), body or getattr(self.agent, hook)

        def work() -> None:
            _current.set(call)
            try:
                outcome: tuple[Any, BaseException | None] = (target(*args), None)
            except BaseException as exc:  # noqa: BLE001 - whatever the learner's code raises is the answer
                outcome = (None, exc)
            try:
                loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:  # the agent's loop is gone: nobody waits for this hook any more
                pass

        threading.Thread(target=work, daemon=True, name=f"acp-cell-{self._prefix}-{hook}").start()
        waiting: set[asyncio.Future[Any]] = {done}
        if turn is not None:
            waiting.add(asyncio.ensure_future(turn.cancel_seen.wait()))
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for other in waiting - {done}:
                other.cancel()
        if turn is not None and turn.cancelled.is_set():
            return _CANCELLED
        result, error = done.result()
        if error is None:
            return result
        if isinstance(error, RequestError):  # raised on purpose: the learner chose the error answer
            raise error
        raise self._error(hook, error)

    def _error(self, hook: str, error: BaseException) -> Exception:
        from acp.exceptions import RequestError  # the acp SDK: a CellAgent is served only once started

        frames = _learner_frames(error)
        where = frames[-1] if frames else None
        message = f"{type(self.agent).__name__}.{hook} raised {type(error).__name__}: {error}"
        details = f"line {where.lineno}, in {where.name}: {(where.line or '').strip()}" if where else ""
        # The root logger, as the SDK logs: MemoryTransport keeps what the agent's thread logs as the
        # agent's last words (its "stderr") instead of printing it into whichever cell runs.
        logging.getLogger().warning("%s (%s)", message, details or "no line of yours", exc_info=error)
        return RequestError(INTERNAL_ERROR, message,
                            {"details": details or message,
                             "traceback": traceback.format_list(frames)[-5:]})

    def _session(self, session_id: str) -> CellSession:
        from acp.exceptions import RequestError  # the acp SDK: a CellAgent is served only once started

        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError(*unknown_session(session_id, list(self._sessions)))
        return session

    # --- the SDK's agent interface ------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> dict[str, Any]:
        from acp.exceptions import RequestError  # the acp SDK: a CellAgent is served only once started

        self._loop = asyncio.get_running_loop()
        capabilities = _plain(client_capabilities)
        self.client_booleans = "boolean" in ((capabilities.get("session") or {}).get("configOptions") or {})
        client = {"protocolVersion": protocol_version, "clientCapabilities": capabilities,
                  "clientInfo": _plain(client_info)}
        answer = await self.run_hook("initialize", None, (client,))
        if not isinstance(answer, Mapping):
            raise RequestError(INTERNAL_ERROR, f"{type(self.agent).__name__}.initialize returned {answer!r}: it "
                               "returns the answer, a dict with protocolVersion, agentCapabilities and agentInfo")
        return dict(answer)

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> dict[str, Any]:
        from acp.exceptions import RequestError  # the acp SDK: a CellAgent is served only once started

        try:  # the class's options were checked when it was defined; an instance may have its own
            declared = _checked_options(self.agent.options)
        except ValueError as exc:
            raise RequestError(INTERNAL_ERROR, f"{type(self.agent).__name__}.options: {exc}") from None
        options = [o for o in declared if self.client_booleans or o["type"] != "boolean"]
        session = CellSession(self, f"{self._prefix}-{next(self._numbers)}", cwd, options)
        session.kernel = kernel_entry(mcp_servers)
        await self.run_hook("new_session", session)
        self._sessions[session.id] = session
        return {"sessionId": session.id, "configOptions": session.options}

    async def set_config_option(self, config_id: str, session_id: str, value: Any,
                                **kwargs: Any) -> dict[str, Any]:
        from acp.exceptions import RequestError  # the acp SDK: a CellAgent is served only once started

        session = self._session(session_id)
        before = session.options
        try:
            session.set_value(config_id, value)
        except (KeyError, ValueError) as exc:
            raise RequestError(INVALID_PARAMS, str(exc.args[0]), {"configId": config_id, "value": value}) from None
        try:
            await self.run_hook("set_config_option", session, (config_id, value))
        except BaseException:
            session._restore(before)
            raise
        return {"configOptions": session.options}

    async def prompt(self, session_id: str, prompt: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
        session = self._session(session_id)
        turn = _Turn()
        self._turns[session_id] = turn

        def body(text: str) -> None:
            said = self.agent.prompt(text)
            if said is not None and not isinstance(said, str):
                raise TypeError(f"prompt returned {type(said).__name__}: return a string to say, or nothing")
            if said:
                session.say(said)

        try:
            outcome = await self.run_hook("prompt", session, (prompt_text(prompt),), turn=turn, body=body)
        finally:
            if self._turns.get(session_id) is turn:
                del self._turns[session_id]
        return {"stopReason": "cancelled" if outcome is _CANCELLED else "end_turn"}

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        turn = self._turns.get(session_id)
        if turn is not None:
            turn.cancelled.set()
            turn.cancel_seen.set()

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> dict[str, Any]:
        listed = [s.listing() for s in self._sessions.values() if cwd is None or s.cwd == cwd]
        return {"sessions": listed}

    async def close_session(self, session_id: str, **kwargs: Any) -> dict[str, Any]:
        self._session(session_id)
        await self.cancel(session_id)
        del self._sessions[session_id]
        return {}
