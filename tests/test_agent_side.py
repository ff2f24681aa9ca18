"""The one agent-side serving path (acp_notebook/agent_side.py), as a CellAgent meets it: what it keeps that the SDK's
own agent side would not (plain JSON params checked by name, our dicts sent unchanged, refused notifications as one
warning line, $/cancel_request taken as each SDK line can), in memory and in a process on real pipes. The demo
agent's side of the same path is in tests/test_demo_agent.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook._protocol import INVALID_PARAMS, METHOD_NOT_FOUND
from acp_notebook._sdk import sdk_cancels_requests
from acp_notebook.cellagent import CellAgent, select

ROOT = Path(__file__).resolve().parent.parent


class Styled(CellAgent):
    options = [select("tone", ["plain", "pirate"], category="_style")]

    def prompt(self, text):
        # A pushed option list carrying a custom category: the SDK's typed models would drop it (None).
        self.add_option(select("mood", ["calm", "loud"], category="_mood"))
        self.update_options()
        return "ok"


def test_a_cell_agents_params_are_checked_by_name_and_missing_methods_are_not_found(tmp_path):
    with acpnb.start(Styled(), cwd=tmp_path, timeout=10) as agent:
        session = agent.new_session()
        refused = {
            ("session/prompt", "'prompt' must be an array, got str"): {"sessionId": session.id, "prompt": "hi"},
            ("session/new", "needs an array 'mcpServers'"): {"cwd": str(tmp_path)},
            ("session/set_config_option", "'value' must be a string or a boolean, got list"):
                {"sessionId": session.id, "configId": "tone", "value": ["pirate"]},
            ("session/close", "needs its params as a JSON object"): ["not", "an object"],
        }
        for (method, message), params in refused.items():
            with pytest.raises(acpnb.RpcError) as err:
                agent.request(method, params)
            assert err.value.code == INVALID_PARAMS and message in str(err.value), (method, str(err.value))
        # What a CellAgent has no method for, and extensions (it has no ext_method), are not found.
        for method, params in [("session/load", {"sessionId": session.id, "cwd": str(tmp_path), "mcpServers": []}),
                               ("authenticate", {"methodId": "x"}), ("_lesson/anything", {})]:
            with pytest.raises(acpnb.RpcError) as err:
                agent.request(method, params)
            assert err.value.code == METHOD_NOT_FOUND, method
        assert session.prompt("still here", timeout=10).text == "ok"


def test_a_hooks_update_goes_out_as_its_own_dict(tmp_path):
    """The reason CellAgent once read the SDK's private _conn: its updates are sent unchanged, custom categories too."""
    with acpnb.start(Styled(), cwd=tmp_path, timeout=10) as agent:
        session = agent.new_session()
        session.prompt("push", timeout=10)
        pushed = [e["msg"]["params"]["update"] for e in agent.log if e["dir"] == "recv"
                  and e["msg"].get("method") == "session/update"
                  and e["msg"]["params"]["update"]["sessionUpdate"] == "config_option_update"]
        assert [[o.get("category") for o in u["configOptions"]] for u in pushed] == [["_style", "_mood"]]
        assert [(o.id, o.category) for o in session.config] == [("tone", "_style"), ("mood", "_mood")]


_SCRIPT = """
import threading
from acp_notebook.cellagent import CellAgent, select

released = threading.Event()


class Gate(CellAgent):
    options = [select("gate", ["shut", "open"])]

    def prompt(self, text):
        released.wait(60)  # until set_config_option opens it: the request stays running meanwhile
        return "through"

    def set_config_option(self, option_id, value):
        released.set()


Gate().run_stdio()
"""


def _frames(*frames: dict) -> str:
    return "".join(json.dumps(f) + "\n" for f in frames)


def test_on_stdio_refused_notifications_are_warnings_and_cancel_request_is_taken_as_the_sdk_line_can(tmp_path):
    """A CellAgent script on real pipes: a notification it refuses is one warning on stderr (no traceback), and a
    running prompt named by $/cancel_request is answered 'request cancelled' on the SDK's 1.x line, whose Connection
    acts on it; the 0.12 line cannot, so there it runs to its end (a turn is stopped by session/cancel)."""
    script = tmp_path / "gate.py"
    script.write_text(_SCRIPT)
    agent = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ))
    answers: dict[int, dict] = {}
    try:
        agent.stdin.write(_frames(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {}},
            {"jsonrpc": "2.0", "method": "what/ever", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}}))
        agent.stdin.flush()
        while len(answers) < 2:
            message = json.loads(agent.stdout.readline())
            if "id" in message:
                answers[message["id"]] = message
        session_id = answers[2]["result"]["sessionId"]
        agent.stdin.write(_frames(
            {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
             "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "wait"}]}},
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 3}}))
        agent.stdin.flush()
        if sdk_cancels_requests():  # the answer comes while the hook still waits
            answers[3] = json.loads(agent.stdout.readline())
        agent.stdin.write(_frames({"jsonrpc": "2.0", "id": 4, "method": "session/set_config_option",
                                   "params": {"sessionId": session_id, "configId": "gate", "value": "open"}}))
        agent.stdin.flush()
        while len(answers) < 4:
            message = json.loads(agent.stdout.readline())
            if "id" in message:
                answers[message["id"]] = message
    finally:
        agent.stdin.close()
        stderr = agent.stderr.read()
        agent.wait(30)
    assert agent.returncode == 0, stderr
    assert answers[1]["result"]["protocolVersion"] == 1
    if sdk_cancels_requests():
        assert answers[3]["error"]["code"] == -32800, answers[3]
    else:
        assert answers[3]["result"] == {"stopReason": "end_turn"}, answers[3]
    assert answers[4]["result"]["configOptions"][0]["currentValue"] == "open"
    warnings = [line for line in stderr.splitlines() if "ignored" in line]
    assert warnings == ["notification session/cancel ignored: session/cancel needs a string 'sessionId'",
                        "notification what/ever ignored: Method not found"], stderr
    assert "Traceback" not in stderr


def test_the_demo_and_a_cell_agent_are_served_by_the_same_function():
    """One path: neither agent brings a router of its own, and the SDK's AgentSideConnection is not used."""
    from acp_notebook import agent_side
    from acp_notebook.demo import agent as demo_agent

    assert demo_agent.serve is agent_side.serve
    source = (ROOT / "acp_notebook" / "cellagent.py").read_text(encoding="utf-8")
    assert "from .agent_side import serve" in source and "AgentSideConnection(" not in source
    assert not (ROOT / "acp_notebook" / "demo" / "wire.py").exists()
