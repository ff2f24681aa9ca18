"""``%acp resume`` in a plain Jupyter kernel that knows no notebook file (as jupyter console, nbclient or a
script driving a kernel run it), after a real kernel restart and without anything saved: the session
comes back from the local session store, with its model, and the agent recalls the conversation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
from tests.kernels import kernel_manager  # noqa: E402
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.kernel

FIRST_PROMPT = "new topic: Lynx in winter"


def run(client: Any, code: str) -> str:
    """Run a cell; its stdout and the text of what it displayed. A cell error fails the test."""
    out: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "stream":
            out.append(content["text"])
        elif msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            out.append(content["data"].get("text/plain", ""))
        elif msg["msg_type"] == "error":
            out.append("\n".join(content["traceback"]))

    reply = client.execute_interactive(code, timeout=90, output_hook=hook)
    assert reply["content"]["status"] == "ok", "".join(out)
    return "".join(out)


@pytest.fixture
def kernel(tmp_path: Path) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}  # a kernel with no notebook
    manager = kernel_manager()
    manager.start_kernel(cwd=str(tmp_path), env=env)
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    yield manager, client
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def test_a_plain_kernel_resumes_after_a_restart_with_nothing_saved(kernel):
    manager, client = kernel
    run(client, "%load_ext acp_notebook\n%acp start demo")
    assert "model = Smart" in run(client, "%acp set model=smart")
    run(client, f"%%acp --wait\n{FIRST_PROMPT}")
    session_id = run(client, "import acp_notebook as acpnb; print(acpnb.current().id)").strip()

    manager.restart_kernel(now=True)
    client.wait_for_ready(timeout=60)
    resumed = run(client, "%load_ext acp_notebook\n%acp resume")
    assert resumed.startswith(f'Resumed session {session_id} "Lynx in winter" of demo (session/resume).')
    assert "model: Smart" in resumed  # the panel
    run(client, "%%acp --wait\nwhat did I say first?")
    facts = run(client, "import acp_notebook as acpnb; s = acpnb.current(); print(s.id, s.model); print(s.turns[-1].text)")
    assert facts.splitlines()[0] == f"{session_id} smart"
    assert f'You first said: "{FIRST_PROMPT}"' in facts
