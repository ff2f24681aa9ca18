"""The kernel tools' policy changed while sessions run (issue 35, point 2): under "off" every tool answers that the
user turned them off and the connection stays; switched back on, the same session's tools work again; the session
panel's line follows each change at once; a session opened without the server says how to get one.

Through the real client and the demo agent (in memory and as a subprocess: its MCP client keeps one bridge per
command, over the real channel), and through the magics' ``%config AcpMagics.kernel_tools`` in an IPython shell.
"""

from __future__ import annotations

import html
import sys
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook.kernel_tools.policy import OFF_REFUSAL, READ_ONLY_REFUSAL
from acp_notebook.widgets.kernel import NO_SERVER_NOTE, POLICY_NOTES
from acp_notebook.widgets.panel import SessionPanel
from tests.shells import served_namespace

TIMEOUT = 30.0


def line(panel: SessionPanel) -> str:
    """The note the live panel shows now (its widget, not a snapshot made on demand)."""
    return html.unescape(panel.note.value)


@pytest.fixture(params=["memory", "subprocess"])
def demo(request, tmp_path):
    from acp_notebook.demo.agent import DemoAgent

    spec: Any = DemoAgent() if request.param == "memory" else [sys.executable, "-m", "acp_notebook.demo"]
    agent = acpnb.start(spec, kernel_tools="allow", timeout=TIMEOUT, cwd=tmp_path)
    yield agent
    agent.close()


@pytest.fixture
def namespace(monkeypatch):
    ns = served_namespace()
    monkeypatch.setitem(ns, "live_total", 41)
    return ns


@pytest.mark.slow
def test_off_refuses_every_tool_and_on_again_works_in_the_same_session(demo, namespace):
    session = demo.new_session()
    link = session.kernel_tools
    panel = SessionPanel(session)
    assert POLICY_NOTES["allow"] in line(panel)

    demo.kernel_tools = "off"
    assert POLICY_NOTES["off"] in line(panel)  # the line follows at once
    turn = session.prompt("what is in live_total?", timeout=TIMEOUT)
    assert OFF_REFUSAL in turn.text, turn.text
    assert [(c.tool, c.status, c.error) for c in turn.kernel_calls] == [
        ("list_variables", "refused", OFF_REFUSAL), ("inspect_variable", "refused", OFF_REFUSAL)]
    turn = session.prompt("run live_total = 0", timeout=TIMEOUT)
    assert namespace["live_total"] == 41 and OFF_REFUSAL in turn.text
    assert not link.closed and session.kernel_tools is link  # the connection stayed

    demo.kernel_tools = "read-only"
    assert POLICY_NOTES["read-only"] in line(panel)
    turn = session.prompt("run live_total = 1", timeout=TIMEOUT)
    assert namespace["live_total"] == 41 and READ_ONLY_REFUSAL in turn.text
    assert "41" in session.prompt("what is in live_total?", timeout=TIMEOUT).text

    demo.kernel_tools = "allow"
    assert POLICY_NOTES["allow"] in line(panel)
    turn = session.prompt("run live_total = 42", timeout=TIMEOUT)
    assert namespace["live_total"] == 42 and "I ran it in your kernel" in turn.text
    panel.close()


def test_a_session_opened_under_off_says_how_to_get_tools(demo):
    demo.kernel_tools = "off"
    bare = demo.new_session()
    panel = SessionPanel(bare)
    assert bare.kernel_tools is None and "kernel tools: off" in line(panel)
    demo.kernel_tools = "ask"
    panel.kernel_tools_changed()  # the magics call it on every %config change
    assert NO_SERVER_NOTE in line(panel) and "%acp new" in NO_SERVER_NOTE
    assert "no `kernel` MCP server" in bare.prompt("list variables", timeout=TIMEOUT).text
    assert demo.new_session().kernel_tools.policy == "ask"
    panel.close()


@pytest.mark.slow
def test_percent_config_moves_every_panel_line_at_once(tmp_path, monkeypatch):
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("load_ext", "acp_notebook")
    try:
        magics = ip.magics_manager.registry["AcpMagics"]
        ip.run_line_magic("config", "AcpMagics.kernel_tools = 'off'")
        ip.run_line_magic("acp", "start demo")
        entry = magics.agents["demo"]
        bare = magics.panel(entry.session)
        assert entry.session.kernel_tools is None and "kernel tools: off" in line(bare)
        ip.run_line_magic("config", "AcpMagics.kernel_tools = 'ask'")
        assert NO_SERVER_NOTE in line(bare)
        ip.run_line_magic("acp", "new")
        served = magics.panel(entry.session)
        assert POLICY_NOTES["ask"] in line(served)
        for policy in ("read-only", "off", "allow"):
            ip.run_line_magic("config", f"AcpMagics.kernel_tools = '{policy}'")
            assert POLICY_NOTES[policy] in line(served), policy
    finally:
        ip.run_line_magic("unload_ext", "acp_notebook")
        ip.config.pop("AcpMagics", None)


# --- the messages of issue 35, point 7 ---------------------------------------------------------------
def test_settings_are_refused_in_our_words_with_the_closest_choice_and_other_spellings_are_named(capsys):
    from traitlets import TraitError

    from acp_notebook.magics.magic import AcpMagics

    magics = AcpMagics(shell=None)
    with pytest.raises(TraitError, match=r"^AcpMagics.permission: 'alow' is not one of 'ask', 'allow', 'deny'; "
                                         r"did you mean 'allow'\? \(e.g. %config AcpMagics.permission = 'allow'\)$"):
        magics.permission = "alow"
    with pytest.raises(TraitError, match=r"AcpMagics.elicitation: 'declin' is not one of .* or a dict of answers; "
                                         r"did you mean 'decline'\?"):
        magics.elicitation = "declin"
    with pytest.raises(TraitError, match=r"'readonlyy' is not a policy; .*did you mean 'read-only'\?"):
        magics.kernel_tools = "readonlyy"
    magics.kernel_tools = "readonly"
    assert magics.kernel_tools == "read-only"
    assert "AcpMagics.kernel_tools: 'readonly' taken as 'read-only'" in capsys.readouterr().out
    magics.kernel_tools = "Read-Only"  # the word itself in another case: taken without a note
    assert capsys.readouterr().out == ""


def test_a_misspelt_option_suggests_the_one_whose_choices_hold_the_value(tmp_path):
    from acp_notebook.demo.agent import DemoAgent
    from acp_notebook.errors import ConfigOptionError

    with acpnb.start(DemoAgent(), timeout=TIMEOUT, cwd=tmp_path, kernel_tools="off") as agent:
        session = agent.new_session()
        with pytest.raises(ConfigOptionError) as refused:
            session.set("modle", "smart")  # 'mode' is as close a name; 'smart' is a model
        assert "Did you mean 'model'?" in str(refused.value.hint_for("python") or refused.value)
        with pytest.raises(ConfigOptionError) as refused:
            session.set("mdoe", "ask")
        assert "Did you mean 'mode'?" in str(refused.value.hint_for("python") or refused.value)
