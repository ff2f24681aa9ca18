"""Exploration harness: drive one real ACP agent through the SDK and keep every raw frame.

Not a test and not our client: it exists to find out, verbatim, what each pinned agent
sends. It spawns the agent in a process group of its own with a fresh HOME and a minimal
environment (no keys leak in), records every JSON-RPC frame in wire order through the
SDK's `observers=` hook, answers permission requests by policy and fs requests from the
real file system, and on close reports whether the agent exits on stdin EOF, whether
anything of its process group is left, and which files it wrote under HOME.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import acp
from acp.connection import StreamEvent
from acp.exceptions import RequestError
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

OUT_ROOT = Path(os.environ.get("ACP_EXPLORE_OUT", "/tmp/acp-explore"))


@dataclass
class Frame:
    t: float
    dir: Literal["send", "recv"]
    msg: dict[str, Any]


@dataclass
class CallResult:
    method: str
    ok: bool
    seconds: float
    result: Any = None
    error: dict[str, Any] | None = None


class RecordingClient:
    """The client side: permission by policy, fs from disk, no terminals."""

    def __init__(self, permission: Literal["allow", "deny"]) -> None:
        self.permission = permission
        self.permission_requests: list[dict[str, Any]] = []
        self.fs_calls: list[tuple[str, str]] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any):
        self.permission_requests.append({"tool_call": tool_call.model_dump(by_alias=True, exclude_none=True),
                                         "options": [o.model_dump(by_alias=True) for o in options]})
        wanted = ("allow_once", "allow_always") if self.permission == "allow" else ("reject_once", "reject_always")
        for kind in wanted:
            for option in options:
                if option.kind == kind:
                    return RequestPermissionResponse(outcome=AllowedOutcome(option_id=option.option_id,
                                                                            outcome="selected"))
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        # Raw frames are recorded by the observer; nothing to do here.
        return None

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        self.fs_calls.append(("read", path))
        if not Path(path).is_file():
            # gemini-cli treats an error whose message says "Resource not found" as ENOENT
            # (a new file); any other error fails its write_file tool.
            raise RequestError.resource_not_found(path)
        text = Path(path).read_text()
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start:start + limit] if limit else lines[start:])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any):
        self.fs_calls.append(("write", path))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


@dataclass
class Probe:
    """One agent process, from spawn to close, with everything it said."""

    name: str
    # The agent's full command line (see agent_setups.AgentSetup.command).
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    git_repo: bool = False
    permission: Literal["allow", "deny"] = "allow"
    fs_capability: bool = True
    # A command line to run the agent under, e.g. ["strace", "-f", "-e", "trace=connect", "-o", FILE].
    wrap: list[str] = field(default_factory=list)
    # Reuse another probe's HOME and cwd (to load its sessions in a new process).
    reuse: Probe | None = None

    def __post_init__(self) -> None:
        self.out = OUT_ROOT / self.name
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.mkdir(parents=True)
        if self.reuse is not None:
            self.home, self.cwd = self.reuse.home, self.reuse.cwd
        else:
            self.home = Path(tempfile.mkdtemp(prefix=f"acpnb-{self.name}-home-"))
            self.cwd = Path(tempfile.mkdtemp(prefix=f"acpnb-{self.name}-work-"))
        if self.git_repo and self.reuse is None:
            subprocess.run(["git", "init", "-q", str(self.cwd)], check=True)
        self.frames: list[Frame] = []
        self.client = RecordingClient(self.permission)
        self.t0 = 0.0
        self.process: asyncio.subprocess.Process | None = None
        self.conn: acp.core.ClientSideConnection | None = None
        self.notes: dict[str, Any] = {}

    # -- lifecycle

    def _observe(self, event: StreamEvent) -> None:
        direction = "send" if event.direction.value == "outgoing" else "recv"
        self.frames.append(Frame(time.monotonic() - self.t0, direction, event.message))

    async def start(self) -> None:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.home), "LANG": "C.UTF-8", **self.env}
        self.t0 = time.monotonic()
        self.process = await asyncio.create_subprocess_exec(
            *self.wrap, *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=(self.out / "stderr.txt").open("wb"), env=env, cwd=str(self.cwd),
            start_new_session=True, limit=64 * 1024 * 1024)
        self.conn = acp.connect_to_agent(self.client, self.process.stdin, self.process.stdout,
                                         observers=[self._observe])

    async def call(self, method: str, params: dict[str, Any], timeout: float = 60.0) -> CallResult:
        """A raw request, so the result is seen exactly as sent (the SDK's models drop fields)."""
        assert self.conn is not None
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(self.conn._conn.send_request(method, params), timeout)
            outcome = CallResult(method, True, round(time.monotonic() - started, 3), result=result)
        except RequestError as error:
            outcome = CallResult(method, False, round(time.monotonic() - started, 3),
                                 error={"code": error.code, "message": str(error), "data": error.data})
        except asyncio.TimeoutError:
            outcome = CallResult(method, False, round(time.monotonic() - started, 3),
                                 error={"code": None, "message": f"no answer within {timeout} s"})
        return outcome

    async def initialize(self) -> CallResult:
        return await self.call("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": self.fs_capability, "writeTextFile": self.fs_capability},
                                   "terminal": False},
            "clientInfo": {"name": "acp-notebook-explore", "version": "0"},
        })

    async def new_session(self) -> CallResult:
        return await self.call("session/new", {"cwd": str(self.cwd), "mcpServers": []})

    async def prompt(self, session_id: str, text: str, timeout: float = 120.0) -> tuple[CallResult, list[dict]]:
        """One turn; returns the result and the session/update params that arrived during it."""
        first = len(self.frames)
        result = await self.call("session/prompt", {"sessionId": session_id,
                                                    "prompt": [{"type": "text", "text": text}]}, timeout)
        updates = [f.msg.get("params", {}) for f in self.frames[first:]
                   if f.dir == "recv" and f.msg.get("method") == "session/update"]
        return result, updates

    async def close(self, eof_grace: float = 5.0) -> None:
        """Close stdin, see whether the agent exits by itself, then end its whole process group."""
        assert self.process is not None
        pgid = self.process.pid
        if self.conn is not None:
            await self.conn.close()
        started = time.monotonic()
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), eof_grace)
            self.notes["exits_on_eof"] = True
            self.notes["eof_exit_s"] = round(time.monotonic() - started, 2)
            self.notes["exit_code"] = self.process.returncode
        except asyncio.TimeoutError:
            self.notes["exits_on_eof"] = False
            os.killpg(pgid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 5)
                self.notes["exit_code_after_sigterm"] = self.process.returncode
            except asyncio.TimeoutError:
                os.killpg(pgid, signal.SIGKILL)
                await self.process.wait()
                self.notes["needed_sigkill"] = True
        await asyncio.sleep(0.5)
        try:
            os.killpg(pgid, 0)
            leftovers = subprocess.run(["ps", "-o", "pid,args", "--no-headers", "-g", str(pgid)],
                                       capture_output=True, text=True).stdout.strip()
            self.notes["process_group_leftovers"] = leftovers
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            self.notes["process_group_leftovers"] = ""
        self.notes["home_files"] = sorted(str(p.relative_to(self.home)) for p in self.home.rglob("*") if p.is_file())
        self.notes["cwd_files"] = sorted(str(p.relative_to(self.cwd)) for p in self.cwd.rglob("*")
                                         if p.is_file() and ".git/" not in str(p))

    def save(self, results: dict[str, Any], keep_dirs: bool = False) -> None:
        with (self.out / "frames.jsonl").open("w") as frames:
            for frame in self.frames:
                frames.write(json.dumps({"t": round(frame.t, 3), "dir": frame.dir, "msg": frame.msg}) + "\n")
        summary = {"notes": self.notes, "permission_requests": self.client.permission_requests,
                   "fs_calls": self.client.fs_calls, **results}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2, default=lambda o: o.__dict__))
        if not keep_dirs and not os.environ.get("ACP_EXPLORE_KEEP"):
            shutil.rmtree(self.home, ignore_errors=True)
            shutil.rmtree(self.cwd, ignore_errors=True)


def update_kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u.get("update", {}).get("sessionUpdate", "?") for u in updates]


def turn_text(updates: list[dict[str, Any]], kind: str = "agent_message_chunk") -> str:
    return "".join(u["update"].get("content", {}).get("text", "") for u in updates
                   if u.get("update", {}).get("sessionUpdate") == kind)
