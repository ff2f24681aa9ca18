"""The proxy as a hostile agent tries it: only the agent a session is bound to reaches the kernel, and no
secret is on any command line.

Two agents behind a real proxy process; the hostile one (proxy_agents/hostile_agent.py) keeps every MCP
server it is given and, whenever it has a ``kernel`` entry, speaks the channel's handshake with it and
starts the bridge from it, calling list_variables and run_code through the official MCP client. The
kernel is a real ``KernelTools(policy="allow")`` in this process over a namespace of the test's; its
work runs on this (the kernel) thread while the test waits in one of our blocking calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_notebook import _loop
from acp_notebook.kernel_tools import KernelTools
from acp_notebook.kernel_tools.client import entry_environment, open_kernel_tools
from acp_notebook.launch import AgentSpec
from acp_notebook.proxy.cli import AGENT_ENV_VARIABLE, encode_agent_env, take_agent_env
from acp_notebook.proxy.launcher import proxy_command, proxy_environment
from tests.processes import descendants
from tests.proxy_agents.harness import HERE, start_proxies, status

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[1]
HOSTILE = [sys.executable, str(HERE / "hostile_agent.py")]
USER_SECRET = "notes-token-" + secrets.token_hex(8)
USER_SERVER = {"name": "notes", "command": "/usr/bin/env", "args": ["notes-server"],
               "env": [{"name": "NOTES_API_TOKEN", "value": USER_SECRET}]}


def hostile(name: str, record: Path) -> list[str]:
    return [*HOSTILE, "--name", name, "--record", str(record)]


@pytest.fixture
def namespace() -> dict[str, Any]:
    return {"budget": 1234, "plan": "quarterly figures"}


@pytest.fixture
def kernel(namespace: dict[str, Any]) -> Iterator[KernelTools]:
    tools = KernelTools(policy="allow", namespace=namespace, run_timeout=20.0)
    _loop.run_sync(tools.start(), TIMEOUT)
    try:
        yield tools
    finally:
        _loop.run_sync(tools.close(), TIMEOUT)


@pytest.fixture
def record(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.jsonl"
    path.touch()
    return path


def records(path: Path, agent: str | None = None) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in found if agent is None or r["agent"] == agent]


def wait_for(path: Path, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first record matching ``predicate``, waited for in a blocking call of ours, which runs the kernel
    tools' work meanwhile (another process writes the file: there is no event to wait on)."""
    async def poll() -> dict[str, Any]:
        while True:
            match = next((r for r in records(path) if predicate(r)), None)
            if match is not None:
                return match
            await asyncio.sleep(0.02)

    return _loop.run_sync(poll(), TIMEOUT)


def event(agent: str, name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["agent"] == agent and r["event"] == name


def entry_given(path: Path, agent: str) -> dict[str, Any]:
    """The kernel entry ``agent`` received (from its own record)."""
    (servers,) = [r["mcpServers"] for r in records(path, agent) if r["event"] == "session/new" and r["mcpServers"]]
    return next(s for s in servers if s["name"] == "kernel")


def env_of(entry: dict[str, Any]) -> dict[str, str]:
    return {pair["name"]: pair["value"] for pair in entry["env"]}


def handshake(entry: dict[str, Any]) -> str:
    """The channel's handshake spoken directly with an entry's socket and token: its answer, or the error."""
    env = env_of(entry)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    try:
        sock.connect(env["ACPNB_KERNEL_CHANNEL"])
        sock.sendall(env["ACPNB_KERNEL_TOKEN"].encode() + b"\n")
        return sock.recv(200).decode("utf-8", "replace")
    except OSError as exc:
        return f"error: {exc}"
    finally:
        sock.close()


def run_bridge(entry: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACPNB_KERNEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(entry_environment(entry))
    return subprocess.run([sys.executable, "-m", "acp_notebook.kernel_tools.bridge"], env=env, input="",
                          capture_output=True, text=True, timeout=TIMEOUT)


class HeldConnection:
    """An MCP connection from an entry, opened by the official client and kept open on the loop (as an agent
    keeps its servers); ``again()`` calls list_variables on it once more."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.first: concurrent.futures.Future[str] = concurrent.futures.Future()
        self.go: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.second: concurrent.futures.Future[str] = concurrent.futures.Future()
        self.task = _loop.submit(self._hold(entry))

    async def _hold(self, entry: dict[str, Any]) -> None:
        try:
            async with open_kernel_tools(entry, read_timeout=TIMEOUT) as mcp:
                self.first.set_result(_text(await mcp.call_tool("list_variables", {})))
                await asyncio.wrap_future(self.go)
                try:
                    self.second.set_result("answered: " + _text(await mcp.call_tool("list_variables", {})))
                except Exception as exc:  # noqa: BLE001 - the point: the connection ended
                    self.second.set_result(f"ended: {type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001
            for future in (self.first, self.second):
                if not future.done():
                    future.set_result(f"ended: {type(exc).__name__}: {exc}")

    def opened(self) -> str:
        return _loop.wait(self.first, TIMEOUT)

    def again(self) -> str:
        self.go.set_result(None)
        return _loop.wait(self.second, TIMEOUT)


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


# --- only the bound agent reaches the kernel -----------------------------------------------------------------

@pytest.mark.slow
def test_an_agent_that_is_not_picked_never_receives_the_users_servers(proxy_factory, kernel, namespace, record):
    proxy = proxy_factory({"a": hostile("a", record), "b": hostile("b", record)})
    session = proxy.new_session(mcp_servers=[USER_SERVER, kernel.entry])
    session.set("model", "b:m2")
    assert "budget" in wait_for(record, event("b", "list_variables"))["text"]  # the picked agent has the kernel
    wait_for(record, event("b", "run_code"))
    assert "budget" in json.loads(session.prompt("attack").text)["list_variables"]
    proxy.close()

    token, channel = env_of(kernel.entry)["ACPNB_KERNEL_TOKEN"], env_of(kernel.entry)["ACPNB_KERNEL_CHANNEL"]
    mine = records(record, "a")
    assert [r["mcpServers"] for r in mine if r["event"] == "session/new"] == [[]]  # its probe: nothing
    assert {r["event"] for r in mine} <= {"session/new", "session/delete", "session/close"}  # it never had a way in
    for secret in (token, channel, USER_SECRET):
        assert all(secret not in json.dumps(r) for r in mine)
    assert "stolen_by_a" not in namespace and namespace.get("stolen_by_b") is True

    # b: its probe got nothing; its bound session got the user's server and a kernel entry of the proxy's own.
    given = [r["mcpServers"] for r in records(record, "b") if r["event"] == "session/new"]
    assert given[0] == [] and given[1][0] == USER_SERVER
    relayed = env_of(given[1][1])
    assert relayed["ACPNB_KERNEL_TOKEN"] != token and relayed["ACPNB_KERNEL_CHANNEL"] != channel


@pytest.mark.slow
def test_moving_to_another_agent_shuts_the_first_ones_way_to_the_kernel_at_once(proxy_factory, kernel, record):
    proxy = proxy_factory({"a": hostile("a", record), "b": hostile("b", record)})
    session = proxy.new_session(mcp_servers=[kernel.entry])
    session.set("model", "a:m2")
    assert "budget" in wait_for(record, event("a", "list_variables"))["text"]  # bound: a works
    entry_of_a = entry_given(record, "a")
    held = HeldConnection(entry_of_a)  # a second connection of a's, opened while it is bound
    assert "budget" in held.opened()

    session.set("model", "b:m1")  # before the first prompt: a is released
    refused = run_bridge(entry_of_a)
    assert refused.returncode == 1 and "acp-notebook kernel bridge:" in refused.stderr, refused
    assert "ok" != handshake(entry_of_a).strip()
    assert held.again().startswith("ended:")  # its open MCP connection ended
    assert wait_for(record, event("a", "mcp_closed"))  # and so did the one the agent itself held
    assert any(r["event"] == "session/delete" for r in records(record, "a"))

    assert "budget" in json.loads(session.prompt("attack").text)["list_variables"]  # b, bound, works
    wait_for(record, event("b", "list_variables"))
    entry_of_b = entry_given(record, "b")
    session.close()  # closing the session shuts b's way in too
    assert "ok" != handshake(entry_of_b).strip()
    assert wait_for(record, event("b", "mcp_closed"))
    assert handshake(kernel.entry).strip() == "ok"  # the user's own kernel channel is untouched


@pytest.mark.slow
def test_an_agent_that_ends_loses_its_relay(proxy_factory, kernel, record):
    proxy = proxy_factory({"a": hostile("a", record)})
    session = proxy.new_session(mcp_servers=[kernel.entry])
    assert "budget" in json.loads(session.prompt("attack").text)["list_variables"]
    entry = entry_given(record, "a")
    os.kill(status(proxy)["agents"]["a"]["pid"], 9)

    async def refused() -> str:  # the proxy notices the exit on its own loop: asked until it has
        while (answer := await asyncio.to_thread(handshake, entry)).strip() == "ok":
            await asyncio.sleep(0.05)
        return answer

    assert "ok" != _loop.run_sync(refused(), TIMEOUT).strip()


# --- no secret on a command line ------------------------------------------------------------------------------

def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
@pytest.mark.slow
def test_no_agent_key_is_on_any_command_line_the_package_makes(proxy_factory, kernel, record):
    key_a, key_b = "sk-test-" + secrets.token_hex(16), "sk-ant-test-" + secrets.token_hex(16)
    spec_a = AgentSpec(name="trusty-a", command=tuple(hostile("a", record)), env={"OPENAI_API_KEY": key_a})
    spec_b = AgentSpec(name="trusty-b", command=tuple(hostile("b", record)), env={"ANTHROPIC_API_KEY": key_b})
    proxy = proxy_factory({"a": spec_a, "b": spec_b})
    session = proxy.new_session(mcp_servers=[kernel.entry])
    session.set("model", "b:m2")
    wait_for(record, event("b", "run_code"))  # b's bridge is running, held open by b
    assert session.prompt("hello").text == "b heard: hello"

    agents = {name: info["pid"] for name, info in status(proxy)["agents"].items()}
    processes = [proxy.pid, *descendants(proxy.pid)]
    assert set(agents.values()) <= set(processes)
    assert any(b"kernel_tools.bridge" in _read(f"/proc/{pid}/cmdline") for pid in processes)  # b's bridge
    for pid in processes:
        cmdline = _read(f"/proc/{pid}/cmdline")
        assert key_a.encode() not in cmdline and key_b.encode() not in cmdline, cmdline
    environ_a, environ_b = _read(f"/proc/{agents['a']}/environ"), _read(f"/proc/{agents['b']}/environ")
    assert key_a.encode() in environ_a and key_b.encode() in environ_b  # each agent has its own key
    assert key_b.encode() not in environ_a and key_a.encode() not in environ_b  # and only its own
    assert AGENT_ENV_VARIABLE.encode() not in environ_a + environ_b


def test_proxy_command_leaves_the_env_to_the_proxy_environment():
    spec = AgentSpec(name="x", command=(sys.executable, "agent.py"), env={"OPENAI_API_KEY": "sk-1234567890"})
    argv = proxy_command({"x": spec, "y": {"command": ["agent"], "env": {"HF_TOKEN": "hf-1234567890"}}})
    assert not any("1234567890" in part for part in argv)
    environ = proxy_environment({"x": spec, "y": {"command": ["agent"], "env": {"HF_TOKEN": "hf-1234567890"}}})
    assert take_agent_env(environ) == {"x": {"OPENAI_API_KEY": "sk-1234567890"}, "y": {"HF_TOKEN": "hf-1234567890"}}
    assert environ == {}  # taken out: the agents the proxy starts never inherit it
    broken = {AGENT_ENV_VARIABLE: '{"x": {"K": 1}} sk-1234567890'}
    with pytest.raises(ValueError) as refused:
        take_agent_env(broken)
    assert "1234567890" not in str(refused.value)
    assert take_agent_env(encode_agent_env({})) == {}


def test_an_env_the_user_types_on_the_command_line_still_reaches_the_agent(tmp_path, record):
    """`acp-notebook proxy --agent NAME={"command": ..., "env": ...}` as a user types it."""
    import acp_notebook as acpnb

    spec = json.dumps({"command": hostile("a", record), "env": {"GREETING_WORD": "bonjour"}})
    command = [sys.executable, "-m", "acp_notebook.proxy", "--agent", f"a={spec}"]
    with acpnb.start(command, cwd=tmp_path, timeout=30) as proxy:
        assert proxy.new_session().prompt("hi").text == "a heard: hi"
        pid = status(proxy)["agents"]["a"]["pid"]
        assert b"GREETING_WORD=bonjour" in _read(f"/proc/{pid}/environ")
