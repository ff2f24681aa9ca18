"""A planted API key never shows where acp-notebook writes things down.

The key is an environment variable whose name says it is a secret; the fault agent
(``--leak VAR``) puts its value into a reply, a thought, the title, a tool call's output, its
stderr, an error answer and its crash message. The test then looks for the value in
``agent.log``, the inspector, the recording, error messages, the transcript and stderr views,
directly and behind the proxy, and in a notebook saved after a real kernel ran it.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import acp_notebook as acpnb
from tests.kernels import notebook_client

FAULT_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "agents" / "fault_agent.py")]
VAR = "ACPNB_PLANTED_API_KEY"
KEY = f"sk-planted-{uuid.uuid4().hex}"
MASKED = f"***{VAR}***"

pytestmark = pytest.mark.timeout(120)


def leaking(fault: str = "normal") -> list[str]:
    return [*FAULT_AGENT, fault, "--leak", VAR]


def assert_clean(where: str, text: Any) -> None:
    dumped = text if isinstance(text, str) else json.dumps(text, default=str)
    assert KEY not in dumped, f"the planted key shows in {where}"


def everything_about(agent: acpnb.Agent, session: acpnb.Session) -> dict[str, Any]:
    """What a user (or a saved view) can see of an agent and its session."""
    turn = session.turns[-1]
    return {
        "agent.log": list(agent.log),
        "agent.command": agent.command,
        "stderr": agent.stderr_tail(200),
        "turn text and thoughts": [turn.text, turn.thoughts],
        "tool calls": [(c.title, c.raw_input, c.raw_output, c.content) for c in turn.tool_calls],
        "turn updates": turn.updates,
        "session title": session.title,
        "inspector": acpnb.ProtocolInspector(agent)._static(),
    }


@pytest.mark.parametrize("via_proxy", [False, True], ids=["client", "proxy"])
@pytest.mark.slow
def test_a_planted_key_is_masked_everywhere(via_proxy: bool, tmp_path: Path) -> None:
    recording = tmp_path / "leak.acp.jsonl"
    env = {VAR: KEY}
    if via_proxy:
        agent = acpnb.start_proxy({"f": leaking()}, env=env, cwd=tmp_path, timeout=30, record=recording)
    else:
        agent = acpnb.start(leaking(), env=env, cwd=tmp_path, timeout=30, record=recording)
    with agent:
        session = agent.new_session()
        turn = session.prompt("go")
        assert MASKED in turn.text
        assert session.title == f"Key {MASKED}"
        with pytest.raises(acpnb.AcpError) as refused:
            session.set("model", "f:m2" if via_proxy else "m2")
        assert MASKED in str(refused.value)
        assert_clean("the error message", str(refused.value))
        assert_clean("the error's data", getattr(refused.value.__cause__, "data", None))
        for where, seen in everything_about(agent, session).items():
            assert_clean(where, seen)
        stderr = "\n".join(agent.stderr_tail(200))
        assert f"using key {MASKED}" in stderr
    assert_clean("the recording", recording.read_text())
    assert MASKED in recording.read_text()


def test_crash_and_start_errors_are_masked(tmp_path: Path) -> None:
    env = {VAR: KEY}
    with acpnb.start(leaking("exit-mid-turn"), env=env, cwd=tmp_path, timeout=30) as agent:
        with pytest.raises(acpnb.AgentExitedError) as crashed:
            agent.new_session().prompt("go")
        assert "simulated crash" in str(crashed.value) and MASKED in str(crashed.value)
        assert_clean("the exit error", [str(crashed.value), crashed.value.stderr_tail])
    with pytest.raises(acpnb.AgentStartError) as failed:
        acpnb.start(leaking("exit-before-initialize"), env=env, cwd=tmp_path, timeout=30)
    assert_clean("the start error", [str(failed.value), failed.value.stderr_tail, failed.value.command])
    with pytest.raises(acpnb.AgentStartError) as missing:
        acpnb.start(["/nonexistent/agent", "--api-key", KEY], env=env, cwd=tmp_path)
    assert_clean("a missing program's error", [str(missing.value), missing.value.command])


def test_secret_named_keys_in_frames_are_masked_in_the_log(tmp_path: Path) -> None:
    """Values under keys such as apiKey or token are masked even when no variable holds them."""
    with acpnb.start([*FAULT_AGENT, "normal"], cwd=tmp_path, timeout=30) as agent:
        agent.on_ext_method("_echo", lambda params: params)
        with pytest.raises(acpnb.RpcError):
            agent.request("_whoami", {"apiKey": "typed-in-by-hand-123", "nested": {"token": "abc-def-ghi"}})
        sent = [e["msg"] for e in list(agent.log) if e["dir"] == "send" and e["msg"].get("method") == "_whoami"]
        assert sent[0]["params"] == {"apiKey": "***", "nested": {"token": "***"}}


nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


@pytest.mark.kernel
def test_a_saved_notebook_never_holds_the_key(tmp_path: Path) -> None:
    command = " ".join(leaking())
    cells = ["%load_ext acp_notebook", f"%acp start -- {command}", "%%acp\ngo", "%acp log",
             "%acp set model=m2", "agent = __import__('acp_notebook').current().agent\nagent.stderr_tail(5)",
             "%acp stop"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "leak.ipynb"
    client = notebook_client(notebook, tmp_path, timeout=120, allow_errors=True)
    client.execute(env={**os.environ, VAR: KEY, "JPY_SESSION_NAME": str(path)})
    nbformat.write(notebook, path)
    saved = path.read_text()
    assert_clean("the saved notebook", saved)
    assert MASKED in saved  # the masked form is there: the outputs did show the leaked places
