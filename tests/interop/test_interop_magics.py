"""`%acp start claude` and `%%acp` on a real IPython shell, with the real claude-agent-acp answering
from the model server: the magics reach the registry entry by name."""

from __future__ import annotations

import shlex

import pytest
from agent_setups import AGENTS, home_env
from conftest import MARKER_VAR, require_pinned
from interop_support import HELLO

import acp_notebook as acpnb

pytestmark = pytest.mark.interop

IPython = pytest.importorskip("IPython")
from IPython.testing import globalipapp  # noqa: E402


@pytest.fixture
def shell(interop, monkeypatch):
    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    monkeypatch.chdir(interop.work)
    ip.run_line_magic("load_ext", "acp_notebook")
    yield ip
    ip.run_line_magic("unload_ext", "acp_notebook")
    ip.config.pop("AcpMagics", None)


def run(ip, source: str) -> None:
    result = ip.run_cell(source)
    for error in (result.error_before_exec, result.error_in_exec):
        if error is not None:
            raise error


def test_acp_start_claude_and_a_cell_prompt(interop, model_server, shell):
    setup = require_pinned("claude")
    env = {**setup.env(model_server), **home_env(interop.new_home("claude")), MARKER_VAR: interop.marker}
    options = " ".join(f"--env {shlex.quote(f'{k}={v}')}" for k, v in env.items())
    run(shell, "%config AcpMagics.wait = 'always'")
    run(shell, f"%acp start claude {options}")
    session = acpnb.current()
    interop.agents.append(session.agent)  # closed and checked by the fixture too
    assert session.agent.name == "claude" and session.agent.command[0] == str(AGENTS["claude"].executable())
    assert session.config.ids() == ["mode", "model", "effort", "fast", "ultracode"]
    run(shell, "%acp set model=haiku")
    assert session.model == "haiku"
    run(shell, "%%acp\nsay hi")
    turn = session.turns[-1]
    assert turn.stop_reason == "end_turn" and turn.text == HELLO + "say hi"
    run(shell, "%acp stop")
    assert session.agent.status == "closed"
