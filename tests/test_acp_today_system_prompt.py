"""System prompts (unstable ACP v1: ``systemPrompt`` on session/new, load, resume and fork), sent only where the
agent advertises ``sessionCapabilities.systemPrompt``: ``acpnb.start(system_prompt=..., system_prompt_mode=...)``,
``%config AcpMagics.system_prompt`` and the notebook's default note, the demo agent telling back what arrived, and
the inspector naming it (its unstable methods and fields noted as such, not as errors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook import _schema
from acp_notebook.demo import DemoAgent
from acp_notebook.frames import analyze
from tests.recorded_agents import write_recording
from tests.shells import shell  # noqa: F401 - fixture

DEMO_PROCESS = [sys.executable, "-m", "acp_notebook.demo"]
UNSTABLE = json.loads((Path(__file__).resolve().parent / "acp_schema" / "schema.unstable.json").read_text())["$defs"]
STABLE = json.loads((Path(__file__).resolve().parent / "acp_schema" / "schema.json").read_text())["$defs"]


def sent(agent, method):
    return [e["msg"]["params"] for e in list(agent.log) if e["dir"] == "send" and e["msg"].get("method") == method]


def test_a_system_prompt_arrives_in_each_mode_and_forks_keep_it(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path, system_prompt="Answer in haiku.") as agent:
        session = agent.new_session()
        expected = {"mode": "append", "content": [{"type": "text", "text": "Answer in haiku."}]}
        assert session.system_prompt == expected and sent(agent, "session/new")[0]["systemPrompt"] == expected
        said = session.prompt("What is your system prompt?").text
        assert "My system prompt (append, added to my own instructions):\n\nAnswer in haiku." in said
        fork = session.fork()
        assert sent(agent, "session/fork")[0]["systemPrompt"] == expected and fork.system_prompt == expected
        agent.system_prompt, agent.system_prompt_mode = (lambda a: f"You are {a.name}."), "override"
        other = agent.new_session()
        assert "(override, in place of my own instructions):\n\nYou are DemoAgent." in other.prompt(
            "what is your system prompt?").text
        agent.system_prompt = ""  # nothing: none is sent
        bare = agent.new_session()
        assert bare.system_prompt is None and "systemPrompt" not in sent(agent, "session/new")[-1]
        assert "I was given no system prompt" in bare.prompt("what is your system prompt?").text
        row = next(r for r in analyze(list(agent.log), check_schema=False) if r.method == "session/new"
                   and r.kind == "request")
        assert row.summary.endswith(" \u00b7 system prompt (append, 16 characters)")


@pytest.mark.slow
def test_a_system_prompt_is_kept_with_the_session_across_processes(tmp_path):
    with acpnb.start(DEMO_PROCESS, cwd=tmp_path, system_prompt="Be terse.") as agent:
        session_id = agent.new_session().id
    with acpnb.start(DEMO_PROCESS, cwd=tmp_path) as again:  # sends none: the session keeps the one it had
        loaded = again.load_session(session_id)
        assert "systemPrompt" not in sent(again, "session/load")[0] and loaded.system_prompt is None
        assert "Be terse." in loaded.prompt("what is your system prompt?").text


def test_only_where_advertised_and_override_only_where_offered(tmp_path):
    with acpnb.start(DemoAgent(legacy=True), cwd=tmp_path, system_prompt="Hello") as old:
        session = old.new_session()  # the legacy demo advertises no systemPrompt: none may be sent
        assert session.system_prompt is None and "systemPrompt" not in sent(old, "session/new")[0]
    path = write_recording(tmp_path / "append-only.acp.jsonl", [],
                           capabilities={"sessionCapabilities": {"systemPrompt": {}}})
    with acpnb.replay(path) as agent:
        agent.system_prompt, agent.system_prompt_mode = "Replace yourself", "override"
        with pytest.raises(acpnb.CapabilityError, match="agent 'scripted' does not take a system prompt in "
                                                        "'override' mode \\(it offers append\\)"):
            agent.new_session()
        assert sent(agent, "session/new") == []  # refused before anything was sent
    with pytest.raises(ValueError, match="system_prompt_mode is 'append' or 'override', not 'replace'"):
        acpnb.start(DemoAgent(), system_prompt="x", system_prompt_mode="replace")


def test_the_demo_refuses_a_malformed_system_prompt(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent:
        for bad, says in ((
                {"mode": "prepend", "content": [{"type": "text", "text": "x"}]}, "mode 'prepend' is not one"),
                ({"mode": "append", "content": []}, "non-empty list"),
                ({"mode": "append", "content": [{"type": "image", "data": "", "mimeType": "image/png"}]},
                 "text content blocks only")):
            with pytest.raises(acpnb.RpcError, match=says) as raised:
                agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": bad})
            assert raised.value.code == -32602


def test_the_inspector_notes_unstable_methods_and_fields_as_such():
    only_unstable = sorted({d["x-method"] for d in UNSTABLE.values() if "x-method" in d}
                           - {d["x-method"] for d in STABLE.values() if "x-method" in d})
    assert sorted(_schema.UNSTABLE_METHODS) == only_unstable
    unstable_fields = {field for name, d in UNSTABLE.items() if name in STABLE
                       for field in set(d.get("properties") or {}) - set(STABLE[name].get("properties") or {})}
    assert _schema.UNSTABLE_FIELDS <= unstable_fields
    fork = {"jsonrpc": "2.0", "id": 4, "method": "session/fork", "params": {"sessionId": "s", "cwd": "/w"}}
    issues = _schema.check_frame(fork, "client")
    assert [i.level for i in issues] == ["unstable"] and "session/fork is unstable ACP" in issues[0].message
    new = {"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {
        "cwd": "/w", "mcpServers": [], "systemPrompt": {"mode": "append", "content": []}, "x": 1}}
    levels = {i.path: i.level for i in _schema.check_frame(new, "client")}
    assert levels == {"params/systemPrompt": "unstable", "params/x": "unknown"}


# --- the magics -------------------------------------------------------------------------------------
def run(ip, source):
    result = ip.run_cell(source)
    for error in (result.error_before_exec, result.error_in_exec):
        if error is not None:
            raise error


@pytest.mark.slow
def test_the_notebook_tells_agents_where_they_are_unless_configured_otherwise(shell):
    with capture_output():
        run(shell, "%config AcpMagics.kernel_tools = 'read-only'")
        run(shell, "%acp start demo")
    note = acpnb.current().system_prompt
    assert note["mode"] == "append" and note["content"][0]["text"].startswith("You are working from a Jupyter "
                                                                              "notebook")
    assert "run_code is refused: you may read, not run" in note["content"][0]["text"]
    with capture_output():
        run(shell, "%config AcpMagics.system_prompt = 'Be brief.'")
        run(shell, "%acp new")
    assert acpnb.current().system_prompt["content"] == [{"type": "text", "text": "Be brief."}]
    with capture_output():
        run(shell, "%config AcpMagics.system_prompt = ''")
        run(shell, "%acp new")
    assert acpnb.current().system_prompt is None
    with capture_output():
        run(shell, "%config AcpMagics.system_prompt = None")
        run(shell, "%config AcpMagics.system_prompt_mode = 'override'")
        run(shell, "%acp start demo --name second")
    assert acpnb.current().system_prompt["mode"] == "override"
