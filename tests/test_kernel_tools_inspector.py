"""The protocol inspector on the ``kernel`` entry of session/new, load and resume: what it says the
server is, how it is reached, the policy in force, and that its token never shows; and the recorded
real-agent sessions that used the kernel tools, replayed offline.

The frames here are the ones a client writes down: passed through the Redactor as ``Agent.log`` and
recordings pass them (the token's value is not in any environment the redactor knows: the name rule
of ``env`` lists masks it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook._redact import Redactor
from acp_notebook.frames import Analyzer, analyze
from acp_notebook.record import Recording
from acp_notebook.testing import replay_script
from acp_notebook.widgets._frames_html import frames_text, row_html
from acp_notebook.widgets.inspector import ProtocolInspector

TOKEN = "k3rn3l-t0ken-Zq8"  # a short one: the name rule masks values of any length
KERNEL_ENTRY = {"name": "kernel", "command": "/usr/bin/python3", "args": ["-m", "acp_notebook.kernel_tools.bridge"],
                "env": [{"name": "ACPNB_KERNEL_CHANNEL", "value": "/run/user/1000/acpnb-x1/kernel.sock"},
                        {"name": "ACPNB_KERNEL_TOKEN", "value": TOKEN}]}
FILES_ENTRY = {"name": "files", "command": "npx", "args": ["-y", "some-files-server"], "env": []}


def logged(frames: list[tuple[str, dict]]) -> list[dict]:
    """Frames as the client logs them: masked by a Redactor that knows no secret values."""
    redactor = Redactor()
    return [{"dir": direction, "t": 1.0 + i, "msg": redactor.masked(msg)} for i, (direction, msg) in enumerate(frames)]


def session_frames(method: str = "session/new") -> list[tuple[str, dict]]:
    params = {"cwd": "/work", "mcpServers": [FILES_ENTRY, KERNEL_ENTRY]}
    if method != "session/new":
        params["sessionId"] = "s-1"
    return [("send", {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
            ("recv", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s-1"}})]


def test_the_kernel_entry_is_summarized_and_explained_with_the_policy_in_force():
    for method in ("session/new", "session/load", "session/resume"):
        analyzer = Analyzer(kernel_policy=lambda: "read-only")
        request, _answer = (analyzer.add(entry) for entry in logged(session_frames(method)))
        assert request.summary.endswith(" \u00b7 mcp: files, kernel"), method
        files, kernel = request.servers
        assert files == "files: a stdio MCP server: the agent starts `npx -y some-files-server` and speaks MCP " \
                        "over its stdin and stdout."
        assert kernel.startswith("kernel: acp-notebook's own MCP server, the agent's way into this notebook's "
                                 "kernel: list_variables, inspect_variable, run_code, notebook_history, propose_cell.")
        assert "the agent starts `/usr/bin/python3 -m acp_notebook.kernel_tools.bridge` itself" in kernel
        assert "private Unix socket in a directory only you can open (nothing listens on the network)" in kernel
        assert "token in ACPNB_KERNEL_TOKEN, masked (***) here, in agent.log and in recordings" in kernel
        assert kernel.endswith("Policy in force: read-only: the reading tools answer; run_code is refused.")


def test_a_recording_says_the_policy_is_not_in_the_frame_and_the_token_shows_nowhere():
    entries = logged(session_frames())
    (request, answer) = analyze(entries)
    assert request.servers[1].endswith("is not part of the frame.")
    shown = row_html(request, opened=True) + frames_text([request, answer])
    inspector = ProtocolInspector.of_frames(entries)
    static = inspector._static()
    assert "MCP servers offered to the session" in row_html(request) and "mcp: files, kernel" in static["text/plain"]
    for text in (shown, json.dumps(entries), Redactor().json_line(session_frames()[0][1]), *static.values()):
        assert TOKEN not in text
    assert entries[0]["msg"]["params"]["mcpServers"][1]["env"] == [
        {"name": "ACPNB_KERNEL_CHANNEL", "value": "/run/user/1000/acpnb-x1/kernel.sock"},
        {"name": "ACPNB_KERNEL_TOKEN", "value": "***"}]
    inspector.close()


def test_the_name_rule_masks_secret_entries_of_env_and_headers_lists_only():
    redactor = Redactor()
    frame = {"mcpServers": [
        {"name": "web", "type": "http", "url": "http://localhost", "headers": [
            {"name": "Authorization", "value": "Bearer abc"}, {"name": "Accept", "value": "text/plain"}]},
        {"name": "s", "command": "x", "env": [{"name": "DB_PASSWORD", "value": "pw"}, {"name": "HOME_DIR", "value": "/h"},
                                                {"name": "MODE", "value": "fast"}]}],
        # Config choices are {name, value} objects too, but not in an env or headers list: left alone.
        "configOptions": [{"id": "budget", "options": [{"name": "Token budget", "value": "large"}]}]}
    assert redactor.finds(frame)
    masked = redactor.masked(frame)
    assert masked["mcpServers"][0]["headers"] == [{"name": "Authorization", "value": "***"},
                                                  {"name": "Accept", "value": "text/plain"}]
    assert masked["mcpServers"][1]["env"] == [{"name": "DB_PASSWORD", "value": "***"},
                                              {"name": "HOME_DIR", "value": "/h"}, {"name": "MODE", "value": "fast"}]
    assert masked["configOptions"] == frame["configOptions"]
    assert not redactor.finds({"configOptions": frame["configOptions"], "env": [{"name": "MODE", "value": "x"}]})


# --- the recorded real-agent sessions (tests/interop/record_sessions.py --kernel) ------------------------
KERNEL_RECORDINGS = Path(__file__).resolve().parents[1] / "notebooks" / "recordings" / "kernel-tools"


@pytest.mark.parametrize("name, prefix", [("claude", "mcp__kernel__"), ("opencode", "kernel_")])
def test_a_recorded_kernel_session_replays_offline_and_the_inspector_explains_it(tmp_path, name, prefix):
    path = KERNEL_RECORDINGS / f"{name}.acp.jsonl"
    run = replay_script(path, cwd=tmp_path)
    (turn,) = run.turns
    assert turn.stop_reason == "end_turn" and turn.text.endswith("Kernel answered: 1491")
    assert [(c.title, c.status) for c in turn.tool_calls] == [(f"{prefix}list_variables", "completed"),
                                                              (f"{prefix}run_code", "completed")]
    # Claude asked before each MCP call (answered as recorded); the kernel's own Allow is no ACP frame.
    assert len(turn.permissions) == (2 if name == "claude" else 0)
    rows = analyze({"dir": f.direction, "t": f.t, "msg": f.msg} for f in Recording.load(path).frames)
    (new,) = [r for r in rows if r.method == "session/new" and r.kind == "request"]
    assert new.summary.endswith("\u00b7 mcp: kernel") and "masked (***)" in new.servers[0]
    (entry,) = new.msg["params"]["mcpServers"]
    assert {e["name"]: e["value"] for e in entry["env"]}["ACPNB_KERNEL_TOKEN"] == "***"


def test_a_live_inspector_names_the_policy_in_force_and_never_the_token(tmp_path):
    with acpnb.start([sys.executable, "-m", "acp_notebook.demo"], cwd=tmp_path, kernel_tools="read-only",
                     timeout=30) as agent:
        session = agent.new_session()
        token = {e["name"]: e["value"] for e in session.kernel_tools.entry["env"]}["ACPNB_KERNEL_TOKEN"]
        inspector = ProtocolInspector(agent)
        static = inspector._static()
        inspector.close()
        assert "Policy in force: read-only: the reading tools answer; run_code is refused." in static["text/html"]
        assert "mcp: kernel" in static["text/plain"]
        assert token not in json.dumps(static) and token not in json.dumps(list(agent.log))


def test_a_prompt_row_names_what_the_prompt_carries_besides_its_text():
    from acp_notebook import attachments

    blocks = attachments.prompt_blocks("What stands out?", [attachments.attachment({"a": 1}, "cfg", embedded=True)])
    (row,) = analyze([{"dir": "send", "t": 1.0, "msg": {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                                                         "params": {"sessionId": "s", "prompt": blocks}}}])
    assert row.summary == "'What stands out?' + text, resource kernel://variables/cfg.json"


# --- the MCP messages between the agent and the kernel (issue 35, point 6) -----------------------------------
def test_the_inspector_shows_the_mcp_messages_among_the_acp_frames_linked_to_the_tool_calls(tmp_path, monkeypatch):
    from acp_notebook.demo.agent import DemoAgent
    from acp_notebook.widgets._frames_html import table_html

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # the tools serve a shell's namespace, if any
    monkeypatch.setitem(shell.user_ns if shell is not None else vars(sys.modules["__main__"]), "inspected_total", 1491)
    with acpnb.start(DemoAgent(), kernel_tools="ask", permission="allow", timeout=30, cwd=tmp_path) as agent:
        session = agent.new_session()
        session.prompt("what is in inspected_total?", timeout=30)
        session.prompt("run inspected_total + 1", timeout=30)
        inspector = ProtocolInspector(agent)
        rows = inspector._analyzer.rows
    mcp = [r for r in rows if r.protocol == "mcp"]
    methods = [r.method for r in mcp if r.kind in ("request", "notification")]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/call"], methods
    assert [r.summary for r in mcp if r.method == "tools/call" and r.kind == "request"] == [
        "list_variables()", "inspect_variable(name='inspected_total')", "run_code(code='inspected_total + 1')"]
    # In time among the ACP frames: each call sits inside the prompt turn that made it.
    prompts = [r for r in rows if r.method == "session/prompt"]
    call = next(r for r in mcp if r.summary.startswith("inspect_variable"))
    assert prompts[0].index < call.index < prompts[0].pair
    # Answered and explained: what the tool is, and what the policy does with run_code.
    answer = rows[call.pair]
    assert answer.protocol == "mcp" and answer.kind == "result" and "1491" in answer.summary
    assert "looks at one variable" in call.explanation.text
    run = next(r for r in mcp if r.summary.startswith("run_code"))
    assert "under 'ask' the code waits for your Allow" in run.explanation.text
    # Linked both ways with the agent's own tool_call rows.
    for row in (call, run):
        tool_call = rows[row.link]
        assert tool_call.protocol == "acp" and tool_call.update == "tool_call" and tool_call.link == row.index
    assert rows[call.pair].link == call.link  # the answer leads there too
    html = table_html(rows)
    assert 'class="acpnb-mcp"' in html and f'href="#acpnb-frame-{call.link}"' in html
    assert "MCP: agent \u2192 kernel" in html and f'id="acpnb-frame-{call.index}"' in html
    assert not any(r.issues for r in mcp)  # not checked against the ACP schema
