"""Helpers shared by the proxy tests: agent commands, frame validation of the proxy's trace, waiting on frames."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import acp_notebook as acpnb
from tests.schema_check import FrameLog

HERE = Path(__file__).resolve().parent
QUIRKY = [sys.executable, str(HERE / "quirky_agent.py")]


def quirky(*flags: str) -> list[str]:
    """argv of the quirky test agent with the given flags (see its docstring)."""
    return [*QUIRKY, *flags]


def broken(message: str, code: int = 4) -> list[str]:
    """argv of a program that writes `message` to stderr and exits before speaking ACP."""
    return [sys.executable, "-c", f"import sys; print({message!r}, file=sys.stderr, flush=True); sys.exit({code})"]


def validate_trace(path: Path) -> dict[str, FrameLog]:
    """Check every frame the proxy wrote to its --trace file against the official schema, per pipe.

    On the "client" link the proxy is the agent; on each backend's link it is the client."""
    logs: dict[str, FrameLog] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        link, direction = record["link"], record["dir"]
        if link == "client":
            log = logs.setdefault(link, FrameLog(local="agent"))
            sender = "client" if direction == "in" else "agent"
        else:
            log = logs.setdefault(link, FrameLog(local="client"))
            sender = "agent" if direction == "in" else "client"
        log.record(sender, record["msg"])
    for log in logs.values():
        log.check()
    return logs


def validate_client_log(agent: Any) -> FrameLog:
    """Every frame our client exchanged with the proxy, checked against the official schema."""
    frames = FrameLog(local="client")
    for entry in agent.log:
        frames.record("client" if entry["dir"] == "send" else "agent", entry["msg"])
    frames.check()
    return frames


class FrameWaiter:
    """Sets an event when our client receives a frame matching a predicate (and runs `then`, on the loop thread)."""

    def __init__(self, agent: Any, predicate: Callable[[dict[str, Any]], bool],
                 then: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.event = threading.Event()
        self.message: dict[str, Any] | None = None
        self._predicate = predicate
        self._then = then
        self._unsubscribe = agent.on_frame(self._on_frame)

    def _on_frame(self, entry: dict[str, Any]) -> None:
        if self.event.is_set() or entry["dir"] != "recv" or not self._predicate(entry["msg"]):
            return
        self.message = entry["msg"]
        if self._then is not None:
            self._then(entry["msg"])
        self.event.set()
        self._unsubscribe()

    def wait(self, timeout: float = 20.0) -> dict[str, Any]:
        assert self.event.wait(timeout), "the awaited frame never came"
        assert self.message is not None
        return self.message


def is_update(session_id: str, kind: str) -> Callable[[dict[str, Any]], bool]:
    def predicate(message: dict[str, Any]) -> bool:
        params = message.get("params") or {}
        return (message.get("method") == "session/update" and params.get("sessionId") == session_id
                and (params.get("update") or {}).get("sessionUpdate") == kind)
    return predicate


def model_values(option: dict[str, Any]) -> list[str]:
    """The values of a raw select option, flattened over its groups."""
    values = []
    for entry in option["options"]:
        if "group" in entry:
            values += [inner["value"] for inner in entry["options"]]
        else:
            values.append(entry["value"])
    return values


def start_proxies(tmp_path: Path) -> Iterator[Callable[..., acpnb.Agent]]:
    """The body of the `proxy_factory` fixture (a module makes it one with `pytest.fixture(name="proxy_factory")(start_proxies)`):
    start(agents, **kwargs) -> the proxy as an acpnb.Agent, tracing to `proxy.trace_path`; at the end:
    closed, every frame validated."""
    started: list[tuple[acpnb.Agent, Path]] = []

    def start(agents, **kwargs):
        trace = tmp_path / f"trace-{len(started)}.jsonl"
        kwargs.setdefault("cwd", tmp_path)
        kwargs.setdefault("timeout", 30)
        # A test about the probe's deadline sets its own; for the others, a backend slowed by a loaded
        # machine must not be left out of the first session's model list.
        kwargs.setdefault("probe_timeout", 60)
        proxy = acpnb.start_proxy(agents, trace=trace, **kwargs)
        proxy.trace_path = trace
        started.append((proxy, trace))
        return proxy

    yield start
    for proxy, trace in started:
        proxy.close()
        validate_client_log(proxy)
        validate_trace(trace)


def raw_result(proxy: acpnb.Agent, method: str, index: int = -1) -> dict:
    """The raw result of our client's `index`-th request of `method`, as the proxy sent it."""
    sent = {e["msg"]["id"] for e in proxy.log if e["dir"] == "send" and e["msg"].get("method") == method}
    answers = [e["msg"] for e in proxy.log if e["dir"] == "recv" and "method" not in e["msg"]
               and e["msg"].get("id") in sent]
    return answers[index]["result"]


def status(proxy: acpnb.Agent) -> dict:
    return proxy.request("_proxy/status", {})


def requests_to(trace: Path, link: str) -> list[str]:
    """The methods of the requests the proxy sent to agent `link`, in order (read after the proxy closed:
    the trace file is written when the proxy ends)."""
    methods = []
    for line in trace.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        message = record["msg"]
        if record["link"] == link and record["dir"] == "out" and "method" in message and "id" in message:
            methods.append(message["method"])
    return methods
