"""The notebook's side of the kernel tools, without a Jupyter kernel: the ``kernel`` entry every session is
offered (session/new, load, resume; the demo agent as a subprocess and in memory), the policy (Python API,
magic grammar, AcpMagics trait), the demo agent using the tools over MCP, what a turn records of them and how
its view saves it.

Outside a kernel the tools serve the IPython shell's namespace (or ``__main__``'s without one) and run on this
(main) thread while it waits in a blocking call of ours (``session.prompt``): the tests put their variables there.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from IPython.core.error import UsageError
from traitlets import TraitError

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook.kernel_link import resolve_policy
from acp_notebook.magics import Proxy, Start, parse_line
from acp_notebook.turn import KernelCall, Turn
from acp_notebook.widgets.static import TurnSnapshot, turn_forms
from acp_notebook.widgets.kernel import kernel_call_html, kernel_call_markdown, kernel_call_text
from tests.shells import served_namespace

TIMEOUT = 30.0
BRIDGE = ["-m", "acp_notebook.kernel_tools.bridge"]


def sent(agent: acpnb.Agent, method: str) -> list[dict[str, Any]]:
    return [e["msg"]["params"] for e in agent.log if e["dir"] == "send" and e["msg"].get("method") == method]


def env_of(server: dict[str, Any]) -> dict[str, str]:
    return {pair["name"]: pair["value"] for pair in server["env"]}


@pytest.fixture(params=["subprocess", "memory"])
def start_demo(request, tmp_path):
    """start_demo(**kwargs): the demo agent as a subprocess or served in memory; closed after the test."""
    from acp_notebook.demo.agent import DemoAgent

    started: list[acpnb.Agent] = []

    def start(**kwargs: Any) -> acpnb.Agent:
        kwargs.setdefault("timeout", TIMEOUT)
        kwargs.setdefault("cwd", tmp_path)
        spec: Any = [sys.executable, "-m", "acp_notebook.demo"] if request.param == "subprocess" else DemoAgent()
        agent = acpnb.start(spec, **kwargs)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


@pytest.fixture
def main_ns(monkeypatch):
    """Set variables in the namespace the tools serve; undone afterwards. Returns that namespace."""
    namespace = served_namespace()

    def put(**values: Any) -> dict[str, Any]:
        for name, value in values.items():
            monkeypatch.setitem(namespace, name, value)
        return namespace

    return put


# --- the policy ------------------------------------------------------------------------------
def test_the_policy_defaults_to_off_outside_a_kernel_and_bad_words_name_the_api():
    assert resolve_policy(None) == "off"
    assert resolve_policy(" READ-ONLY ") == "read-only"
    with pytest.raises(ValueError, match=r"acpnb\.start\(kernel_tools='sometimes'\).*'ask', 'read-only'"):
        resolve_policy("sometimes")
    with pytest.raises(ValueError, match="kernel_tools='sometimes'"):
        acpnb.start("demo", kernel_tools="sometimes")


def test_the_magic_grammar_takes_a_policy_per_agent():
    assert parse_line("start demo --kernel-tools read-only") == Start("demo", kernel_tools="read-only")
    assert parse_line("start demo --kernel-tools ALLOW").kernel_tools == "allow"
    assert parse_line("proxy demo=demo --kernel-tools off") == Proxy((("demo", "demo"),), kernel_tools="off")
    with pytest.raises(UsageError, match="--kernel-tools: 'sometimes' is not a policy: use ask, read-only"):
        parse_line("start demo --kernel-tools sometimes")
    with pytest.raises(UsageError, match="--kernel-tools with it"):
        parse_line("start --replay s.acp.jsonl --kernel-tools allow")


@pytest.mark.slow
def test_the_config_trait_checks_its_value_and_running_agents_follow_it(tmp_path, monkeypatch):
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("load_ext", "acp_notebook")
    try:
        magics = ip.magics_manager.registry["AcpMagics"]
        assert magics.kernel_tools == "ask"
        with pytest.raises(TraitError, match="AcpMagics.kernel_tools: 'sometimes' is not a policy"):
            magics.kernel_tools = "sometimes"
        ip.run_line_magic("config", "AcpMagics.kernel_tools = 'Read-Only'")
        assert magics.kernel_tools == "read-only"
        ip.run_line_magic("acp", "start demo")
        ip.run_line_magic("acp", "start demo --name own --kernel-tools allow")
        agents = magics.agents
        assert agents["demo"].agent.kernel_tools == "read-only" and agents["own"].agent.kernel_tools == "allow"
        ip.run_line_magic("config", "AcpMagics.kernel_tools = 'ask'")
        # The agent that follows the setting changes, and so do its open sessions' tools; the other keeps its own.
        assert agents["demo"].agent.kernel_tools == "ask"
        assert agents["demo"].session.kernel_tools.policy == "ask"
        assert agents["own"].agent.kernel_tools == "allow"
        # A %%acp cell that blocks for its turn (no kernel here) runs the tools' work on this thread meanwhile.
        result = ip.run_cell("%%acp own\nrun shared = 5 * 5")
        assert result.error_in_exec is None and ip.user_ns["shared"] == 25
        # The session panel says what the agent may do in the kernel.
        assert "kernel tools: allow (the agent reads your variables and runs code)" in \
            magics.panel(agents["own"].session).snapshot().note
    finally:
        ip.run_line_magic("unload_ext", "acp_notebook")
        ip.config.pop("AcpMagics", None)
        ip.user_ns.pop("shared", None)


# --- the entry on session/new, load and resume -------------------------------------------------
def test_every_session_is_offered_its_own_kernel_server_after_the_users_own(start_demo):
    agent = start_demo(kernel_tools="allow")
    mine = {"name": "files", "command": "files-mcp", "args": [], "env": []}
    first = agent.new_session(mcp_servers=[mine])
    second = agent.new_session()
    (params_first, params_second) = sent(agent, "session/new")
    assert params_first["mcpServers"][0] == mine
    kernel = params_first["mcpServers"][1]
    assert (kernel["name"], kernel["command"], kernel["args"]) == ("kernel", sys.executable, BRIDGE)
    assert set(env_of(kernel)) == {"ACPNB_KERNEL_CHANNEL", "ACPNB_KERNEL_TOKEN"}
    # Each session its own channel; the token never shows in what is written down (log, recordings, inspector).
    assert first.kernel_tools.entry != second.kernel_tools.entry
    channels = {env_of(p["mcpServers"][-1])["ACPNB_KERNEL_CHANNEL"] for p in (params_first, params_second)}
    assert len(channels) == 2
    token = env_of(first.kernel_tools.entry)["ACPNB_KERNEL_TOKEN"]
    assert token not in repr(agent.log) and "***" in env_of(kernel)["ACPNB_KERNEL_TOKEN"]


@pytest.mark.slow
def test_a_users_server_named_kernel_wins_and_off_offers_none(start_demo):
    agent = start_demo(kernel_tools="ask")
    theirs = {"name": "kernel", "command": "their-kernel-mcp", "args": [], "env": []}
    session = agent.new_session(mcp_servers=[theirs])
    assert sent(agent, "session/new")[-1]["mcpServers"] == [theirs] and session.kernel_tools is None
    quiet = start_demo(kernel_tools="off")
    assert quiet.new_session().kernel_tools is None
    assert sent(quiet, "session/new")[-1]["mcpServers"] == []


def test_load_and_resume_offer_a_fresh_channel_and_close_the_old_one(start_demo):
    agent = start_demo(kernel_tools="read-only")
    session = agent.new_session()
    link = session.kernel_tools
    loaded = agent.load_session(session.id)
    assert link.closed and loaded.kernel_tools is not link and not loaded.kernel_tools.closed
    resumed = agent.resume_session(session.id)
    assert loaded.kernel_tools.closed and resumed.kernel_tools.policy == "read-only"
    servers = [p["mcpServers"] for p in sent(agent, "session/load") + sent(agent, "session/resume")]
    assert all(s[0]["name"] == "kernel" for s in servers)
    assert servers[0][0]["env"][0] != servers[1][0]["env"][0]  # different channels
    resumed.close()
    assert resumed.kernel_tools.closed


def test_closing_the_agent_closes_every_channel_and_policy_changes_reach_open_sessions(start_demo):
    agent = start_demo(kernel_tools="ask")
    sessions = [agent.new_session(), agent.new_session()]
    agent.kernel_tools = "read-only"
    assert [s.kernel_tools.policy for s in sessions] == ["read-only", "read-only"]
    with pytest.raises(ValueError, match="agent.kernel_tools"):
        agent.kernel_tools = "maybe"
    agent.kernel_tools = "off"  # every call is refused from now on; the channels stay for when it is switched on
    assert not any(s.kernel_tools.closed for s in sessions)
    assert agent.new_session().kernel_tools is None  # a session opened under off is offered no server
    agent.kernel_tools = "ask"
    assert [s.kernel_tools.policy for s in sessions] == ["ask", "ask"]
    assert agent.new_session().kernel_tools.policy == "ask"
    agent.close()
    assert all(s.kernel_tools.closed for s in sessions)


@pytest.mark.slow
def test_through_the_proxy_the_agent_behind_it_reaches_the_kernel(main_ns, tmp_path):
    main_ns(numbers=[3, 1, 4])
    with acpnb.start_proxy({"demo": "demo"}, kernel_tools="read-only", cwd=tmp_path, timeout=TIMEOUT) as proxy:
        session = proxy.new_session()
        session.set("model", "demo:fast")
        assert "[3, 1, 4]" in session.prompt("what is in numbers?", timeout=TIMEOUT).text
        resumed = proxy.resume_session(session.id)
        assert resumed.kernel_tools is not session.kernel_tools and session.kernel_tools.closed
        assert "[3, 1, 4]" in resumed.prompt("what is in numbers?", timeout=TIMEOUT).text


# --- the demo agent uses the tools over MCP --------------------------------------------------------
@pytest.mark.slow
def test_the_demo_answers_with_the_real_columns_of_a_dataframe(start_demo, main_ns):
    pd = pytest.importorskip("pandas")
    main_ns(df=pd.DataFrame({"height_cm": [170, 182], "city": ["Oslo", "Lima"]}))
    session = start_demo(kernel_tools="read-only").new_session()
    turn = session.prompt("what is in df?", timeout=TIMEOUT)
    assert "height_cm" in turn.text and "city" in turn.text
    assert [c.title for c in turn.tool_calls] == ["kernel: list_variables", "kernel: inspect_variable"]
    assert all(c.status == "completed" for c in turn.tool_calls)
    assert [(c.tool, c.arguments) for c in turn.kernel_calls] == [("list_variables", {}),
                                                                  ("inspect_variable", {"name": "df"})]


@pytest.mark.slow
def test_run_code_runs_under_allow_and_is_refused_under_read_only(start_demo, main_ns):
    main = main_ns(x=None)
    allowed = start_demo(kernel_tools="allow").new_session()
    turn = allowed.prompt("run x = 41 + 1", timeout=TIMEOUT)
    assert main["x"] == 42 and "I ran it in your kernel" in turn.text
    (call,) = turn.kernel_calls
    assert (call.tool, call.code, call.status) == ("run_code", "x = 41 + 1", "done")

    refused = start_demo(kernel_tools="read-only").new_session()
    turn = refused.prompt("run x = 0", timeout=TIMEOUT)
    assert main["x"] == 42
    assert "did not run" in turn.text and "read-only" in turn.text
    assert turn.tool_calls[0].status == "failed"
    assert [(c.tool, c.status) for c in turn.kernel_calls] == [("run_code", "refused")]


@pytest.mark.slow
def test_a_failed_call_shows_failed_with_its_error_once(start_demo, main_ns):
    main_ns(numbers=[3, 1, 4])
    session = start_demo(kernel_tools="allow").new_session()
    turn = session.prompt("what is in nosuch?", timeout=TIMEOUT)
    assert [(c.tool, c.status) for c in turn.kernel_calls] == [("list_variables", "done"),
                                                               ("inspect_variable", "failed")]
    assert turn.kernel_calls[1].error.startswith("No variable named 'nosuch'")
    assert turn.kernel_calls[0].error == ""

    for prompt, error in (("run exit()", "refused: run_code never ends the kernel"),
                          ("run print('before'); 1 / 0", "ZeroDivisionError: division by zero")):
        turn = session.prompt(prompt, timeout=TIMEOUT)
        said = "The code ran and raised an error" if "Zero" in error else "The code did not run: refused"
        assert said in turn.text, turn.text
        (call,) = turn.kernel_calls
        assert call.status == "failed" and error in call.error, call
        shown = kernel_call_text(call)
        assert shown.count(error) == 1, shown  # the error once, not also among the outputs
    assert call.outputs == [{"type": "text", "text": "before\n"}] and "Traceback" in call.error


@pytest.mark.slow
def test_ask_is_answered_by_the_permission_policy_and_says_so(start_demo, main_ns):
    main = main_ns(z=None)
    asking = start_demo(kernel_tools="ask", permission="allow").new_session()
    turn = asking.prompt("compute z = 6 * 7", timeout=TIMEOUT)
    assert main["z"] == 42
    (call,) = turn.kernel_calls
    assert (call.status, call.decision) == ("done", "allowed")

    denying = start_demo(kernel_tools="ask").new_session()  # the Python API's permission policy is "deny"
    turn = denying.prompt("run z = 0", timeout=TIMEOUT)
    assert main["z"] == 42 and "rejected" in turn.text
    assert [(c.status, c.decision) for c in turn.kernel_calls] == [("refused", "rejected")]


def test_ask_with_no_turn_running_refuses_and_records_why(start_demo):
    from acp_notebook.kernel_tools import RunRequest

    session = start_demo(kernel_tools="ask", permission="allow").new_session()
    link = session.kernel_tools
    why = _loop.run_sync(link._ask(RunRequest("print(1)")), TIMEOUT)
    assert isinstance(why, str) and "no turn is running" in why
    (call,) = link.calls
    assert call.status == "refused" and "no turn is running" in call.decision
    # The agent is told why, not that a person rejected the code.
    answer = _loop.run_sync(link.tools.call("run_code", {"code": "print(2)"}), TIMEOUT)
    said = answer.content[0]["text"]
    assert answer.is_error and said.startswith("refused: no turn is running") and "rejected" not in said


@pytest.mark.slow
def test_plot_proposes_a_cell_and_a_session_without_the_server_is_told_so(start_demo, main_ns):
    main_ns(df=[1, 2, 3])
    session = start_demo(kernel_tools="read-only").new_session()
    turn = session.prompt("plot df", timeout=TIMEOUT)
    looked, call = turn.kernel_calls  # it looks at df first (tests/test_kernel_tools_sent.py: a frame's chart)
    assert (looked.tool, looked.arguments) == ("inspect_variable", {"name": "df"})
    assert (call.tool, call.code, call.status) == ("propose_cell", "df.plot()", "proposed")
    assert "it has not run" in turn.text
    bare = start_demo(kernel_tools="off").new_session()
    assert "no `kernel` MCP server" in bare.prompt("what is in df?", timeout=TIMEOUT).text


# --- what a turn's view saves -------------------------------------------------------------------
def test_the_saved_forms_show_the_code_its_outputs_and_the_answer():
    from acp_notebook.widgets._html import HeaderInfo

    ran = KernelCall(id="kernel-1", tool="run_code", code="x = 41 + 1\nx", status="done", decision="allowed",
                     outputs=[{"type": "text", "text": "42"}, {"type": "image", "data": "iVBORw0KGgo=",
                                                                  "mimeType": "image/png"}])
    proposed = KernelCall(id="kernel-2", tool="propose_cell", code="df.plot()", explanation="Plot it.",
                          status="proposed")
    turn = Turn("run it", "s1")
    turn.record_kernel(ran)
    turn.record_kernel(ran)  # a change of a call already seen: still one call
    assert turn.kernel_calls == [ran]
    kernel = [(kernel_call_text(c), kernel_call_markdown(c, below=False), kernel_call_html(c)) for c in (ran, proposed)]
    header = HeaderInfo(title="t", agent="demo", model="", status="done", extra="")
    forms = turn_forms(TurnSnapshot(header=header, kernel=kernel))
    html, markdown, plain = forms["text/html"], forms["text/markdown"], forms["text/plain"]
    assert "acpnb-kernel-call" in html and 'src="data:image/png;base64,iVBORw0KGgo="' in html
    assert "decision: asked and allowed" in html and "42" in html and "not run" in html
    assert "```python\nx = 41 + 1\nx\n```" in markdown and "Copy it into a cell" in markdown
    assert "Ran code in your kernel [kernel, done]" in plain and "    df.plot()" in plain
    assert "[an image, image/png]" in plain


# --- CellAgent's helpers -----------------------------------------------------------------------
def test_a_cell_agent_calls_the_kernel_tools_over_mcp(main_ns, tmp_path):
    from acp_notebook.cellagent import CellAgent, KernelToolError

    class Looker(CellAgent):
        def prompt(self, text):
            if text == "look":
                return self.inspect_variable("numbers")
            try:
                return self.run_code(text)
            except KernelToolError as refused:
                return f"refused: {refused}"

    namespace = main_ns(numbers=[3, 1, 4], w=None)
    with acpnb.start(Looker(), kernel_tools="allow", cwd=tmp_path, timeout=TIMEOUT) as agent:
        session = agent.new_session()
        assert "[3, 1, 4]" in session.prompt("look", timeout=TIMEOUT).text
        session.prompt("w = sum(numbers)", timeout=TIMEOUT)
        assert namespace["w"] == 8
        agent.kernel_tools = "read-only"
        assert "read-only" in session.prompt("w = 0", timeout=TIMEOUT).text and namespace["w"] == 8
    with acpnb.start(Looker(), kernel_tools="off", cwd=tmp_path, timeout=TIMEOUT) as bare:
        with pytest.raises(acpnb.RpcError, match="no `kernel` MCP server"):
            bare.new_session().prompt("look", timeout=TIMEOUT)


def test_the_question_shows_the_code_it_asks_about_and_is_saved_with_it(monkeypatch):
    import comm
    from comm.base_comm import BaseComm

    from acp_notebook._permission import KernelApproval
    from acp_notebook.kernel_link import RUN_OPTIONS
    from acp_notebook.widgets.permission import KernelApprovalPrompt

    class QuietComm(BaseComm):
        def publish_msg(self, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: QuietComm(**kwargs))
    code = "import os\nos.remove('data.csv')"
    call = KernelCall(id="k9", tool="run_code", arguments={"code": code}, code=code, status="asking")
    prompt = KernelApprovalPrompt(KernelApproval(None, None, call, code, list(RUN_OPTIONS)))  # type: ignore[arg-type]
    assert [b.description for b in prompt.buttons] == ["Allow", "Reject"]
    waiting = prompt.static_html()
    assert "acpnb-kernel-code" in waiting and "data.csv" in waiting and "Waiting for an answer: Allow | Reject" in waiting
    prompt.choose("reject")
    assert "You chose: Reject." in prompt.static_html() and "data.csv" in prompt.static_html()


def test_the_first_proposal_goes_below_a_waiting_cell_and_the_others_say_copy(monkeypatch, tmp_path):
    import comm
    from comm.base_comm import BaseComm

    from acp_notebook.widgets.chat import TurnView

    class QuietComm(BaseComm):
        def publish_msg(self, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: QuietComm(**kwargs))
    placed: list[str] = []
    with acpnb.start("demo", cwd=tmp_path, kernel_tools="off") as agent:
        session = agent.new_session()
        turns = [Turn("plot", session.id, session=session) for _ in range(2)]
        waiting, returned = (TurnView(turn, place_cell=placed.append) for turn in turns)
        waiting.cell_waiting = True  # as cells.py sets it while the %%acp cell waits for its turn
        calls = [KernelCall(id=f"k{i}", tool="propose_cell", code=f"df.plot({i})", status="proposed") for i in range(3)]

        async def propose() -> None:
            for call in calls[:2]:
                turns[0].record_kernel(call)
            turns[1].record_kernel(calls[2])

        _loop.run_sync(propose(), TIMEOUT)
        assert placed == ["df.plot(0)"]  # JupyterLab makes one cell of an execute reply: the first proposal
        plain = turn_forms(waiting.snapshot())["text/plain"]
        assert plain.count("Proposed as a new cell below this one") == 1 and "Copy it into a cell" in plain
        assert "Copy it into a cell" in turn_forms(returned.snapshot())["text/plain"]  # its cell no longer runs

        async def finish() -> None:
            for turn in turns:
                turn.finish({"stopReason": "end_turn"}, None)

        _loop.run_sync(finish(), TIMEOUT)
        assert waiting.finished.result(TIMEOUT) is turns[0] and returned.finished.result(TIMEOUT) is turns[1]
