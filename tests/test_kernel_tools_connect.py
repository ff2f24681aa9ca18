"""An agent offered the `kernel` MCP server that never connects to it is told to the user once (issue 40, point 2):
a warning notice on the first turn that could have used the tools and in the session panel, with the agent's own
remedy where the registry knows one (Gemini CLI: trust the folder, or `%acp start gemini --trust-workspace`).

The agents are real subprocesses speaking ACP over pipes (tests/agents/mcp_agent.py): one takes the entry and
never starts it, one starts the bridge and begins MCP as the session opens, one does so only when
GEMINI_CLI_TRUST_WORKSPACE=true (gemini-cli's rule, measured in tests/interop/FINDINGS.md section 10) and answers
initialize as the recorded gemini-cli 0.61.0 did. The views are the real TurnView and SessionPanel over the
recording comm of tests/test_widgets.py.
"""

from __future__ import annotations

import socket
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook.kernel_tools.connect import NOTICE_META
from acp_notebook.launch import AgentSpec, registry, trust_workspace_env
from acp_notebook.magics.grammar import parse_line
from acp_notebook.widgets.chat import TurnView
from acp_notebook.widgets.panel import SessionPanel
from acp_notebook.widgets.static import turn_forms
from tests.shells import run_captured, shell  # noqa: F401 - fixtures
from tests.test_widgets import TIMEOUT, comms, frontend_shows  # noqa: F401 - fixtures

AGENT = Path(__file__).resolve().parent / "agents" / "mcp_agent.py"
GEMINI_RECORDING = Path(__file__).resolve().parents[1] / "notebooks" / "recordings" / "kernel-tools" / \
    "gemini.acp.jsonl"
TITLE = "did not connect to the kernel tools"


def spec(mode: str, *, connect: str = "start", recording: Path | None = None) -> AgentSpec:
    """The test agent as a registry entry whose MCP habit is ``connect``."""
    extra = (str(recording),) if recording is not None else ()
    return AgentSpec(name=f"mcp-{mode}", command=(sys.executable, str(AGENT), mode, *extra), mcp_connect=connect)


def gemini_like(mode: str) -> AgentSpec:
    """The registry's gemini entry (its remedy and trust setting), run as the test agent."""
    gemini = registry.get("gemini")
    assert gemini is not None
    return replace(gemini, command=(sys.executable, str(AGENT), mode, str(GEMINI_RECORDING)), npm_package=None,
                   cache_paths=(), args=())


@pytest.fixture
def started(tmp_path):
    agents: list[acpnb.Agent] = []

    def start(agent_spec, **options) -> acpnb.Agent:
        agent = acpnb.start(agent_spec, kernel_tools="read-only", timeout=TIMEOUT, cwd=tmp_path, **options)
        agents.append(agent)
        return agent

    yield start
    for agent in agents:
        agent.close()


def ours(notices) -> list:
    return [n for n in notices if n.meta == NOTICE_META]


def test_an_agent_that_never_connects_is_told_once_in_the_turn_and_the_panel(comms, started):
    session = started(spec("never")).new_session()
    panel = SessionPanel(session)
    view = TurnView(session.start_turn("hello"))
    turn = view.finished.result(TIMEOUT)
    (notice,) = turn.notices
    assert notice.severity == "warning" and notice.title == f"mcp-never {TITLE}"
    assert "no MCP connection from it had reached the kernel by the end of this turn" in notice.description
    assert "agent.stderr_tail()" in notice.description  # no remedy known: where to look
    assert session.kernel_tools.tools.bridges == 0 and not session.kernel_tools.tools.connected.is_set()
    # The turn's cell shows it, as the frontend holds it, and saves it.
    assert TITLE in view.notices.value and "acpnb-notice-warning" in view.notices.value
    assert TITLE in frontend_shows(comms, view.notices)[-1]
    assert TITLE in turn_forms(view.snapshot())["text/plain"]
    # The panel shows it once the turn has ended.
    comms.wait_for(lambda: TITLE in panel.notices.value)
    assert panel.notices.value.count(TITLE) == 1

    # Judged once: the next turns of the session say nothing more, in the cell or the panel.
    second = TurnView(session.start_turn("hello again"))
    assert second.finished.result(TIMEOUT).notices == []
    assert TITLE not in second.notices.value
    session.prompt("and again")
    assert len(ours(session.state.notices)) == 1 and panel.notices.value.count(TITLE) == 1

    # Another session of the same agent is offered its own server, and judged on its own.
    assert len(session.agent.new_session().prompt("hi").notices) == 1


def test_an_agent_that_connects_as_the_session_opens_is_not_told(started):
    session = started(spec("connect")).new_session()
    tools = session.kernel_tools.tools
    assert tools.connected.is_set() and tools.bridges == 1  # before any turn: it connected at session/new
    turn = session.prompt("hello")
    assert turn.notices == [] and ours(session.state.notices) == []
    assert tools.connection_judged  # the first answered turn decided


def test_an_agent_that_connects_lazily_or_is_not_known_is_never_judged(started):
    for agent_spec in (spec("never", connect="lazy"), spec("never", connect="")):
        session = started(agent_spec).new_session()
        assert session.prompt("hello").notices == [] and session.prompt("again").notices == []
        assert not session.kernel_tools.tools.connection_judged
    # A plain command line, not a registry entry: nothing known about it either.
    session = started([sys.executable, str(AGENT), "never"]).new_session()
    assert session.prompt("hello").notices == [] and not session.kernel_tools.tools.connection_judged


def test_a_cancelled_first_turn_does_not_decide(started):
    session = started(spec("never")).new_session()
    cancelled = session.prompt("cancel at once")
    assert cancelled.stop_reason == "cancelled" and cancelled.notices == []
    assert not session.kernel_tools.tools.connection_judged
    assert len(session.prompt("hello").notices) == 1


def test_gemini_in_a_folder_it_does_not_trust_gets_its_own_remedy(started, tmp_path):
    session = started(gemini_like("trust")).new_session()
    assert session.agent.info["name"] == "gemini-cli"  # as recorded from gemini-cli 0.61.0
    (notice,) = session.prompt("hello").notices
    assert notice.title == f"{session.agent.name} {TITLE}"
    words = notice.description
    assert "Gemini CLI starts MCP servers only in a folder it trusts" in words
    assert f"Trust {tmp_path.resolve()} (run `gemini` there once" in words
    assert "GEMINI_CLI_TRUST_WORKSPACE=true" in words and "%acp start gemini --trust-workspace" in words


def test_gemini_started_by_its_command_line_is_known_by_its_agent_info(started):
    session = started([sys.executable, str(AGENT), "never", str(GEMINI_RECORDING)]).new_session()
    (notice,) = session.prompt("hello").notices
    assert "%acp start gemini --trust-workspace" in notice.description


def test_the_trust_workspace_setting_makes_gemini_connect(started):
    env = trust_workspace_env("gemini")
    assert env == {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
    session = started(gemini_like("trust"), env=env).new_session()
    assert session.kernel_tools.tools.connected.is_set()
    assert session.prompt("hello").notices == []


def test_start_trust_workspace_sets_the_agents_own_variable_or_says_which_agents_have_one():
    command = parse_line("start gemini --trust-workspace --env A=1")
    assert dict(command.env) == {"A": "1", "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    assert parse_line("start gemini").env == ()
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=r"agent 'demo' has no setting for trusting a folder \(agents that have "
                                         r"one: gemini\)"):
        parse_line("start demo --trust-workspace")
    with pytest.raises(UsageError, match="name the agent it is for"):
        parse_line("start --trust-workspace")


def test_in_a_notebook_the_cell_says_so_and_start_trust_workspace_makes_gemini_connect(shell):
    """%acp start gemini (the registry's gemini entry, run as the test agent): the %%acp cell shows the notice with
    the remedy; started again with --trust-workspace, as the notice says, it connects and the cell says nothing."""
    with registry.overlay():
        registry.add(gemini_like("trust"))
        with capture_output():
            run_captured(shell, "%acp start gemini --kernel-tools read-only")
        untrusting = acpnb.current()
        shown = run_captured(shell, "%%acp\nhello")
        assert len(untrusting.turns[-1].notices) == 1
        said = "\n".join(str(output.data.get("text/plain", "")) for output in shown.outputs)
        assert f"gemini {TITLE}" in said and "%acp start gemini --trust-workspace" in said
        with capture_output():
            run_captured(shell, "%acp start gemini --name trusting --trust-workspace --kernel-tools read-only")
        trusting = acpnb.current()
        assert trusting.kernel_tools.tools.connected.is_set()
        shown = run_captured(shell, "%%acp\nhello")
        assert trusting.turns[-1].notices == []
        assert TITLE not in "\n".join(str(output.data.get("text/plain", "")) for output in shown.outputs)
        with capture_output():
            run_captured(shell, "%acp stop --all")


def test_a_bridge_that_came_without_mcp_gets_one_more_turn_then_is_named(started):
    session = started(spec("bridge")).new_session()
    tools = session.kernel_tools.tools
    assert tools.bridges == 1 and not tools.connected.is_set()  # its ping was answered: the bridge is through
    assert session.prompt("hello").notices == []  # an initialize may still be on its way
    (notice,) = session.prompt("hello again").notices
    assert "Its bridge to the kernel started, but no MCP initialize came through it." in notice.description
    assert "agent.stderr_tail()" in notice.description
    assert session.prompt("and again").notices == []


def test_a_failure_to_judge_never_keeps_the_turn_from_ending(started, monkeypatch, caplog):
    from acp_notebook.kernel_tools import connect

    def broken(_agent):
        raise RuntimeError("a registry that cannot be read")

    monkeypatch.setattr(connect, "connect_facts", broken)
    turn = started(spec("never")).new_session().prompt("hello")
    assert turn.stop_reason == "end_turn" and turn.notices == []
    assert "could not judge whether the agent connected" in caplog.text


def test_gemini_whose_bridge_came_is_not_told_to_trust_the_folder(started):
    """The trust remedy is for an agent that started no server at all; a bridge that came and stayed silent
    gets the words for that instead."""
    session = started(gemini_like("bridge")).new_session()
    session.prompt("hello")
    (notice,) = session.prompt("hello again").notices
    assert "no MCP initialize came through it" in notice.description
    assert "GEMINI_CLI_TRUST_WORKSPACE" not in notice.description


def test_a_registered_agent_can_say_how_it_connects(started):
    with registry.overlay():
        made = acpnb.register("shy", {"command": [sys.executable, str(AGENT), "never"], "mcp_connect": "start",
                                      "mcp_remedy": "Run it with --mcp in {cwd}.", "trust_env": {"SHY_TRUST": "1"}})
        assert trust_workspace_env("shy") == {"SHY_TRUST": "1"}
        session = started("shy").new_session()
        (notice,) = session.prompt("hello").notices
        assert f"Run it with --mcp in {session.cwd}." in notice.description
        with pytest.raises(ValueError, match='mcp_connect is "start"'):
            acpnb.register("odd", {"command": "x", "mcp_connect": "sometimes"})
    assert made.mcp_connect == "start"


def test_a_caller_without_the_token_does_not_count_as_the_agents_bridge(started):
    """A local process that finds the socket but not the token is refused and is no bridge: it cannot put off the
    notice (a bridge that came gets one more turn) or pass for the agent."""
    session = started(spec("never")).new_session()
    env = {pair["name"]: pair["value"] for pair in session.kernel_tools.entry["env"]}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as intruder:
        intruder.connect(env["ACPNB_KERNEL_CHANNEL"])
        intruder.sendall(b"not-the-token\n")
        intruder.settimeout(TIMEOUT)
        assert intruder.recv(200).startswith(b"refused: ")
    assert session.kernel_tools.tools.bridges == 0
    (notice,) = session.prompt("hello").notices
    assert "Its bridge" not in notice.description
