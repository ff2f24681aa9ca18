"""An ACP agent on stdio that exercises the client's edge cases; its behaviour is picked by argv[1].

edge        options with an unknown type and a custom category; prompts send updates for an unknown
            session, an unknown update kind, 300 tiny chunks, a config_option_update and info updates;
            set_config_option refuses the value "forbidden"
crash       answers initialize and session/new, then dies with a message on stderr mid-turn
exit-early  writes to stderr and exits before initialize
silent      reads requests but never answers (initialize times out)
ask-first   mentions a tool call for the first time in a permission request, then only updates it
stderr-flood writes 2 MB to stderr before answering anything (the client must drain it)
"""

from __future__ import annotations

import asyncio
import sys

from acp_notebook._sdk import defer_sdk_package, stdio_streams

defer_sdk_package()  # the SDK's modules without its schema models, as our own servers load them: a quicker start

from acp.connection import Connection  # noqa: E402
from acp.exceptions import RequestError  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "edge"

OPTIONS = [
    {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "m1",
     "options": [{"value": "m1", "name": "M1"}, {"value": "m2", "name": "M2"}, {"value": "forbidden", "name": "F"}]},
    {"id": "style", "name": "Style", "category": "_edge_style", "type": "select", "currentValue": "a",
     "options": [{"value": "a", "name": "A"}, {"value": "b", "name": "B"}]},
    {"id": "dial", "name": "Dial", "type": "dial", "currentValue": 3},
]


class EdgeAgent:
    def __init__(self) -> None:
        self.conn: Connection | None = None
        self.options = [dict(o) for o in OPTIONS]

    async def update(self, session_id: str, update: dict) -> None:
        assert self.conn is not None
        await self.conn.send_notification("session/update", {"sessionId": session_id, "update": update})

    async def handle(self, method: str, params: dict | None, is_notification: bool):
        params = params or {}
        if method == "initialize":
            return {"protocolVersion": 1, "agentCapabilities": {},
                    "agentInfo": {"name": "edge-agent", "version": "1.0"}, "authMethods": []}
        if method == "session/new":
            return {"sessionId": "edge-1", "configOptions": self.options}
        if method == "session/set_config_option":
            if params.get("value") == "forbidden":
                raise RequestError(-32602, "forbidden is not allowed", {"message": "pick m1 or m2"})
            for option in self.options:
                if option["id"] == params.get("configId"):
                    option["currentValue"] = params.get("value")
            return {"configOptions": self.options}
        if method == "session/prompt":
            return await self.prompt(params["sessionId"])
        if method == "session/cancel":
            return None
        raise RequestError.method_not_found(method)

    async def prompt(self, session_id: str) -> dict:
        if MODE == "crash":
            await self.update(session_id, {"sessionUpdate": "agent_message_chunk",
                                           "content": {"type": "text", "text": "about to fail"}})
            print("edge-agent: simulated fatal error in the model client", file=sys.stderr, flush=True)
            sys.stderr.flush()
            import os

            os._exit(3)
        if MODE == "ask-first":
            assert self.conn is not None
            call = {"toolCallId": "t9", "title": "Run ls", "kind": "execute", "status": "pending"}
            answer = await self.conn.send_request("session/request_permission", {
                "sessionId": session_id, "toolCall": call,
                "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                            {"optionId": "no", "name": "No", "kind": "reject_once"}]})
            status = "completed" if answer["outcome"].get("optionId") == "yes" else "failed"
            await self.update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": "t9", "status": status})
            return {"stopReason": "end_turn"}
        await self.update("someone-else", {"sessionUpdate": "agent_message_chunk",
                                           "content": {"type": "text", "text": "not for you"}})
        await self.update(session_id, {"sessionUpdate": "hologram", "payload": 1})
        for i in range(300):
            await self.update(session_id, {"sessionUpdate": "agent_message_chunk",
                                           "content": {"type": "text", "text": f"{i},"}})
        self.options[0]["currentValue"] = "m2"
        await self.update(session_id, {"sessionUpdate": "config_option_update", "configOptions": self.options})
        await self.update(session_id, {"sessionUpdate": "session_info_update", "title": "Edge cases",
                                       "_meta": {"edge": {"n": 1}}})
        await self.update(session_id, {"sessionUpdate": "usage_update", "used": 10, "size": 100,
                                       "cost": {"amount": 0.5, "currency": "USD"}})
        return {"stopReason": "end_turn"}


async def main() -> None:
    if MODE == "exit-early":
        print("edge-agent: cannot find my config file", file=sys.stderr, flush=True)
        sys.exit(7)
    if MODE == "stderr-flood":
        chunk = "x" * 1023 + "\n"
        for _ in range(2048):
            sys.stderr.write(chunk)
        sys.stderr.write("edge-agent: flood done\n")
        sys.stderr.flush()
    reader, writer = await stdio_streams()
    agent = EdgeAgent()
    if MODE == "silent":
        while await reader.readline():
            pass
        return
    conn = Connection(agent.handle, writer, reader, listening=False)
    agent.conn = conn
    await conn.main_loop()


if __name__ == "__main__":
    asyncio.run(main())
