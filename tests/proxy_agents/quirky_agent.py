"""An ACP agent on stdio (the SDK's raw Connection) whose quirks the proxy must survive; flags pick them.

Its model option has id "llm" (not "model") and model ids with '/' and ':'. Before answering
session/new it sends a session_info_update (so the notification precedes the session id's answer).
Prompts: containing "crash" -> a chunk, a line on stderr, exit 3 mid-turn; "slow" -> waits for
session/cancel; "run CMD" -> terminal/* on the client; "ask" -> session/request_permission;
"ext" -> an extension notification and request to the client; "burst N" -> N tiny chunks;
"mcp" -> the mcpServers its session/new or session/load got, as JSON; "close-stdout" -> a chunk,
then it closes its stdout and lives on without answering; anything else -> an echo.

--no-model          no model option at all (only "effort" and a custom-category option)
--probe-delay S     session/new takes S seconds
--bind-update       set_config_option on the model sends config_option_update before answering
--name NAME         agentInfo.name
--auth-var VAR      advertise the auth methods "quirky-key" (accepts only when $VAR is "sesame") and
                    "quirky-login" (always accepts); session/new, load and list answer -32000
                    "authentication required" until one succeeded; the prompt "expire" forgets it
                    and answers -32000 too
--auth-after N      authenticate answers only once N session requests were refused (so that
                    concurrent callers are all waiting on one attempt)
--store FILE        sessions (cwd, prompts) kept in FILE, so a later process loads them; loaded on the
                    default option values, as agents that keep only the conversation do
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from acp_notebook._sdk import defer_sdk_package, stdio_streams

defer_sdk_package()  # the SDK's modules without its schema models, as our own servers load them: a quicker start

from acp.connection import Connection  # noqa: E402
from acp.exceptions import RequestError  # noqa: E402

MODELS = ["vendor/model-a", "org:model-b:latest"]


class Quirky:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.conn: Connection | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.client_caps: dict[str, Any] = {}
        self.cancelled: dict[str, asyncio.Event] = {}
        self.authenticated = not args.auth_var
        self.refusals = 0
        self.refused_enough = asyncio.Event()
        self.store = Path(args.store) if args.store else None

    def fresh(self, cwd: str, history: list[str], mcp: Any) -> dict[str, Any]:
        return {"llm": MODELS[0], "effort": "low", "verbosity": "terse", "cwd": cwd, "history": history, "mcp": mcp}

    def stored(self) -> dict[str, Any]:
        return json.loads(self.store.read_text()) if self.store is not None and self.store.exists() else {}

    def save(self, sid: str) -> None:
        if self.store is not None:
            state = self.sessions[sid]
            self.store.write_text(json.dumps({**self.stored(), sid: {"cwd": state["cwd"],
                                                                    "history": state["history"]}}))

    def options(self, sid: str) -> list[dict[str, Any]]:
        state = self.sessions[sid]
        options: list[dict[str, Any]] = []
        if not self.args.no_model:
            options.append({"id": "llm", "name": "LLM", "category": "model", "type": "select",
                            "currentValue": state["llm"], "_meta": {"quirky": True},
                            "options": [{"value": m, "name": m.upper(), "_meta": {"n": i}}
                                        for i, m in enumerate(MODELS)]})
        options.append({"id": "effort", "name": "Effort", "category": "thought_level", "type": "select",
                        "currentValue": state["effort"],
                        "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}]})
        options.append({"id": "verbosity", "name": "Verbosity", "category": "_quirky_verbosity", "type": "select",
                        "currentValue": state["verbosity"],
                        "options": [{"value": "terse", "name": "Terse"}, {"value": "chatty", "name": "Chatty"}]})
        return options

    def auth_methods(self) -> list[dict[str, Any]]:
        if not self.args.auth_var:
            return []
        return [{"id": "quirky-key", "name": "Quirky key", "description": f"the key in ${self.args.auth_var}"},
                {"id": "quirky-login", "name": "Quirky login"}]

    def authenticate(self, method_id: Any) -> dict[str, Any]:
        if method_id not in [m["id"] for m in self.auth_methods()]:
            raise RequestError(-32602, f"unknown auth method {method_id!r}")
        if method_id == "quirky-key" and os.environ.get(self.args.auth_var) != "sesame":
            raise RequestError(-32602, f"the key in ${self.args.auth_var} is not valid")
        self.authenticated = True
        return {}

    async def update(self, sid: str, update: dict[str, Any]) -> None:
        assert self.conn is not None
        await self.conn.send_notification("session/update", {"sessionId": sid, "update": update})

    async def chunk(self, sid: str, text: str) -> None:
        await self.update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    async def handle(self, method: str, params: Any, is_notification: bool) -> Any:
        params = params or {}
        if method == "initialize":
            self.client_caps = params.get("clientCapabilities") or {}
            return {"protocolVersion": 1, "agentInfo": {"name": self.args.name, "version": "0.1"},
                    "agentCapabilities": {"loadSession": True,
                                          "sessionCapabilities": {"list": {}, "close": {}}},
                    "authMethods": self.auth_methods()}
        if method == "authenticate":
            if self.args.auth_after:
                await self.refused_enough.wait()
            return self.authenticate(params.get("methodId"))
        if method in ("session/new", "session/load", "session/list") and not self.authenticated:
            self.refusals += 1
            if self.refusals >= self.args.auth_after:
                self.refused_enough.set()
            raise RequestError.auth_required({"authMethods": [m["id"] for m in self.auth_methods()]})
        if method == "session/new":
            if self.args.probe_delay:
                await asyncio.sleep(self.args.probe_delay)
            sid = f"q/{len(set(self.sessions) | set(self.stored())) + 1}:x"  # session ids with '/' and ':' too
            self.sessions[sid] = self.fresh(params["cwd"], [], params.get("mcpServers"))
            self.save(sid)
            await self.update(sid, {"sessionUpdate": "session_info_update", "title": "Quirky session",
                                    "_meta": {"quirky": {"born": True}}})
            return {"sessionId": sid, "configOptions": self.options(sid)}
        if method == "session/load":
            sid = params["sessionId"]
            if sid not in self.sessions and sid in self.stored():
                self.sessions[sid] = self.fresh(params["cwd"], self.stored()[sid]["history"], None)
            if sid not in self.sessions:
                raise RequestError(-32602, f"no session {sid!r}")
            self.sessions[sid]["mcp"] = params.get("mcpServers")
            for text in self.sessions[sid]["history"]:
                await self.update(sid, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}})
            return {"configOptions": self.options(sid)}
        if method == "session/list":
            return {"sessions": [{"sessionId": sid, "cwd": s["cwd"], "title": "Quirky session"}
                                 for sid, s in self.sessions.items()]}
        if method == "session/close":
            return {}
        if method == "session/set_config_option":
            sid = params["sessionId"]
            state = self.sessions[sid]
            config_id, value = params["configId"], params["value"]
            valid = {"llm": MODELS, "effort": ["low", "high"], "verbosity": ["terse", "chatty"]}
            if config_id not in valid or (config_id == "llm" and self.args.no_model) or value not in valid[config_id]:
                raise RequestError(-32602, f"bad {config_id}={value!r}")
            state[config_id] = value
            if config_id == "llm" and self.args.bind_update:
                state["effort"] = "high"  # picking a model changes another option, announced first
                await self.update(sid, {"sessionUpdate": "config_option_update", "configOptions": self.options(sid)})
            return {"configOptions": self.options(sid)}
        if method == "session/cancel":
            event = self.cancelled.get(params.get("sessionId"))
            if event is not None:
                event.set()
            return None
        if method == "session/prompt":
            return await self.prompt(params["sessionId"], params["prompt"])
        if method == "_quirky/ping":
            return {"pong": params}
        if is_notification:
            return None
        raise RequestError.method_not_found(method)

    async def prompt(self, sid: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        state = self.sessions[sid]
        state["history"].append(text)
        self.save(sid)
        assert self.conn is not None
        if text == "mcp":
            await self.chunk(sid, json.dumps(state["mcp"]))
            return {"stopReason": "end_turn"}
        if text == "expire" and self.args.auth_var:
            self.authenticated = False
            raise RequestError.auth_required({"reason": "the login expired"})
        if "crash" in text:
            await self.chunk(sid, "about to crash")
            print("quirky: simulated crash in the model client (on purpose)", file=sys.stderr, flush=True)
            os._exit(3)
        if text == "close-stdout":
            await self.chunk(sid, "closing my output")
            close_stdout()  # the process lives on, mute: only its pipe says it is gone
            await asyncio.Event().wait()
        if "slow" in text:
            event = self.cancelled[sid] = asyncio.Event()
            await self.chunk(sid, "waiting for cancel")
            await event.wait()
            return {"stopReason": "cancelled"}
        if text.startswith("burst "):
            for i in range(int(text.split()[1])):
                await self.chunk(sid, f"{i},")
            return {"stopReason": "end_turn"}
        if text.startswith("run "):
            if not self.client_caps.get("terminal"):
                await self.chunk(sid, "no terminal")
                return {"stopReason": "end_turn"}
            created = await self.conn.send_request("terminal/create", {"sessionId": sid, "command": text[4:]})
            tid = created["terminalId"]
            await self.conn.send_request("terminal/wait_for_exit", {"sessionId": sid, "terminalId": tid})
            output = await self.conn.send_request("terminal/output", {"sessionId": sid, "terminalId": tid})
            await self.conn.send_request("terminal/release", {"sessionId": sid, "terminalId": tid})
            await self.chunk(sid, f"terminal said: {output['output']}")
            return {"stopReason": "end_turn"}
        if text == "ask":
            answer = await self.conn.send_request("session/request_permission", {
                "sessionId": sid,
                "toolCall": {"toolCallId": "t1", "title": "Do it"},
                "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                            {"optionId": "no", "name": "No", "kind": "reject_once"}]})
            await self.chunk(sid, f"permission: {answer['outcome']}")
            return {"stopReason": "end_turn"}
        if text == "ext":
            await self.conn.send_notification("_quirky/notice", {"sessionId": sid, "note": "hello"})
            answer = await self.conn.send_request("_quirky/ask", {"sessionId": sid, "question": "?"})
            await self.chunk(sid, f"client answered {answer}")
            return {"stopReason": "end_turn"}
        model = "none" if self.args.no_model else state["llm"]
        for piece in (f"quirky({model}, effort={state['effort']})", " heard: ", text):
            await self.chunk(sid, piece)
        await self.update(sid, {"sessionUpdate": "usage_update", "used": len(text), "size": 1000})
        await self.update(sid, {"sessionUpdate": "session_info_update", "title": f"About {text[:20]}",
                                "_meta": {"quirky": {"turns": len(state["history"])}}})
        return {"stopReason": "end_turn", "_meta": {"quirky": {"model": model}}}


def close_stdout() -> None:
    """Close every descriptor of stdout's pipe (a uvloop parent leaves copies of it in its children), so the
    reader sees its end."""
    stdout = os.fstat(1)
    for name in os.listdir("/proc/self/fd"):
        try:
            same = os.path.samestat(os.fstat(int(name)), stdout)
        except OSError:
            continue
        if same:
            os.close(int(name))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-model", action="store_true")
    parser.add_argument("--probe-delay", type=float, default=0.0)
    parser.add_argument("--bind-update", action="store_true")
    parser.add_argument("--name", default="quirky-agent")
    parser.add_argument("--auth-var", default=None)
    parser.add_argument("--auth-after", type=int, default=0)
    parser.add_argument("--store", default=None)
    args = parser.parse_args()
    reader, writer = await stdio_streams()
    agent = Quirky(args)
    conn = Connection(agent.handle, writer, reader, listening=False)
    agent.conn = conn
    await conn.main_loop()


if __name__ == "__main__":
    asyncio.run(main())
