"""Any ACP client can use the proxy: a bare client built on the SDK alone (not acp-notebook's client)
drives `acp-notebook proxy --agent a=demo --agent b=demo` over real pipes; every frame on every
pipe is validated against the official schema."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
from collections.abc import Awaitable
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
    CreateTerminalResponse,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    SessionConfigOptionsCapabilities,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from tests.proxy_agents.harness import model_values, quirky, validate_trace
from tests.schema_check import FrameLog
from tests.sdk_compat import text_block

T = TypeVar("T")


def proxy_argv(*agents: str, trace: Path) -> list[str]:
    """The installed `acp-notebook` command when there is one (else the same CLI through -m)."""
    script = Path(sys.executable).with_name("acp-notebook")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "acp_notebook.cli"]
    argv = [*base, "proxy"]
    for agent in agents:
        argv += ["--agent", agent]
    return [*argv, "--trace", str(trace)]


class BareClient:
    """The smallest useful ACP client on the SDK: allows every permission, serves files from `root`,
    fakes terminals, answers one extension method, and can run a hook on each streamed chunk."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.session_ids_seen: list[str] = []
        self.on_chunk = None
        self.terminal_commands: list[str] = []

    def _seen(self, session_id: str) -> None:
        self.session_ids_seen.append(session_id)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any):
        self._seen(session_id)
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if getattr(update, "session_update", None) == "agent_message_chunk" and self.on_chunk is not None:
            hook, self.on_chunk = self.on_chunk, None
            hook()

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        self._seen(session_id)
        return ReadTextFileResponse(content=Path(path).read_text())

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any):
        self._seen(session_id)
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str, **kwargs: Any) -> CreateTerminalResponse:
        self._seen(session_id)
        self.terminal_commands.append(command)
        return CreateTerminalResponse(terminal_id="term-1")

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any):
        self._seen(session_id)
        return WaitForTerminalExitResponse(exit_code=0)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        self._seen(session_id)
        return TerminalOutputResponse(output=f"output of {terminal_id}", truncated=False)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any):
        self._seen(session_id)
        return ReleaseTerminalResponse()

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "quirky/ask":
            return {"answer": "from the bare client"}
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
    terminal=True,
    session=ClientSessionCapabilities(config_options=SessionConfigOptionsCapabilities(
        boolean=BooleanConfigOptionCapabilities())),
)


async def within(awaitable: Awaitable[T], seconds: float = 30.0) -> T:
    return await asyncio.wait_for(awaitable, seconds)


async def initialized(conn: Any) -> None:
    await within(conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=CAPABILITIES,
                                 client_info=Implementation(name="bare-sdk-client", version="1")))


@pytest.mark.slow
def test_a_bare_sdk_client_sees_the_namespaced_models_and_binds(tmp_path):
    trace = tmp_path / "trace.jsonl"
    log = FrameLog(local="client")
    client = BareClient(tmp_path)
    env = {**os.environ, "ACP_DEMO_DELAY": "0.03"}

    async def run() -> None:
        argv = proxy_argv("a=demo", "b=demo", trace=trace)
        async with acp.spawn_agent_process(client, argv[0], *argv[1:], env=env, cwd=tmp_path,
                                           observers=[log]) as (conn, _process):
            await initialized(conn)
            new = await within(conn.new_session(cwd=str(tmp_path), mcp_servers=[]))
            sid = new.session_id
            listed = log.last_result("session/new")["configOptions"]
            assert [o["id"] for o in listed] == ["model"]
            model = listed[0]
            assert model["category"] == "model" and model["currentValue"] == "a:fast"
            assert [(g["group"], g["name"]) for g in model["options"]] == [("a", "a"), ("b", "b")]
            assert model_values(model) == ["a:fast", "a:smart", "b:fast", "b:smart"]

            # bind, then a turn
            await within(conn.set_config_option(config_id="model", session_id=sid, value="b:smart"))
            bound = log.last_result("session/set_config_option")["configOptions"]
            assert [o["id"] for o in bound] == ["model", "thought_level", "mode", "tone", "show_thoughts"]
            assert bound[0]["currentValue"] == "b:smart"
            assert bound[3]["category"] == "_demo_style"
            answer = await within(conn.prompt(prompt=[text_block("Tell me about tide pools")], session_id=sid))
            assert answer.stop_reason == "end_turn"
            chunks = [u["content"]["text"] for u in log.updates(sid, "agent_message_chunk")]
            assert "tide pools" in "".join(chunks)
            assert log.updates(sid, "session_info_update") and log.updates(sid, "usage_update")

            # the agent's own config_option_update comes through prefixed
            await within(conn.prompt(prompt=[text_block("fallback now")], session_id=sid))
            pushed = log.updates(sid, "config_option_update")[-1]["configOptions"]
            assert pushed[0]["id"] == "model" and pushed[0]["currentValue"] == "b:fast"
            assert model_values(pushed[0]) == ["a:fast", "a:smart", "b:fast", "b:smart"]  # a's still pickable

            # a clear error for a bad id
            with pytest.raises(RequestError) as bad:
                await within(conn.set_config_option(config_id="model", session_id=sid, value="b:genius"))
            assert bad.value.code == -32602 and "b:fast, b:smart" in str(bad.value)

            # recovery after a backend crash: kill agent b at its first streamed chunk
            status = await within(conn.ext_method("proxy/status", {}))
            b_pid = status["agents"]["b"]["pid"]
            client.on_chunk = lambda: os.killpg(b_pid, signal.SIGKILL)
            with pytest.raises(RequestError) as crash:
                await within(conn.prompt(prompt=[text_block("Tell me about sea stars")], session_id=sid))
            assert "agent 'b'" in str(crash.value) and crash.value.data["agent"] == "b"
            again = await within(conn.prompt(prompt=[text_block("Tell me about kelp")], session_id=sid))
            assert again.stop_reason == "end_turn"
            status = await within(conn.ext_method("proxy/status", {}))
            assert status["agents"]["b"]["starts"] == 2

            # fs and permission requests reach this client under the proxy's session id
            (tmp_path / "notes.txt").write_text("a\nb\n")
            await within(conn.prompt(prompt=[text_block("read notes.txt")], session_id=sid))
            assert client.session_ids_seen and set(client.session_ids_seen) == {sid}

    asyncio.run(run())
    log.check()
    assert set(validate_trace(trace)) == {"client", "a", "b"}


def test_terminals_and_extensions_from_a_bare_sdk_client(tmp_path):
    trace = tmp_path / "trace.jsonl"
    log = FrameLog(local="client")
    client = BareClient(tmp_path)

    async def run() -> None:
        argv = proxy_argv("q=" + shlex.join(quirky()), "a=demo", trace=trace)
        async with acp.spawn_agent_process(client, argv[0], *argv[1:], env=dict(os.environ), cwd=tmp_path,
                                           observers=[log]) as (conn, _process):
            await initialized(conn)
            sid = (await within(conn.new_session(cwd=str(tmp_path), mcp_servers=[]))).session_id
            # the first agent's first model is the default: q:vendor/model-a, bound lazily at the prompt
            await within(conn.prompt(prompt=[text_block("run echo hi")], session_id=sid))
            assert client.terminal_commands == ["echo hi"] and set(client.session_ids_seen) == {sid}
            text = "".join(u["content"]["text"] for u in log.updates(sid, "agent_message_chunk"))
            assert text == "terminal said: output of term-1"
            lazily = log.updates(sid, "config_option_update")[0]["configOptions"]
            assert lazily[0]["currentValue"] == "q:vendor/model-a" and [o["id"] for o in lazily] == [
                "model", "effort", "verbosity"]
            await within(conn.prompt(prompt=[text_block("ext")], session_id=sid))
            text = "".join(u["content"]["text"] for u in log.updates(sid, "agent_message_chunk"))
            assert text.endswith("client answered {'answer': 'from the bare client'}")
            notice = [f for f in log.frames if f.method == "_quirky/notice"]
            assert notice and notice[0].params == {"sessionId": sid, "note": "hello"}

    asyncio.run(run())
    log.check()
    validate_trace(trace)
