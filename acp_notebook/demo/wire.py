"""How the demo agent is served: the SDK's ``Connection`` with a router of plain JSON params, no typed models.

The SDK's typed agent side validates every request into its pydantic schema models, and building
those models (about 0.35 s of CPU) was most of a demo process's start; the tests start a few hundred
of them. The demo reads its params as the JSON they are instead, as the client side of this package
does: ``ROUTES`` says, per method, which DemoAgent method answers it and which params it takes as
which keyword argument; a param that is missing or of the wrong JSON type is refused with
INVALID_PARAMS naming it, the way the SDK's models refuse it. Methods the table does not hold get
METHOD_NOT_FOUND, and ``_``-prefixed ones go to the agent's ``ext_method`` / ``ext_notification``
(the SDK's ``MessageRouter`` does that part, as it does for its typed side).

Both serving paths come here: the demo process on stdio (``server.serve``) and a DemoAgent object served
in memory (``MemoryTransport`` calls its ``serve_acp``). Everything runs on the serving event loop;
the router keeps no state of its own.
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

from .._protocol import INVALID_PARAMS

__all__ = ["ROUTES", "Param", "Served", "build_handler", "build_router", "serve_connection"]

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
    """An agent this module serves (agent.py's DemoAgent): the methods ``ROUTES`` names, read by name,
    and these."""

    def on_connect(self, conn: Connection) -> None: ...

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None: ...


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
    """The SDK's router, filled from ``ROUTES`` with the agent's methods."""
    router = MessageRouter(use_unstable_protocol=True)
    for method, (attribute, params, notification) in ROUTES.items():
        answer = getattr(agent, attribute)
        kind = "notification" if notification else "request"
        router.add_route(Route(method=method, func=_handler(method, answer, params), kind=kind))

    # Our client sends $/cancel_request for a request it gave up on; the SDK's 1.x Connection acts on it
    # before the router, and on the 0.12 line the demo's requests end on their own (a turn by session/cancel).
    router.add_route(Route(method="$/cancel_request", func=None, kind="notification", optional=True))

    @router.handle_extension_request
    async def extension_request(name: str, payload: dict[str, Any]) -> Any:
        return await agent.ext_method(name, payload)

    @router.handle_extension_notification
    async def extension_notification(name: str, payload: dict[str, Any]) -> None:
        await agent.ext_notification(name, payload)

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


async def serve_connection(agent: Served, writer: Any, reader: asyncio.StreamReader | None = None) -> None:
    """Serve ``agent`` until the client goes: on byte streams (``writer``, ``reader``) or, with no reader,
    on an SDK message transport."""
    connection = Connection(build_handler(agent), writer, reader, listening=False)
    agent.on_connect(connection)
    try:
        await connection.main_loop()
    finally:
        await asyncio.shield(connection.close())
