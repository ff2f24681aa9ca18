"""The demo agent as a real subprocess over real pipes, driven by the SDK's client side;
every frame in both directions is validated against the official ACP schema."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import acp
import pytest
from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    BooleanConfigOptionCapabilities,
    ClientCapabilities,
    ClientSessionCapabilities,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    SessionConfigOptionsCapabilities,
    WriteTextFileResponse,
)

from acp_notebook._protocol import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND
from acp_notebook.demo import DemoAgent, main
from acp_notebook.demo.server import build_parser
from acp_notebook.demo.store import STATE_ENV
from schema_check import FrameLog, RecordedFrame, SchemaViolation, schema_root, validate_frame
from jsonschema import Draft202012Validator
from tests.sdk_compat import text_block

AGENT_COMMAND = (sys.executable, "-m", "acp_notebook.demo")
STEP_TIMEOUT = 10.0  # one request/response round trip or one awaited frame
# The first round trip waits for the agent's interpreter to start and import the SDK: under a loaded `make test`
# (the suite and its SDK 1.x run side by side) that took over STEP_TIMEOUT in a clean clone's CI run.
START_TIMEOUT = 45.0
TEST_TIMEOUT = 60.0  # a whole test, so a hang fails instead of blocking the suite

T = TypeVar("T")


def run_async(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test body in a fresh event loop (the suite does not need pytest-asyncio)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), TEST_TIMEOUT))

    return wrapper


async def step(awaitable: Awaitable[T], timeout: float = STEP_TIMEOUT) -> T:
    return await asyncio.wait_for(awaitable, timeout)


@dataclass
class RecordingClient:
    """A minimal acp.Client: answers permission requests and forms as told (per session), serves
    the real file system, and answers a request with an error where `failures` says so."""

    answers: dict[str, str] = field(default_factory=dict)  # session id -> optionId, or "cancelled"
    cancel_sent: asyncio.Event = field(default_factory=asyncio.Event)
    reads: list[tuple[str, str]] = field(default_factory=list)  # (session id, path)
    writes: list[tuple[str, str, str]] = field(default_factory=list)  # (session id, path, content)
    failures: dict[tuple[str, str], RequestError] = field(default_factory=dict)  # (session id, method) -> error
    forms: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # session id -> elicitation answer
    form_requests: list[tuple[str, Any]] = field(default_factory=list)  # (message, mode)
    form_opened: asyncio.Event = field(default_factory=asyncio.Event)

    def _maybe_fail(self, session_id: str, method: str) -> None:
        error = self.failures.get((session_id, method))
        if error is not None:
            raise error

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        self._maybe_fail(session_id, "session/request_permission")
        answer = self.answers.get(session_id, "allow_once")
        if answer == "not-an-outcome":
            return {"outcome": {"outcome": "rejected"}}  # sent as it is: no such outcome in the protocol
        if answer == "cancelled":
            # A client that cancels the turn must answer pending permission requests "cancelled".
            await self.cancel_sent.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Assertions read updates from the raw frames (wire order, custom fields intact)."""

    async def read_text_file(
        self, path: str, session_id: str, limit: Any = None, line: Any = None, **kwargs: Any
    ) -> Any:
        self.reads.append((session_id, path))
        self._maybe_fail(session_id, "fs/read_text_file")
        try:
            return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None

    async def write_text_file(self, content: str, path: str, session_id: str, **kwargs: Any) -> Any:
        self.writes.append((session_id, path, content))
        self._maybe_fail(session_id, "fs/write_text_file")
        Path(path).write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> dict[str, Any]:
        self.form_requests.append((message, mode))
        self._maybe_fail(mode.session_id, "elicitation/create")
        self.form_opened.set()
        answer = self.forms.get(mode.session_id, {"action": "decline"})
        if answer is None:
            # Nobody answers until the test cancels the turn; then the form is dismissed.
            await self.cancel_sent.wait()
            return {"action": "cancel"}
        return answer

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


@dataclass
class Harness:
    conn: Any
    client: RecordingClient
    log: FrameLog
    cwd: str
    process: Any = None

    async def initialize(self, *, fs: bool = True, booleans: bool = True, forms: bool = True) -> dict[str, Any]:
        session_caps = None
        if booleans:
            session_caps = ClientSessionCapabilities(
                config_options=SessionConfigOptionsCapabilities(boolean=BooleanConfigOptionCapabilities())
            )
        elicitation = ElicitationCapabilities(form=ElicitationFormCapabilities()) if forms else None
        await step(
            self.conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), session=session_caps,
                    elicitation=elicitation,
                ),
                client_info=Implementation(name="acp-notebook-tests", version="0"),
            ),
            START_TIMEOUT,
        )
        return self.log.last_result("initialize")

    async def raw(self, method: str, params: dict[str, Any]) -> Any:
        """A request the SDK's client side has no method for (session/delete, session/set_model)."""
        return await step(self.conn._conn.send_request(method, params))

    async def new_session(self, cwd: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        response = await step(self.conn.new_session(cwd=cwd or self.cwd, mcp_servers=[]))
        return response.session_id, self.log.last_result("session/new").get("configOptions")

    async def set_option(self, session_id: str, config_id: str, value: str | bool) -> list[dict[str, Any]]:
        await step(self.conn.set_config_option(config_id=config_id, session_id=session_id, value=value))
        return self.log.last_result("session/set_config_option")["configOptions"]

    async def prompt(self, session_id: str, text: str) -> str:
        response = await step(self.conn.prompt(session_id=session_id, prompt=[text_block(text)]))
        return response.stop_reason

    def turn_frames(self, session_id: str) -> list[RecordedFrame]:
        """Frames since the session's most recent prompt request (updates of other sessions left out)."""
        start = max(
            i for i, f in enumerate(self.log.frames)
            if f.kind == "request" and f.method == "session/prompt" and f.params["sessionId"] == session_id
        )
        return [f for f in self.log.frames[start:] if f.update is None or f.params["sessionId"] == session_id]

    def reads_of(self, session_id: str) -> list[str]:
        return [path for sid, path in self.client.reads if sid == session_id]

    def writes_of(self, session_id: str) -> list[tuple[str, str]]:
        return [(path, content) for sid, path, content in self.client.writes if sid == session_id]


def updates_in(frames: list[RecordedFrame], kind: str | None = None) -> list[dict[str, Any]]:
    return [f.update for f in frames if f.update is not None and (kind is None or f.update["sessionUpdate"] == kind)]


def is_update(session_id: str, kind: str) -> Callable[[RecordedFrame], bool]:
    """A FrameLog.wait_for predicate: a `kind` session/update for `session_id`."""
    return lambda f: f.update is not None and f.params["sessionId"] == session_id and f.update["sessionUpdate"] == kind


def text_of(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates)


def option_ids(options: list[dict[str, Any]]) -> list[str]:
    return [o["id"] for o in options]


def option(options: list[dict[str, Any]], config_id: str) -> dict[str, Any]:
    return next(o for o in options if o["id"] == config_id)


@asynccontextmanager
async def demo_agent(
    tmp_path: Path, *flags: str, env: dict[str, str] | None = None, fs: bool = True, booleans: bool = True,
    forms: bool = True, initialize: bool = True, check_frames: bool = True, state_dir: Path | None = None,
) -> AsyncIterator[Harness]:
    """Spawn the demo agent and connect the SDK client to it; on exit, fail if any frame
    broke the schema (unless `check_frames` is False and the caller checks).

    The agent keeps its sessions in `state_dir`, by default the suite's (tests/conftest.py). The
    SDK passes only a few environment variables to the process, so the variable is passed here."""
    log = FrameLog(local="client")
    client = RecordingClient()
    agent_env = {STATE_ENV: str(state_dir) if state_dir is not None else os.environ[STATE_ENV], **(env or {})}
    async with acp.spawn_agent_process(
        client,
        *AGENT_COMMAND,
        *flags,
        env=agent_env,
        cwd=tmp_path,
        # Inherit stderr so the agent's log lands in pytest's captured output (an undrained pipe could block it).
        transport_kwargs={"stderr": None},
        observers=[log],
        # elicitation/create is routed to the client only with the unstable protocol on (SDK 0.12).
        use_unstable_protocol=True,
    ) as (conn, process):
        harness = Harness(conn=conn, client=client, log=log, cwd=str(tmp_path), process=process)
        if initialize:
            await harness.initialize(fs=fs, booleans=booleans, forms=forms)
        yield harness
    if check_frames:
        log.check()


class SharedAgent:
    """One default demo agent (fs and boolean options advertised) on an event loop in a
    background thread, shared by the tests that need no special flags: starting the agent's
    interpreter costs about a second. Every test works in sessions of its own."""

    def __init__(self, cwd: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="demo-agent-tests", daemon=True)
        self._thread.start()
        self._context = demo_agent(cwd, check_frames=False)
        self.harness: Harness = self.run(self._context.__aenter__())
        self._reported = 0  # schema errors already raised by a test

    def run(self, awaitable: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(asyncio.wait_for(awaitable, TEST_TIMEOUT), self.loop).result()

    def run_test(self, body: Awaitable[None]) -> None:
        try:
            self.run(body)
        finally:
            self._raise_new_schema_errors()

    def _raise_new_schema_errors(self) -> None:
        errors = self.harness.log.errors[self._reported :]
        self._reported += len(errors)
        if errors:
            raise SchemaViolation(f"{len(errors)} frame(s) violate the ACP schema:\n" + "\n".join(errors))

    def close(self) -> None:
        try:
            self.run(self._context.__aexit__(None, None, None))
            self._raise_new_schema_errors()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(STEP_TIMEOUT)
            self.loop.close()


@pytest.fixture(scope="module")
def shared_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedAgent]:
    shared = SharedAgent(tmp_path_factory.mktemp("shared-demo-agent"))
    try:
        yield shared
    finally:
        shared.close()


def with_shared_agent(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Turn `async def test_x(h: Harness, ...)` into a sync test that runs on the shared agent;
    the remaining parameters are ordinary pytest fixtures."""
    signature = inspect.signature(test)
    fixtures = list(signature.parameters.values())[1:]

    @functools.wraps(test)
    def wrapper(shared_agent: SharedAgent, *args: Any, **kwargs: Any) -> None:
        shared_agent.run_test(test(shared_agent.harness, *args, **kwargs))

    shared_param = inspect.Parameter("shared_agent", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    wrapper.__signature__ = signature.replace(parameters=[shared_param, *fixtures])  # type: ignore[attr-defined]
    return wrapper


# --------------------------------------------------------------------------- schema helper


@pytest.mark.parametrize("variant", ["stable", "unstable"])
def test_the_vendored_schemas_are_valid_json_schema(variant: Any) -> None:
    Draft202012Validator.check_schema(schema_root(variant))


def test_schema_check_accepts_valid_and_rejects_malformed_frames() -> None:
    def chunk_frame(content: dict[str, Any]) -> dict[str, Any]:
        update = {"sessionUpdate": "agent_message_chunk", "content": content}
        return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}

    def options_response(*options: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 3, "result": {"configOptions": list(options)}}

    good_update = chunk_frame({"type": "text", "text": "hi"})
    assert validate_frame(good_update, "agent") == "notification"
    assert validate_frame({"jsonrpc": "2.0", "id": "a", "method": "_x/y", "params": {"any": 1}}, "client") == "request"
    select = {"id": "tone", "name": "Tone", "category": "_custom", "type": "select", "currentValue": "a",
              "options": [{"value": "a", "name": "A"}]}
    assert validate_frame(options_response(select), "agent", answers="session/set_config_option") == "response"

    set_option = "session/set_config_option"
    no_current_value = {k: v for k, v in select.items() if k != "currentValue"}
    # (frame, sender, method answered, what the violation message must point at)
    malformed: list[tuple[dict[str, Any], Any, str | None, str]] = [
        (chunk_frame({"type": "text"}), "agent", None, "'text' is a required property"),
        ({**good_update, "params": {"sessionId": "s", "update": {"sessionUpdate": "bogus"}}}, "agent", None, "update"),
        (options_response(no_current_value), "agent", set_option, "'currentValue' is a required property"),
        (options_response({**select, "type": "boolean", "currentValue": "no"}), "agent", set_option,
         "'no' is not of type 'boolean'"),
        ({**good_update, "jsonrpc": "1.0"}, "agent", None, "at jsonrpc"),
        (good_update, "client", None, "not a client->agent notification"),
        ({"jsonrpc": "2.0", "id": 1, "method": "session/set_model", "params": {}}, "client", None,
         "not a client->agent request"),
        ({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "done"}}, "agent", "session/prompt", "at stopReason"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602}}, "agent", "session/new", "'message' is a required"),
        ({"jsonrpc": "2.0", "id": 1}, "agent", "session/new", "not a JSON-RPC"),
        # A tagged union's branch is named by its tag: the problem inside it is what is reported.
        ({**good_update, "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "title": "t"}}},
         "agent", None, "'toolCallId' is a required property"),
        ({"jsonrpc": "2.0", "id": [1], "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
         "client", None, "at id"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, "client", None, "a method that is not a string"),
    ]
    for frame, sender, answers, fragment in malformed:
        with pytest.raises(SchemaViolation) as violation:
            validate_frame(frame, sender, answers=answers)
        assert fragment in str(violation.value), str(violation.value)
    with pytest.raises(ValueError, match="answers"):
        validate_frame({"jsonrpc": "2.0", "id": 1, "result": {}}, "agent")

    log = FrameLog(local="client")
    log.record("agent", malformed[0][0])
    with pytest.raises(SchemaViolation, match="content"):
        log.check()


# --------------------------------------------------------------------------- initialize, options


@with_shared_agent
async def test_initialize_reports_agent_info_and_capabilities(h: Harness) -> None:
    result = h.log.last_result("initialize")
    assert result["protocolVersion"] == 1
    assert result["agentInfo"] == {
        "name": "acp-notebook-demo",
        "title": "Demo agent",
        "version": metadata.version("acp-notebook"),
    }
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["sessionCapabilities"] == {"list": {}, "resume": {}, "close": {}, "delete": {}, "fork": {},
                                           "systemPrompt": {"mode": {"override": {}}}}
    assert result["authMethods"] == []
    # The capabilities the demo relies on really went out in the request.
    request = next(f for f in h.log.frames if f.method == "initialize" and f.kind == "request")
    sent_caps = request.params["clientCapabilities"]
    assert sent_caps["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert sent_caps["session"]["configOptions"]["boolean"] == {}
    assert sent_caps["elicitation"]["form"] == {}


@with_shared_agent
async def test_session_options_order_grouping_and_custom_category(h: Harness) -> None:
    _, options = await h.new_session()
    assert option_ids(options) == ["model", "mode", "tone", "show_thoughts"]
    model = option(options, "model")
    assert (model["category"], model["type"], model["currentValue"]) == ("model", "select", "fast")
    assert [(g["group"], g["name"], [(c["value"], c["name"]) for c in g["options"]]) for g in model["options"]] == [
        ("everyday", "Everyday", [("fast", "Fast")]),
        ("deep", "Deep thinking", [("smart", "Smart")]),
    ]
    mode = option(options, "mode")
    assert (mode["category"], mode["currentValue"], [c["value"] for c in mode["options"]]) == (
        "mode", "ask", ["ask", "code"],
    )
    tone = option(options, "tone")
    # The custom category survives on the wire (the SDK's typed models would turn it into None).
    assert (tone["category"], tone["currentValue"], [c["value"] for c in tone["options"]]) == (
        "_demo_style", "plain", ["plain", "pirate"],
    )
    show = option(options, "show_thoughts")
    assert (show["type"], show["currentValue"]) == ("boolean", False)
    assert "category" not in show


@run_async
async def test_boolean_option_only_for_clients_that_advertise_it(tmp_path: Path) -> None:
    async with demo_agent(tmp_path, booleans=False) as h:
        session_id, options = await h.new_session()
        assert option_ids(options) == ["model", "mode", "tone"]
        with pytest.raises(RequestError) as err:
            await h.set_option(session_id, "show_thoughts", True)
        assert err.value.code == INVALID_PARAMS
        assert "model, mode, tone" in str(err.value)
        options = await h.set_option(session_id, "model", "smart")
        assert option_ids(options) == ["model", "thought_level", "mode", "tone"]


@with_shared_agent
async def test_thought_level_appears_with_smart_and_vanishes_with_fast(h: Harness) -> None:
    session_id, _ = await h.new_session()
    options = await h.set_option(session_id, "model", "smart")
    assert option_ids(options) == ["model", "thought_level", "mode", "tone", "show_thoughts"]
    assert option(options, "model")["currentValue"] == "smart"
    level = option(options, "thought_level")
    assert (level["category"], level["currentValue"], [c["value"] for c in level["options"]]) == (
        "thought_level", "medium", ["low", "medium", "high"],
    )
    assert option(await h.set_option(session_id, "thought_level", "high"), "thought_level")["currentValue"] == "high"

    options = await h.set_option(session_id, "model", "fast")
    assert option_ids(options) == ["model", "mode", "tone", "show_thoughts"]
    with pytest.raises(RequestError) as err:
        await h.set_option(session_id, "thought_level", "low")
    assert err.value.code == INVALID_PARAMS and "thought_level" in str(err.value)
    # Each response carries the complete list, with every other value intact.
    options = await h.set_option(session_id, "tone", "pirate")
    assert [(o["id"], o["currentValue"]) for o in options] == [
        ("model", "fast"), ("mode", "ask"), ("tone", "pirate"), ("show_thoughts", False),
    ]


@with_shared_agent
async def test_bad_ids_and_values_get_invalid_params_naming_the_choices(h: Harness) -> None:
    session_id, _ = await h.new_session()
    cases = [
        ("model", "huge", "valid values: fast, smart"),
        ("mode", "PLAN", "valid values: ask, code"),
        ("tone", "loud", "valid values: plain, pirate"),
        ("colour", "red", "this session has: model, mode, tone, show_thoughts"),
        ("show_thoughts", "yes", "boolean"),
        ("model", True, "valid values: fast, smart"),
    ]
    for config_id, value, hint in cases:
        with pytest.raises(RequestError) as err:
            await h.set_option(session_id, config_id, value)
        assert err.value.code == INVALID_PARAMS, (config_id, value)
        assert hint in str(err.value), str(err.value)
    # Nothing changed.
    options = await h.set_option(session_id, "show_thoughts", False)
    assert [o["currentValue"] for o in options] == ["fast", "ask", "plain", False]


# --------------------------------------------------------------------------- prompt turns


@with_shared_agent
async def test_fast_prompt_streams_chunks_then_title_and_usage(h: Harness) -> None:
    session_id, _ = await h.new_session()
    assert await h.prompt(session_id, "hello there, how are you today friend?") == "end_turn"
    frames = h.turn_frames(session_id)
    kinds = [f.update["sessionUpdate"] for f in frames if f.update is not None]
    assert kinds.count("agent_message_chunk") >= 3
    assert "agent_thought_chunk" not in kinds
    # Message chunks first, then the title, then usage, then the response.
    assert kinds[-2:] == ["session_info_update", "usage_update"]
    assert set(kinds[:-2]) == {"agent_message_chunk"}
    assert frames[-1].kind == "response" and frames[-1].message["result"] == {"stopReason": "end_turn"}
    reply = text_of(updates_in(frames, "agent_message_chunk"))
    assert reply.startswith("[fast] ") and "hello there, how are you today friend?" in reply
    info = updates_in(frames, "session_info_update")[0]
    assert info["title"] == "Hello there, how are you…"
    assert info["updatedAt"].endswith("Z")
    usage = updates_in(frames, "usage_update")[0]
    assert usage["used"] > 0 and usage["size"] == 128_000
    assert usage["cost"]["currency"] == "USD" and usage["cost"]["amount"] > 0

    # Same prompt, same reply: the demo is deterministic. Usage accumulates; the title stays.
    assert await h.prompt(session_id, "hello there, how are you today friend?") == "end_turn"
    frames2 = h.turn_frames(session_id)
    assert text_of(updates_in(frames2, "agent_message_chunk")) == reply
    assert "title" not in updates_in(frames2, "session_info_update")[0]
    assert updates_in(frames2, "usage_update")[0]["used"] == 2 * usage["used"]


@with_shared_agent
async def test_smart_model_thinks_per_thought_level_and_answers_longer(h: Harness) -> None:
    session_id, _ = await h.new_session()
    await h.prompt(session_id, "explain tides")
    fast_reply = text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk"))

    await h.set_option(session_id, "model", "smart")
    for level, expected in [("low", 1), ("medium", 2), ("high", 3)]:
        await h.set_option(session_id, "thought_level", level)
        await h.prompt(session_id, "explain tides")
        kinds = [u["sessionUpdate"] for u in updates_in(h.turn_frames(session_id))]
        first_message = kinds.index("agent_message_chunk")
        assert kinds[:first_message] == ["agent_thought_chunk"] * expected, level
        assert kinds.count("agent_thought_chunk") == expected
    smart_reply = text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk"))
    assert smart_reply.startswith("[smart] ") and "high level" in smart_reply
    assert len(smart_reply) > 2 * len(fast_reply)
    thoughts = text_of(updates_in(h.turn_frames(session_id), "agent_thought_chunk"))
    assert thoughts.startswith("Thought 1 of 3:")


@with_shared_agent
async def test_tone_mode_and_show_thoughts_shape_the_reply(h: Harness) -> None:
    session_id, _ = await h.new_session()
    await h.set_option(session_id, "tone", "pirate")
    await h.prompt(session_id, "hoist the sails")
    assert text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk")).startswith("[fast] Arr, ye said")

    await h.set_option(session_id, "mode", "code")
    await h.prompt(session_id, "hoist the sails")
    assert "```python\nprint('hoist the sails')\n```" in text_of(
        updates_in(h.turn_frames(session_id), "agent_message_chunk")
    )

    await h.set_option(session_id, "show_thoughts", True)
    await h.prompt(session_id, "hoist the sails")
    assert text_of(updates_in(h.turn_frames(session_id), "agent_thought_chunk")) == (
        "Thought 1 of 1: A quick look at the prompt.\n"
    )
    set_request = [f for f in h.log.frames if f.kind == "request" and f.method == "session/set_config_option"][-1]
    assert set_request.params["type"] == "boolean" and set_request.params["value"] is True


@with_shared_agent
async def test_title_changes_on_new_topic_only(h: Harness) -> None:
    session_id, _ = await h.new_session()
    await h.prompt(session_id, "plan a garden")
    assert updates_in(h.turn_frames(session_id), "session_info_update")[0]["title"] == "Plan a garden"
    await h.prompt(session_id, "what about tomatoes?")
    assert "title" not in updates_in(h.turn_frames(session_id), "session_info_update")[0]
    await h.prompt(session_id, "New topic: budget planning for next year and beyond")
    title = updates_in(h.turn_frames(session_id), "session_info_update")[0]["title"]
    assert title == "Budget planning for next year…"


@with_shared_agent
async def test_fallback_switches_to_fast_and_pushes_the_complete_option_list(h: Harness) -> None:
    session_id, _ = await h.new_session()
    await h.set_option(session_id, "model", "smart")
    await h.set_option(session_id, "tone", "pirate")
    await h.prompt(session_id, "try the fallback please")
    updates = updates_in(h.turn_frames(session_id))
    assert updates[0]["sessionUpdate"] == "config_option_update"
    pushed = updates[0]["configOptions"]
    assert [(o["id"], o["currentValue"]) for o in pushed] == [
        ("model", "fast"), ("mode", "ask"), ("tone", "pirate"), ("show_thoughts", False),
    ]
    assert option(pushed, "tone")["category"] == "_demo_style"
    kinds = [u["sessionUpdate"] for u in updates]
    assert "agent_thought_chunk" not in kinds  # the fast model answered
    assert text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk")).startswith(
        "[fast] Fallin' back to the fast model, arr."
    )
    # Without the smart model there is nothing to fall back from.
    await h.prompt(session_id, "fallback again")
    assert updates_in(h.turn_frames(session_id), "config_option_update") == []


# --------------------------------------------------------------------------- file work


@with_shared_agent
async def test_read_with_permission(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    session_id, _ = await h.new_session(str(tmp_path))
    assert await h.prompt(session_id, "read notes.txt") == "end_turn"
    frames = h.turn_frames(session_id)
    absolute = str(tmp_path / "notes.txt")
    kinds = [f.update["sessionUpdate"] if f.update else f.method for f in frames]
    assert kinds.index("plan") < kinds.index("tool_call") < kinds.index("session/request_permission")
    assert kinds.index("session/request_permission") < kinds.index("fs/read_text_file")

    plan = updates_in(frames, "plan")
    assert [e["status"] for e in plan[0]["entries"]] == ["in_progress", "pending", "pending"]
    assert [e["status"] for e in plan[-1]["entries"]] == ["completed", "completed", "completed"]
    call = updates_in(frames, "tool_call")[0]
    assert (call["kind"], call["status"], call["title"]) == ("read", "pending", "Read notes.txt")
    assert call["locations"] == [{"path": absolute}]
    permission = next(f for f in frames if f.method == "session/request_permission" and f.kind == "request")
    assert [o["optionId"] for o in permission.params["options"]] == ["allow_once", "reject_once"]
    assert [o["kind"] for o in permission.params["options"]] == ["allow_once", "reject_once"]
    assert permission.params["toolCall"]["toolCallId"] == call["toolCallId"]
    assert h.reads_of(session_id) == [absolute]

    final = updates_in(frames, "tool_call_update")[-1]
    assert final["status"] == "completed" and final["toolCallId"] == call["toolCallId"]
    assert final["content"] == [{"type": "content", "content": {"type": "text", "text": "one\ntwo\nthree\n"}}]
    assert text_of(updates_in(frames, "agent_message_chunk")) == "[fast] Read notes.txt: 3 lines."


@with_shared_agent
async def test_read_rejected(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("x\n", encoding="utf-8")
    session_id, _ = await h.new_session(str(tmp_path))
    h.client.answers[session_id] = "reject_once"
    assert await h.prompt(session_id, "read secret.txt") == "end_turn"
    frames = h.turn_frames(session_id)
    assert h.reads_of(session_id) == []
    final = updates_in(frames, "tool_call_update")[-1]
    assert final["status"] == "failed"
    assert [e["status"] for e in updates_in(frames, "plan")[-1]["entries"]] == ["completed", "pending", "pending"]
    assert text_of(updates_in(frames, "agent_message_chunk")) == (
        "[fast] Permission denied: I did not read secret.txt."
    )


@with_shared_agent
async def test_a_permission_answer_the_protocol_does_not_have_fails_the_read_not_the_turn(h: Harness,
                                                                                         tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("x\n", encoding="utf-8")
    session_id, _ = await h.new_session(str(tmp_path))
    h.client.answers[session_id] = "not-an-outcome"
    assert await h.prompt(session_id, "read secret.txt") == "end_turn"  # not "cancelled"
    violation = h.log.errors.pop()  # the schema check saw the test client's bad answer too
    assert "result of session/request_permission violates the ACP schema" in violation and "'rejected'" in violation
    frames = h.turn_frames(session_id)
    assert h.reads_of(session_id) == [] and updates_in(frames, "tool_call_update")[-1]["status"] == "failed"
    assert text_of(updates_in(frames, "agent_message_chunk")) == (
        "[fast] Could not read secret.txt: asking for permission failed (the client's answer was not valid "
        "('outcome' should be 'selected' or 'cancelled', got 'rejected'))."
    )


@with_shared_agent
async def test_write_with_permission(h: Harness, tmp_path: Path) -> None:
    session_id, _ = await h.new_session(str(tmp_path))
    await h.set_option(session_id, "model", "smart")
    assert await h.prompt(session_id, 'write "hello world" to sub/../out.txt') == "end_turn"
    frames = h.turn_frames(session_id)
    absolute = str(tmp_path / "out.txt")
    call = updates_in(frames, "tool_call")[0]
    assert (call["kind"], call["status"]) == ("edit", "pending")
    assert call["content"] == [{"type": "diff", "path": absolute, "newText": "hello world"}]
    assert h.writes_of(session_id) == [(absolute, "hello world")]
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "hello world"
    assert updates_in(frames, "tool_call_update")[-1]["status"] == "completed"
    # The smart model still thinks first.
    assert updates_in(frames)[0]["sessionUpdate"] == "agent_thought_chunk"
    assert text_of(updates_in(frames, "agent_message_chunk")) == (
        "[smart] Wrote 11 characters to sub/../out.txt."
    )


@with_shared_agent
async def test_write_rejected(h: Harness, tmp_path: Path) -> None:
    session_id, _ = await h.new_session(str(tmp_path))
    h.client.answers[session_id] = "reject_once"
    await h.prompt(session_id, "write hi to out.txt")
    assert not (tmp_path / "out.txt").exists() and h.writes_of(session_id) == []
    frames = h.turn_frames(session_id)
    assert updates_in(frames, "tool_call_update")[-1]["status"] == "failed"
    assert "Permission denied" in text_of(updates_in(frames, "agent_message_chunk"))


@run_async
async def test_file_work_without_fs_capability_says_so(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\n", encoding="utf-8")
    async with demo_agent(tmp_path, fs=False) as h:
        session_id, _ = await h.new_session()
        await h.prompt(session_id, "read notes.txt")
        frames = h.turn_frames(session_id)
        assert not any(f.method.startswith("fs/") for f in frames)
        assert updates_in(frames, "tool_call_update")[-1]["status"] == "failed"
        assert text_of(updates_in(frames, "agent_message_chunk")) == (
            "[fast] I cannot read notes.txt: the client does not offer fs/read_text_file."
        )
        await h.prompt(session_id, "write hi to out.txt")
        reply = text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk"))
        assert "does not offer fs/write_text_file" in reply
        assert not (tmp_path / "out.txt").exists()


@with_shared_agent
async def test_read_error_from_client_fails_the_tool_call(h: Harness) -> None:
    session_id, _ = await h.new_session()
    assert await h.prompt(session_id, "read missing.txt") == "end_turn"
    frames = h.turn_frames(session_id)
    error = next(f for f in frames if f.method == "fs/read_text_file" and f.kind == "response")
    assert error.message["error"]["code"] == RESOURCE_NOT_FOUND
    assert updates_in(frames, "tool_call_update")[-1]["status"] == "failed"
    assert text_of(updates_in(frames, "agent_message_chunk")) == (
        "[fast] Could not read missing.txt: Resource not found."
    )


# --------------------------------------------------------------------------- cancellation


@run_async
async def test_cancel_stops_streaming_promptly(tmp_path: Path) -> None:
    # A 30 s pause between chunks: only a prompt cancel can finish within the step timeout.
    async with demo_agent(tmp_path, env={"ACP_DEMO_DELAY": "30"}) as h:
        session_id, _ = await h.new_session()
        turn = asyncio.ensure_future(h.conn.prompt(session_id=session_id, prompt=[text_block("tell me a story")]))
        await h.log.wait_for(is_update(session_id, "agent_message_chunk"), STEP_TIMEOUT)
        await step(h.conn.cancel(session_id=session_id))
        response = await step(turn)
        assert response.stop_reason == "cancelled"
        frames = h.turn_frames(session_id)
        assert len(updates_in(frames, "agent_message_chunk")) == 1
        assert updates_in(frames, "usage_update") == []

        # The session remains usable, and replays what was actually said.
        await step(h.conn.load_session(cwd=h.cwd, session_id=session_id, mcp_servers=[]))
        replay = [f.update for f in h.log.frames[-4:] if f.update is not None]
        assert [u["sessionUpdate"] for u in replay] == ["user_message_chunk", "agent_message_chunk"]
        assert replay[1]["content"]["text"] == updates_in(frames, "agent_message_chunk")[0]["content"]["text"]

        # One turn at a time per session; closing the session ends the running turn too.
        turn = asyncio.ensure_future(h.conn.prompt(session_id=session_id, prompt=[text_block("another story")]))
        chunks_before = len(h.log.updates(session_id, "agent_message_chunk"))
        await h.log.wait_for(
            lambda f: is_update(session_id, "agent_message_chunk")(f)
            and len(h.log.updates(session_id, "agent_message_chunk")) > chunks_before,
            STEP_TIMEOUT,
        )
        with pytest.raises(RequestError) as err:
            await h.prompt(session_id, "interrupting")
        assert err.value.code == INVALID_REQUEST and "already running" in str(err.value)
        await step(h.conn.close_session(session_id=session_id))
        assert (await step(turn)).stop_reason == "cancelled"


@with_shared_agent
async def test_cancel_while_waiting_for_permission(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\n", encoding="utf-8")
    session_id, _ = await h.new_session(str(tmp_path))
    h.client.answers[session_id] = "cancelled"
    turn = asyncio.ensure_future(h.conn.prompt(session_id=session_id, prompt=[text_block("read notes.txt")]))
    await h.log.wait_for(
        lambda f: f.kind == "request"
        and f.method == "session/request_permission"
        and f.params["sessionId"] == session_id,
        STEP_TIMEOUT,
    )
    await step(h.conn.cancel(session_id=session_id))
    h.client.cancel_sent.set()
    assert (await step(turn)).stop_reason == "cancelled"
    assert h.reads_of(session_id) == []
    frames = h.turn_frames(session_id)
    assert updates_in(frames, "tool_call_update")[-1]["status"] == "failed"
    assert updates_in(frames, "agent_message_chunk") == []


# --------------------------------------------------------------------------- session lifecycle


@run_async
async def test_list_load_resume_close(tmp_path: Path) -> None:
    other_cwd = tmp_path / "other"
    other_cwd.mkdir()
    state = tmp_path / "state"  # a state directory of its own: the listing holds exactly this test's sessions
    async with demo_agent(tmp_path, state_dir=state) as h:
        first, _ = await h.new_session()
        second, _ = await h.new_session(str(other_cwd))
        await h.set_option(first, "model", "smart")
        await h.prompt(first, "first question here")
        await h.prompt(first, "second question")
        said = text_of(updates_in(h.turn_frames(first), "agent_message_chunk"))

        await step(h.conn.list_sessions())
        listed = h.log.last_result("session/list")["sessions"]
        assert [(s["sessionId"], s["cwd"], s.get("title")) for s in listed] == [  # most recent activity first
            (first, h.cwd, "First question here"),
            (second, str(other_cwd), None),
        ]
        assert all(s["updatedAt"].endswith("Z") for s in listed)
        await step(h.conn.list_sessions(cwd=str(other_cwd)))
        assert [s["sessionId"] for s in h.log.last_result("session/list")["sessions"]] == [second]

        # load: the history is replayed as updates before the response, which carries the options.
        await step(h.conn.load_session(cwd=h.cwd, session_id=first, mcp_servers=[]))
        start = max(i for i, f in enumerate(h.log.frames) if f.method == "session/load" and f.kind == "request")
        frames = h.log.frames[start:]
        replay = updates_in(frames)
        assert [u["sessionUpdate"] for u in replay] == [
            "user_message_chunk", "agent_message_chunk", "user_message_chunk", "agent_message_chunk",
            "session_info_update",
        ]
        assert replay[2]["content"]["text"] == "second question" and replay[3]["content"]["text"] == said
        assert replay[4]["title"] == "First question here"
        assert frames[-1].kind == "response"
        assert option(frames[-1].message["result"]["configOptions"], "model")["currentValue"] == "smart"

        # close keeps the file; prompting fails until the session is resumed (resume replays nothing).
        await step(h.conn.close_session(session_id=first))
        assert (state / f"{first}.json").is_file()
        with pytest.raises(RequestError) as err:
            await h.prompt(first, "still there?")
        assert err.value.code == INVALID_PARAMS and "not open" in str(err.value) and "resume" in str(err.value)
        await step(h.conn.resume_session(session_id=first, cwd=h.cwd))
        start = max(i for i, f in enumerate(h.log.frames) if f.method == "session/resume" and f.kind == "request")
        assert [f.kind for f in h.log.frames[start:]] == ["request", "response"]
        assert option_ids(h.log.last_result("session/resume")["configOptions"])[:2] == ["model", "thought_level"]
        assert await h.prompt(first, "still there?") == "end_turn"


@run_async
async def test_unknown_session_ids_get_resource_not_found_with_the_valid_ids(tmp_path: Path) -> None:
    # A state directory of its own, so the valid ids are exactly this test's sessions.
    async with demo_agent(tmp_path, state_dir=tmp_path / "state", check_frames=False) as h:
        first, _ = await h.new_session()
        second, _ = await h.new_session()
        # Ids that could name a path outside the state directory are just unknown ids.
        for unknown in ("nope", "../state/" + first, first + "/x"):
            calls = [
                h.conn.load_session(cwd=h.cwd, session_id=unknown, mcp_servers=[]),
                h.conn.resume_session(session_id=unknown, cwd=h.cwd),
                h.conn.close_session(session_id=unknown),
                h.conn.prompt(session_id=unknown, prompt=[text_block("hi")]),
                h.conn.set_config_option(config_id="model", session_id=unknown, value="fast"),
                h.raw("session/delete", {"sessionId": unknown}),
                h.raw("session/set_model", {"sessionId": unknown, "modelId": "fast"}),
            ]
            for call in calls:
                with pytest.raises(RequestError) as err:
                    await step(call)
                assert err.value.code == RESOURCE_NOT_FOUND, str(err.value)
                assert repr(unknown) in str(err.value)
                assert err.value.data["sessionId"] == unknown
                assert set(err.value.data["validSessionIds"]) == {first, second}
    # session/set_model is in no schema (older clients send it): recorded unvalidated; every other frame is valid.
    h.log.check()


# --------------------------------------------------------------------------- modes of the agent


@run_async
async def test_legacy_mode_sends_modes_and_models_only(tmp_path: Path) -> None:
    async with demo_agent(tmp_path, "--legacy") as h:
        session_id, options = await h.new_session()
        result = h.log.last_result("session/new")
        assert options is None and "configOptions" not in result
        assert result["modes"] == {
            "currentModeId": "ask",
            "availableModes": [
                {"id": "ask", "name": "Ask", "description": "Answer in prose"},
                {"id": "code", "name": "Code", "description": "Add a code sample to the answer"},
            ],
        }
        assert result["models"]["currentModelId"] == "fast"
        assert [m["modelId"] for m in result["models"]["availableModels"]] == ["fast", "smart"]

        with pytest.raises(RequestError) as err:
            await h.set_option(session_id, "model", "smart")
        assert err.value.code == METHOD_NOT_FOUND

        await step(h.conn.set_session_mode(session_id=session_id, mode_id="code"))
        update = await h.log.wait_for(is_update(session_id, "current_mode_update"), STEP_TIMEOUT)
        assert update.update == {"sessionUpdate": "current_mode_update", "currentModeId": "code"}
        assert updates_in(h.log.frames, "config_option_update") == []
        with pytest.raises(RequestError) as err:
            await step(h.conn.set_session_mode(session_id=session_id, mode_id="plan"))
        assert err.value.code == INVALID_PARAMS and "ask, code" in str(err.value)
        await h.prompt(session_id, "say hi")
        assert "```python" in text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk"))


@with_shared_agent
async def test_set_mode_also_updates_config_options(h: Harness) -> None:
    session_id, _ = await h.new_session()
    await step(h.conn.set_session_mode(session_id=session_id, mode_id="code"))
    pushed = await h.log.wait_for(is_update(session_id, "config_option_update"), STEP_TIMEOUT)
    assert option(pushed.update["configOptions"], "mode")["currentValue"] == "code"


@run_async
async def test_require_auth(tmp_path: Path) -> None:
    async with demo_agent(tmp_path, "--require-auth") as h:
        assert h.log.last_result("initialize")["authMethods"] == [
            {"id": "demo-token", "name": "Demo token", "description": "Any client may use it; no secret involved"}
        ]
        with pytest.raises(RequestError) as err:
            await h.new_session()
        assert (err.value.code, str(err.value)) == (-32000, "Authentication required")
        with pytest.raises(RequestError) as err:
            await step(h.conn.authenticate(method_id="password"))
        assert err.value.code == INVALID_PARAMS and "demo-token" in str(err.value)
        await step(h.conn.authenticate(method_id="demo-token"))
        session_id, options = await h.new_session()
        assert session_id and option_ids(options)[0] == "model"


@with_shared_agent
async def test_extension_methods(h: Harness) -> None:
    params = {"text": "ping", "nested": {"n": 1}, "_meta": {"k": "v"}}
    assert await step(h.conn.ext_method("demo/echo", params)) == params
    with pytest.raises(RequestError) as err:
        await step(h.conn.ext_method("demo/unknown", {}))
    assert err.value.code == METHOD_NOT_FOUND
    await step(h.conn.ext_notification("demo/anything", {"x": 1}))
    # The agent is still fine after an extension notification it does not know.
    await h.new_session()


def test_params_missing_or_of_the_wrong_json_type_are_refused_naming_the_param(tmp_path: Path) -> None:
    """The demo reads params as JSON (agent_side.py), so it checks them itself, as the SDK's models would."""
    import acp_notebook as acpnb

    with acpnb.start(AGENT_COMMAND, cwd=tmp_path, env={STATE_ENV: str(tmp_path / "state")}, timeout=30) as agent:
        session = agent.new_session()
        refused = {
            ("session/prompt", "'prompt' must be an array, got str"): {"sessionId": session.id, "prompt": "hi"},
            ("session/new", "needs an array 'mcpServers'"): {"cwd": str(tmp_path)},
            ("session/new", "'cwd' must be a string, got int"): {"cwd": 5, "mcpServers": []},
            ("session/set_config_option", "'value' must be a string or a boolean, got list"):
                {"sessionId": session.id, "configId": "model", "value": ["smart"]},
            ("session/list", "'cursor' must be a string, got bool"): {"cursor": True},
            ("session/load", "needs its params as a JSON object"): ["not", "an object"],
        }
        for (method, message), params in refused.items():
            with pytest.raises(acpnb.RpcError) as err:
                agent.request(method, params)
            assert err.value.code == INVALID_PARAMS and message in str(err.value), (method, str(err.value))
        # Optional params may be left out or null; the session is untouched by the refusals.
        assert agent.request("session/list", {"cwd": None})["sessions"][0]["sessionId"] == session.id
        assert session.prompt("hello", timeout=30).stop_reason == "end_turn"
        with pytest.raises(acpnb.RpcError) as err:
            agent.request("session/archive", {"sessionId": session.id})
        assert err.value.code == METHOD_NOT_FOUND


# --------------------------------------------------------------------------- process level


def test_a_notification_it_refuses_is_one_warning_line_not_a_traceback(tmp_path: Path) -> None:
    frames = [{"jsonrpc": "2.0", "method": "session/cancel", "params": {}},
              {"jsonrpc": "2.0", "method": "what/ever", "params": {}},
              {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}},  # taken quietly
              {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}]
    agent = subprocess.Popen(AGENT_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=tmp_path, env={**os.environ, STATE_ENV: str(tmp_path)})
    try:
        agent.stdin.write("".join(json.dumps(f) + "\n" for f in frames))
        agent.stdin.flush()
        answer = json.loads(agent.stdout.readline())  # read while stdin is open: EOF ends the agent
    finally:
        agent.stdin.close()
        stderr = agent.stderr.read()
        agent.wait(30)
    assert agent.returncode == 0, stderr
    assert answer["result"]["protocolVersion"] == 1  # still serving after both
    assert stderr.splitlines() == [
        "acp-notebook-demo: WARNING notification session/cancel ignored: session/cancel needs a string 'sessionId'",
        "acp-notebook-demo: WARNING notification what/ever ignored: Method not found"]


def test_stdout_carries_only_protocol_frames_and_eof_ends_the_agent(tmp_path: Path) -> None:
    process = subprocess.Popen(
        AGENT_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path
    )
    assert process.stdin is not None and process.stdout is not None
    log = FrameLog(local="client")

    def exchange(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; read frames until its response (the updates before it are recorded too)."""
        request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        log.record("client", request)
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.flush()
        while True:
            line = process.stdout.readline()
            assert line, "the agent closed stdout early"
            frame = json.loads(line)
            log.record("agent", frame)
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    try:
        exchange(0, "initialize", {"protocolVersion": 1})
        created = exchange(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        session_id = created["result"]["sessionId"]
        exchange(2, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]})
        process.stdin.close()
        assert process.wait(timeout=STEP_TIMEOUT) == 0
        assert process.stdout.read() == b""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
    log.check()
    assert [f.kind for f in log.frames][-1] == "response"
    assert log.last_result("session/prompt") == {"stopReason": "end_turn"}


def test_command_line_options(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["--delay", "0.25", "--legacy", "--require-auth"])
    assert (args.delay, args.legacy, args.require_auth) == (0.25, True, True)
    assert build_parser().parse_args([]).delay is None  # main() then reads ACP_DEMO_DELAY
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--delay", "-1"])
    monkeypatch.setenv("ACP_DEMO_DELAY", "soon")
    with pytest.raises(SystemExit):
        main([])
    with pytest.raises(ValueError):
        DemoAgent(delay=-1)
