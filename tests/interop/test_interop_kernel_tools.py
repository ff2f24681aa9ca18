"""Real agents in the notebook's kernel: claude-agent-acp, opencode, codex-acp and gemini-cli, driven by the
scripted model through the MCP server named `kernel` that every session is offered.

The model (model_server.py, `kernel CODE`) calls list_variables, then run_code; under the "ask" policy
run_code waits for the user's Allow, given here by the permission policy as a click would; the code runs
in the namespace the tools serve (outside a kernel: the IPython shell's, or `__main__`'s), and the answer
reaches the turn. What differs per agent (FINDINGS.md, "The kernel tools per agent") is in KERNEL_FACTS:
the names its model sees, the titles its client sees, whether it asks before each MCP call itself, and
what its model receives for run_code (checked in the recorded model request). gemini-cli starts MCP
servers only in a folder it trusts (GEMINI_CLI_TRUST_WORKSPACE=true here); in any other it starts none.
Kernel objects attached to a prompt (`attach=`) reach each agent's model: the table as text, the figure
as an image.

Each agent is started once for the module, with the kernel tools under "ask" (opencode's start alone costs
about 5 core-seconds); a test opens sessions of its own, sets their permission and kernel-tools policies, and
checks what arrived after it began. gemini in a folder it does not trust has a test and agents of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import acp_notebook as acpnb
from conftest import marked_processes
from interop_support import (
    KERNEL_ANSWER,
    KERNEL_CODE,
    KERNEL_PROMPT,
    TURN_TIMEOUT,
    allow_everything,
    bridge_env,
    kernel_frame,
    served_namespace,
)

pytest.importorskip("pandas")
pytestmark = pytest.mark.interop

GEMINI_TRUST = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
BRIDGE = "acp_notebook.kernel_tools.bridge"


@dataclass(frozen=True)
class KernelFacts:
    """How one agent shows the kernel tools, measured (FINDINGS.md)."""

    api: str  # the model API it speaks to the model server
    model_names: tuple[str, str]  # list_variables and run_code as its model is offered them
    titles: tuple[str, str]  # the titles of its two tool calls, as the turn ends
    agent_asks: bool  # whether it asks its own permission before each MCP call
    received: str  # a pattern of what its model receives as run_code's answer
    env: dict[str, str] = field(default_factory=dict)


# What each model receives for run_code printing 1491: the structured content as JSON (claude, codex after
# its "Wall time ... Output:" header), or the text (opencode; gemini wraps it in <untrusted_context>).
STRUCTURED = re.escape('{"output":"1491\\n","error":null}')
KERNEL_FACTS = {
    "claude": KernelFacts("anthropic", ("mcp__kernel__list_variables", "mcp__kernel__run_code"),
                          ("mcp__kernel__list_variables", "mcp__kernel__run_code"), True, STRUCTURED),
    "opencode": KernelFacts("openai-chat", ("kernel_list_variables", "kernel_run_code"),
                            ("kernel_list_variables", "kernel_run_code"), False, re.escape("1491\n")),
    # Codex's tool_call says "Tool: kernel/run_code"; its permission request then retitles it.
    "codex": KernelFacts("openai-responses", ("mcp__kernel__list_variables", "mcp__kernel__run_code"),
                         ("mcp.kernel.list_variables", "mcp.kernel.run_code"), True,
                         r"Wall time: \d+\.\d+ seconds\nOutput:\n" + STRUCTURED),
    "gemini": KernelFacts("gemini", ("mcp_kernel_list_variables", "mcp_kernel_run_code"),
                          ("list_variables (kernel MCP Server)", "run_code (kernel MCP Server)"), True,
                          re.escape(json.dumps({"output": "<untrusted_context>\n1491\n\n</untrusted_context>"})),
                          env=GEMINI_TRUST),
}


# codex-acp 2.6.0 starts its MCP servers while the first turn may already be asking the model: in about half
# the runs here the first model request carried no kernel tools ("No kernel tools were offered."), and the
# tool calls' titles came as `mcp.kernel.<tool>` or not at all (FINDINGS section 12).
CODEX_MCP_RACE = pytest.mark.xfail(reason="codex-acp 2.6.0: MCP tools not always offered on the first turn",
                                   strict=False)
KERNEL_AGENTS = [pytest.param(n, marks=CODEX_MCP_RACE) if n == "codex" else n for n in KERNEL_FACTS]


def bridges(marker: str) -> list[int]:
    """The kernel tools' bridges running among this test's processes (those that carry its marker)."""
    found = []
    for pid in marked_processes(marker):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if BRIDGE.encode() in command:
            found.append(pid)
    return found


def last_model_request(model_server, facts: KernelFacts, name: str, since: int) -> Any:
    """The parsed model request that carries the answer to the named tool's call, once it has arrived (the
    first from request `since` on)."""
    record = model_server.wait_for(lambda r: isinstance(r.body, dict) and bool(r.body.get("tools")) and name
                                   in model_server.parse(facts.api, r.path, r.body).called_tools[-1:]
                                   and model_server.parse(facts.api, r.path, r.body).tool_results, timeout=10,
                                   since=since)
    return model_server.parse(facts.api, record.path, record.body)


@pytest.fixture(scope="module")
def kernel_agent(module_interop, module_model_server) -> Callable[[str], acpnb.Agent]:
    """The agent of a name, started on first use and shared by the module's tests: the kernel's bridge
    importable, gemini trusting its folders, the kernel tools under "ask"."""
    started: dict[str, acpnb.Agent] = {}

    def agent_named(name: str) -> acpnb.Agent:
        if name not in started:
            started[name] = module_interop.start(name, module_model_server,
                                                 env={**bridge_env(), **KERNEL_FACTS[name].env}, kernel_tools="ask")
        return started[name]

    return agent_named


def open_session(agent: acpnb.Agent, permission: Any) -> acpnb.Session:
    """A new session in a mode where the agent asks the client before each MCP call: claude's "default" (in
    its own default, "auto", a classifier model judges each call, which the scripted model cannot) and codex's
    "read-only" (in its "agent" a reviewer model approves them)."""
    session = agent.new_session(permission=permission)
    mode = {"claude": "default", "codex": "read-only"}.get(agent.name)
    if mode is not None:
        session.set("mode", mode)
    return session


@pytest.mark.parametrize("name", KERNEL_AGENTS)
def test_the_model_lists_variables_then_runs_code_after_allow(kernel_agent, module_model_server, monkeypatch, name):
    facts, model_server = KERNEL_FACTS[name], module_model_server
    namespace = served_namespace()
    monkeypatch.setitem(namespace, "df", kernel_frame())
    monkeypatch.setitem(namespace, "total", None)
    asked: list[Any] = []
    agent = kernel_agent(name)
    since, requests_since = len(agent.log), len(model_server.requests)
    session = open_session(agent, allow_everything(asked))
    assert session.kernel_tools.policy == "ask"
    (new,) = [e["msg"] for e in agent.log[since:] if e["dir"] == "send" and e["msg"].get("method") == "session/new"]
    (entry,) = new["params"]["mcpServers"]
    assert entry["name"] == "kernel" and entry["args"] == ["-m", BRIDGE]
    assert {e["name"]: e["value"] for e in entry["env"]}["ACPNB_KERNEL_TOKEN"].startswith("***")  # masked in the log

    turn = session.prompt(KERNEL_PROMPT, timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn" and turn.text.endswith(KERNEL_ANSWER), turn.text
    assert namespace["total"] == 1491  # run_code ran in the user's namespace
    assert [c.title for c in turn.tool_calls] == list(facts.titles)
    assert all(c.status == "completed" for c in turn.tool_calls)
    assert [(c.tool, c.status, c.decision) for c in turn.kernel_calls] == [
        ("list_variables", "done", ""), ("run_code", "done", "allowed")]
    (question,) = [r for r in asked if isinstance(r, acpnb.KernelApproval)]
    assert question.code == KERNEL_CODE and question.call is turn.kernel_calls[1]
    # The agent's own question before each MCP call comes first (the kernel's Allow follows it).
    agent_questions = [r.tool_call.get("title") for r in asked if isinstance(r, acpnb.PermissionRequest)]
    assert agent_questions == (list(facts.titles) if facts.agent_asks else [])

    list_name, run_name = facts.model_names
    listed = last_model_request(model_server, facts, list_name, requests_since)
    assert set(facts.model_names) <= set(listed.tools)
    assert "df" in listed.tool_results[-1] and "DataFrame" in listed.tool_results[-1], listed.tool_results
    ran = last_model_request(model_server, facts, run_name, requests_since)
    assert re.fullmatch(facts.received, ran.tool_results[-1]), ran.tool_results[-1]


def test_gemini_in_a_folder_it_does_not_trust_starts_no_kernel_server(interop, model_server):
    """Without GEMINI_CLI_TRUST_WORKSPACE (every fresh folder), gemini-cli takes the `kernel` entry and starts
    nothing: no bridge runs, its model is offered no kernel tools, and nothing says so on the wire."""
    agent = interop.start("gemini", model_server, env=bridge_env(), kernel_tools="ask", permission="allow")
    session = agent.new_session()
    turn = session.prompt(KERNEL_PROMPT, timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn" and turn.text == "No kernel tools were offered.", turn.text
    assert turn.kernel_calls == [] and turn.tool_calls == []
    request = model_server.wait_for(lambda r: isinstance(r.body, dict) and bool(r.body.get("tools")), timeout=5)
    offered = model_server.parse("gemini", request.path, request.body).tools
    assert "write_file" in offered and not [tool for tool in offered if "kernel" in tool]
    assert bridges(interop.marker) == []
    # The same agent in a folder it trusts runs the bridge for the same entry (so the check above can see one).
    trusting = interop.start("gemini", model_server, env={**bridge_env(), **GEMINI_TRUST}, kernel_tools="ask",
                             permission="allow")
    trusting.new_session().prompt("say hi", timeout=TURN_TIMEOUT)
    assert len(bridges(interop.marker)) == 1


FIGURE_CODE = ("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; print(7); "
               "figure = plt.figure(figsize=(1, 1), dpi=20); lines = plt.plot([1, 2])")


@pytest.mark.parametrize("name", KERNEL_AGENTS)
def test_a_figure_run_code_makes_reaches_each_model_as_an_image(kernel_agent, module_model_server, monkeypatch,
                                                                name):
    """An answer with an image carries no structured content: Claude and Codex would show their model that
    instead and drop the image. Every agent hands its model the PNG, with the printed 7 beside it."""
    pytest.importorskip("matplotlib")
    facts, model_server = KERNEL_FACTS[name], module_model_server
    monkeypatch.setitem(served_namespace(), "df", kernel_frame())
    requests_since = len(model_server.requests)
    session = open_session(kernel_agent(name), "allow")
    session.kernel_tools.policy = "allow"
    turn = session.prompt(f"kernel {FIGURE_CODE}", timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn" and [c.tool for c in turn.kernel_calls] == ["list_variables", "run_code"]
    (ran,) = [c for c in turn.kernel_calls if c.tool == "run_code"]
    assert ran.status == "done", ran
    # opencode hands the image over in a user message of its own after the tool's text ("Attached media from
    # tool result:"); the others in the tool's answer.
    run_name = facts.model_names[1]
    request = model_server.wait_for(lambda r: isinstance(r.body, dict) and bool(r.body.get("tools")) and run_name
                                    in model_server.parse(facts.api, r.path, r.body).called_tools[-1:], timeout=10,
                                    since=requests_since)
    sent = json.dumps(request.body)
    answer = sent[sent.rindex("figure = plt.figure"):]  # after the model's call of run_code
    assert "iVBORw0KGgo" in answer and "7\\n" in answer, answer[:500]


@pytest.mark.parametrize("name", ["claude", "opencode"])
def test_attachments_reach_the_model_as_a_table_and_an_image(kernel_agent, module_model_server, name):
    """Both agents advertise images and embedded context: a DataFrame goes as a resource, a figure as an image
    block, and each agent hands both to its model (claude-agent-acp wraps the resource in <context ref=...>)."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(2, 1.5), dpi=50)
    axes.bar(["Oslo", "Lima", "Pune"], [763, 6, 722])
    agent, model_server = kernel_agent(name), module_model_server
    assert agent.capabilities["promptCapabilities"] == {"image": True, "embeddedContext": True}
    requests_since = len(model_server.requests)
    session = agent.new_session()
    turn = session.prompt("say hi", attach={"df": kernel_frame(), "fig": figure}, timeout=TURN_TIMEOUT)
    plt.close(figure)
    assert turn.stop_reason == "end_turn" and [(a.kind, a.sent) for a in turn.attachments] == [
        ("table", True), ("image", True)]
    request = model_server.wait_for(lambda r: "city,rain_mm" in json.dumps(r.body), timeout=10, since=requests_since)
    sent = json.dumps(request.body)
    assert json.dumps("city,rain_mm\nOslo,763\nLima,6\nPune,722\n")[1:-1] in sent  # the CSV, as JSON text
    assert "iVBORw0KGgo" in sent  # a base64 PNG: the figure
