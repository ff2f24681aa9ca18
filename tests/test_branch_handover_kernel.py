"""Switching agents mid-conversation in a real kernel: `%acp proxy a=demo b=demo`, turns on `a`, then
`%acp set model=b:smart` hands the session over to `b` (the proxy keeps every agent's models in the
model option once prompted, so the client's own check lets the pick through); the next turn is answered
by b with the conversation, and its header says "handed over from a:model after N turns"."""

from __future__ import annotations

import pytest

from tests.test_branch_kernel import Frontend, plain
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


def test_set_model_of_another_agent_after_turns_hands_the_conversation_over(tmp_path):
    cells = ["%load_ext acp_notebook\n%config AcpMagics.permission = 'allow'\n%acp proxy a=demo b=demo\n"
             "%acp set model=a:fast",
             "%%acp\nthe tide is low", "%%acp\nthe crabs are out",
             "import acp_notebook as acpnb\nprint(acpnb.current().config['model'].values)",
             "%acp set model=b:smart",
             "%%acp\nwhat did I say before?",
             "import json\nprint(json.dumps(acpnb.current().turns[-1].result['_meta']))\n"
             "told = [e['msg']['params']['update'].get('_meta') or {} for e in acpnb.current().agent.log\n"
             "        if e['msg'].get('method') == 'session/update'\n"
             "        and e['msg']['params']['update'].get('sessionUpdate') == 'session_info_update']\n"
             "print([m['acp-notebook/handover']['description'] for m in told if 'acp-notebook/handover' in m])",
             "%%acp\nwhat did I say before?"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    client = notebook_client(notebook, tmp_path, timeout=120)
    with client.setup_kernel():
        frontend = Frontend(client)
        for index in range(4):
            frontend.run(notebook, index)
        # prompted on a, and b's models are still offered
        assert "'b:fast', 'b:smart'" in plain(notebook.cells[3]) and "'a:fast'" in plain(notebook.cells[3])
        assert "model = b / Smart" in plain(frontend.run(notebook, 4))  # not refused: handed over
        answered = plain(frontend.run(notebook, 5))
        assert "You have sent 2 prompts before this one" in answered
        assert "the tide is low" in answered and "the crabs are out" in answered
        assert "handed over from a:fast after 2 turns" in answered  # the turn's header says so
        marker = plain(frontend.run(notebook, 6))
        assert '"acp-notebook/handover"' in marker and '"from": "a:fast"' in marker and '"to": "b:smart"' in marker
        # the frames the inspector shows: the proxy's session_info_update says it too
        assert "['handed over from a:fast after 2 turns']" in marker
        later = plain(frontend.run(notebook, 7))
        assert "You have sent 3 prompts before this one" in later  # b keeps the conversation from here
        assert "handed over from" not in later  # only the first turn on b carried it
