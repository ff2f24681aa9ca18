"""Real agents in the notebook's kernel: claude-agent-acp and opencode, driven by the scripted model
through the MCP server named `kernel` that every session is offered.

The model (model_server.py, `kernel CODE`) calls list_variables, then run_code; under the "ask" policy
run_code waits for the user's Allow, given here by the permission policy as a click would; the code runs
in the namespace the tools serve (outside a kernel: the IPython shell's, or `__main__`'s), and the answer
reaches the turn. Claude names the tools `mcp__kernel__<tool>` and asks permission for each MCP call
itself; opencode names them `kernel_<tool>` and asks for none. Kernel objects attached to a prompt
(`attach=`) reach each agent's model: the table as text, the figure as an image.
"""

from __future__ import annotations

from typing import Any

import pytest
from interop_support import (
    KERNEL_ANSWER,
    KERNEL_CODE,
    KERNEL_PROMPT,
    RUN_TITLE,
    TURN_TIMEOUT,
    allow_everything,
    bridge_env,
    kernel_frame,
    served_namespace,
)

pytest.importorskip("pandas")
pytestmark = pytest.mark.interop


@pytest.mark.parametrize("name, prefix", [("claude", "mcp__kernel__"), ("opencode", "kernel_")])
def test_the_model_lists_variables_then_runs_code_after_allow(interop, model_server, monkeypatch, name, prefix):
    namespace = served_namespace()
    monkeypatch.setitem(namespace, "df", kernel_frame())
    monkeypatch.setitem(namespace, "total", None)
    asked: list[dict[str, Any]] = []
    agent = interop.start(name, model_server, env=bridge_env(), kernel_tools="ask", permission=allow_everything(asked))
    session = agent.new_session()
    (new,) = [e["msg"] for e in agent.log if e["dir"] == "send" and e["msg"].get("method") == "session/new"]
    (entry,) = new["params"]["mcpServers"]
    assert entry["name"] == "kernel" and entry["args"] == ["-m", "acp_notebook.kernel_tools.bridge"]
    assert {e["name"]: e["value"] for e in entry["env"]}["ACPNB_KERNEL_TOKEN"].startswith("***")  # masked in the log

    turn = session.prompt(KERNEL_PROMPT, timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn" and turn.text.endswith(KERNEL_ANSWER), turn.text
    assert namespace["total"] == 1491  # run_code ran in the user's namespace
    assert [c.title for c in turn.tool_calls] == [f"{prefix}list_variables", f"{prefix}run_code"]
    assert all(c.status == "completed" for c in turn.tool_calls)
    assert [(c.tool, c.status, c.decision) for c in turn.kernel_calls] == [
        ("list_variables", "done", ""), ("run_code", "done", "allowed")]
    (question,) = [t for t in asked if t.get("title") == RUN_TITLE]
    assert question["rawInput"] == {"code": KERNEL_CODE}
    # Claude asks before each MCP call as well (its default mode); opencode's config asks for edits and bash only.
    agent_questions = [t["title"] for t in asked if t.get("title") != RUN_TITLE]
    assert agent_questions == ([f"{prefix}list_variables", f"{prefix}run_code"] if name == "claude" else [])
    # The model saw the kernel's listing (df, a DataFrame 3 x 2) when it decided to run the code.
    api = "anthropic" if name == "claude" else "openai-chat"
    decided = model_server.wait_for(lambda r: any(c["name"] == f"{prefix}run_code"
                                                  for c in (r.reply or {}).get("tool_calls") or []), timeout=5)
    (listing,) = model_server.parse(api, decided.path, decided.body).tool_results
    assert "df" in listing and "DataFrame" in listing, listing


@pytest.mark.parametrize("name", ["claude", "opencode"])
def test_attachments_reach_the_model_as_a_table_and_an_image(interop, model_server, name):
    """Both agents advertise images and embedded context: a DataFrame goes as a resource, a figure as an image
    block, and each agent hands both to its model (claude-agent-acp wraps the resource in <context ref=...>)."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(2, 1.5), dpi=50)
    axes.bar(["Oslo", "Lima", "Pune"], [763, 6, 722])
    agent = interop.start(name, model_server)
    assert agent.capabilities["promptCapabilities"] == {"image": True, "embeddedContext": True}
    session = agent.new_session()
    turn = session.prompt("say hi", attach={"df": kernel_frame(), "fig": figure}, timeout=TURN_TIMEOUT)
    plt.close(figure)
    assert turn.stop_reason == "end_turn" and [(a.kind, a.sent) for a in turn.attachments] == [
        ("table", True), ("image", True)]
    request = model_server.wait_for(lambda r: "city,rain_mm" in json.dumps(r.body), timeout=10)
    sent = json.dumps(request.body)
    assert json.dumps("city,rain_mm\nOslo,763\nLima,6\nPune,722\n")[1:-1] in sent  # the CSV, as JSON text
    assert "iVBORw0KGgo" in sent  # a base64 PNG: the figure
