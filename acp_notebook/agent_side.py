"""The one agent-side serving path of the package: an agent object served on the SDK's public ``Connection``.

Both agents of this package serve here: the demo agent (in its process on stdio, ``demo/server.py``,
and in memory, ``DemoAgent.serve_acp``) and a learner's ``CellAgent`` (in memory, ``CellAgent.serve_acp``).
``serve(agent, writer, reader)`` makes an ``acp.connection.Connection`` whose handler is the SDK's
``acp.router.MessageRouter`` filled from ``ROUTES`` (both public API on the SDK's 0.12 and 1.x lines),
hands the connection to ``agent.on_connect`` and runs it until the client goes.

What this path does that the SDK's own agent side (``AgentSideConnection`` / ``run_agent``) does not:

- Params are read as the JSON they are, not validated into the SDK's pydantic schema models. Building
  those models is about 0.35 s of CPU, most of a demo process's start (the tests start hundreds), and
  the models drop what they do not know (``_custom`` option categories, unstable params).
  ``ROUTES`` says, per method, which agent method answers it and which param goes to which keyword;
  a param that is missing or of the wrong JSON type is refused with INVALID_PARAMS naming it, as the
  models would refuse it. A method the agent has no method for is METHOD_NOT_FOUND.
- The agent holds the ``Connection`` itself (``on_connect``), so what it sends (``session/update``...)
  goes out as its own dicts, unchanged, through the public ``send_notification`` / ``send_request``;
  the typed side sends only its models, and its ``Connection`` is reachable only through a private
  attribute (``AgentSideConnection._conn``), which nothing here reads. Stream observers
  (``Connection.add_observer``) are public too: the demo sends its "after the answer" notices from one,
  so they follow the prompt's answer on the wire (demo/notices.py).
- A notification the router refuses (unknown, or bad params) cannot be answered: one warning line is
  logged instead of the SDK's traceback.
- ``$/cancel_request`` (our client sends it for a request it gave up on) is accepted silently. The 1.x
  line's ``Connection`` acts on it itself before the router (it cancels the request's task, and the
  request is answered with the cancellation error); the 0.12 line has no such handling, so there the
  request runs to its end (a turn is ended by ``session/cancel``, which every agent here honours).
- ``_``-prefixed methods go to the agent's ``ext_method`` / ``ext_notification`` when it has them
  (METHOD_NOT_FOUND for a request, nothing for a notification, when it has not).

Everything runs on the serving event loop; the router keeps no state of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from acp.connection import Connection
from acp.exceptions import RequestError
from acp.router import MessageRouter, Route

from ._protocol import INVALID_PARAMS

__all__ = ["ROUTES", "Param", "Served", "build_handler", "build_router", "serve"]

log = logging.getLogger(__name__)

# A param's JSON type, as the messages name it -> the Python types json.loads makes of it.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "a string": (str,),
    "an integer": (int,),
    "an object": (dict,),
    "an array": (list,),
    "a string or a boolean": (str, bool),
}


@dataclass(frozen=True)
class Param:
    """One param of a request: its JSON name, the agent method's keyword, its JSON type, whether it must be there."""

    name: str
    keyword: str
    kind: str
    required: bool = True

    def read(self, method: str, params: dict[str, Any]) -> Any:
        value = params.get(self.name)
        if value is None:
            if self.required:
                raise RequestError(INVALID_PARAMS, f"{method} needs {self.kind} {self.name!r}", {self.name: None})
            return None
        types = _JSON_TYPES[self.kind]
        # JSON true is not an integer here, although Python's bool is an int.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise RequestError(
                INVALID_PARAMS, f"{method}: {self.name!r} must be {self.kind}, got {type(value).__name__}",
                {self.name: value},
            )
        return value


def _session_id() -> Param:
    return Param("sessionId", "session_id", "a string")


def _mcp_servers(required: bool) -> Param:
    return Param("mcpServers", "mcp_servers", "an array", required)


_CWD = Param("cwd", "cwd", "a string")
_DIRECTORIES = Param("additionalDirectories", "additional_directories", "an array", False)
_SYSTEM_PROMPT = Param("systemPrompt", "system_prompt", "an object", False)  # unstable: demo/instructions.py


class Served(Protocol):
    """An agent served here: the methods ``ROUTES`` names that it has (read by name, the SDK's agent
    interface names), ``on_connect``, and optionally ``ext_method`` / ``ext_notification``."""

    def on_connect(self, conn: Connection) -> None: ...


# method -> (the agent's method, its params, whether it is a notification)
ROUTES: dict[str, tuple[str, tuple[Param, ...], bool]] = {
    "initialize": ("initialize", (Param("protocolVersion", "protocol_version", "an integer"),
                                  Param("clientCapabilities", "client_capabilities", "an object", False),
                                  Param("clientInfo", "client_info", "an object", False)), False),
    "authenticate": ("authenticate", (Param("methodId", "method_id", "a string"),), False),
    "session/new": ("new_session", (_CWD, _mcp_servers(True), _DIRECTORIES, _SYSTEM_PROMPT), False),
    "session/load": ("load_session", (_session_id(), _CWD, _mcp_servers(True), _DIRECTORIES, _SYSTEM_PROMPT), False),
    "session/resume": ("resume_session", (_session_id(), _CWD, _mcp_servers(False), _DIRECTORIES, _SYSTEM_PROMPT),
                       False),
    "session/fork": ("fork_session", (_session_id(), _CWD, _mcp_servers(False), _DIRECTORIES, _SYSTEM_PROMPT), False),
    "session/list": ("list_sessions", (Param("cwd", "cwd", "a string", False),
                                       Param("cursor", "cursor", "a string", False)), False),
    "session/close": ("close_session", (_session_id(),), False),
    "session/delete": ("delete_session", (_session_id(),), False),
    "session/set_mode": ("set_session_mode", (_session_id(), Param("modeId", "mode_id", "a string")), False),
    "session/set_config_option": ("set_config_option", (_session_id(), Param("configId", "config_id", "a string"),
                                                        Param("value", "value", "a string or a boolean")), False),
    "session/set_model": ("set_model", (_session_id(), Param("modelId", "model_id", "a string")), False),
    "session/prompt": ("prompt", (_session_id(), Param("prompt", "prompt", "an array")), False),
    "session/cancel": ("cancel", (_session_id(),), True),
}


def _handler(method: str, answer: Callable[..., Awaitable[Any]],
             params_read: tuple[Param, ...]) -> Callable[[Any], Awaitable[Any]]:
    async def handle(params: Any) -> Any:
        if not isinstance(params, dict):
            raise RequestError(INVALID_PARAMS, f"{method} needs its params as a JSON object", {"params": params})
        result = await answer(**{param.keyword: param.read(method, params) for param in params_read})
        return {} if result is None else result

    return handle


def build_router(agent: Served) -> MessageRouter:
    """The SDK's router, filled from ``ROUTES`` with the methods the agent has."""
    router = MessageRouter(use_unstable_protocol=True)
    for method, (attribute, params, notification) in ROUTES.items():
        answer = getattr(agent, attribute, None)
        if callable(answer):  # a method the agent lacks stays unrouted: METHOD_NOT_FOUND, as on the typed side
            router.add_route(Route(method=method, func=_handler(method, answer, params),
                                   kind="notification" if notification else "request"))

    # Accepted and dropped by the router; the 1.x Connection has acted on it already (see the docstring).
    router.add_route(Route(method="$/cancel_request", func=None, kind="notification", optional=True))

    @router.handle_extension_request
    async def extension_request(name: str, payload: dict[str, Any]) -> Any:
        ext_method = getattr(agent, "ext_method", None)
        if ext_method is None:
            raise RequestError.method_not_found(f"_{name}")
        return await ext_method(name, payload)

    @router.handle_extension_notification
    async def extension_notification(name: str, payload: dict[str, Any]) -> None:
        ext_notification = getattr(agent, "ext_notification", None)
        if ext_notification is not None:
            await ext_notification(name, payload)

    return router


def build_handler(agent: Served) -> Callable[[str, Any, bool], Awaitable[Any]]:
    """The connection's handler: the router, and for a notification it refuses (unknown, or bad params),
    which cannot be answered, one warning line instead of a traceback."""
    router = build_router(agent)

    async def handle(method: str, params: Any, is_notification: bool) -> Any:
        try:
            return await router(method, params, is_notification)
        except RequestError as exc:
            if not is_notification:
                raise
            log.warning("notification %s ignored: %s", method, exc)
            return None

    return handle


async def serve(agent: Served, writer: Any, reader: asyncio.StreamReader | None = None) -> None:
    """Serve ``agent`` until the client goes: on byte streams (``writer``, ``reader``) or, with no reader,
    on an SDK message transport (``writer`` then has ``send`` / ``receive``, as ``MemoryTransport``'s end)."""
    connection = Connection(build_handler(agent), writer, reader, listening=False)
    agent.on_connect(connection)
    try:
        await connection.main_loop()
    finally:
        await asyncio.shield(connection.close())
