"""%acp auth METHOD of a terminal login in a real ipykernel, driven over the Jupyter protocol as a frontend does.

The cell that runs ``%acp auth tui`` ends at once; the login's view stays live: its output arrives as widget
updates, what the person types goes back as comm messages to an idle kernel, and once the login ends the agent
is started again and its session becomes the notebook's, on the kernel thread, with no cell running.
"""

from __future__ import annotations

import queue
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
from tests.kernels import start_kernel  # noqa: E402
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.kernel

AGENT = Path(__file__).resolve().parent / "agents" / "login_agent.py"
TIMEOUT = 60.0


class Frontend:
    """Runs cells, follows every widget's state and every display's last data, sends comm messages."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.widgets: dict[str, dict[str, Any]] = {}
        self.displays: dict[str, dict[str, Any]] = {}  # display id -> its last data

    def _take(self, msg: dict[str, Any]) -> None:
        content, kind = msg["content"], msg["msg_type"]
        if kind == "comm_open":
            self.widgets[content["comm_id"]] = dict(content["data"].get("state") or {})
        elif kind == "comm_msg" and content["comm_id"] in self.widgets:
            self.widgets[content["comm_id"]].update(content["data"].get("state") or {})
        elif kind in ("display_data", "update_display_data"):
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id:
                self.displays[display_id] = content["data"]

    def until(self, predicate: Callable[[], Any], what: str) -> Any:
        """Read iopub until ``predicate()`` holds (re-checked after each message)."""
        deadline = time.monotonic() + TIMEOUT
        while not (found := predicate()):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"not seen within {TIMEOUT} s: {what}"
            try:
                self._take(self.client.get_iopub_msg(timeout=remaining))
            except queue.Empty:
                continue
        return found

    def execute(self, code: str) -> tuple[dict[str, Any], str]:
        """Run a cell; its reply and its stdout."""
        msg_id = self.client.execute(code)
        out: list[str] = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            msg = self.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            self._take(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        while True:
            reply = self.client.get_shell_msg(timeout=TIMEOUT)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], "".join(out)

    def widget(self, **state: Any) -> str | None:
        """The comm id of the widget whose state has these values."""
        return next((cid for cid, s in self.widgets.items() if all(s.get(k) == v for k, v in state.items())), None)

    def output_text(self, comm_id: str) -> str:
        return "".join(o.get("text", "") for o in self.widgets[comm_id].get("outputs") or [])

    def send(self, comm_id: str, data: dict[str, Any]) -> None:
        self.client.shell_channel.send(self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))

    def set(self, comm_id: str, **state: Any) -> None:
        self.send(comm_id, {"method": "update", "state": state, "buffer_paths": []})


@pytest.fixture
def frontend(tmp_path) -> Iterator[Frontend]:
    manager, client = start_kernel(tmp_path)
    try:
        yield Frontend(client)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_terminal_login_answered_in_the_cell_gives_the_notebook_a_session(frontend, tmp_path):
    credentials = tmp_path / "credentials.json"
    start = (f"%load_ext acp_notebook\n%acp start --name login --env LOGIN_AGENT_CREDENTIALS={credentials} "
             f"-- {sys.executable} {AGENT}")
    reply, _ = frontend.execute(start)
    assert reply["status"] == "error" and reply["ename"] == "AcpError"
    assert "Log in with %acp auth tui: it runs the agent's login in the cell" in "\n".join(reply["traceback"])
    reply, _ = frontend.execute("%acp auth tui")
    assert reply["status"] == "ok"  # the cell ends; the login goes on in its view
    output = frontend.until(lambda: frontend.widget(_model_name="OutputModel"), "the login's output widget")
    frontend.until(lambda: frontend.output_text(output).endswith("Your name: "), "the name asked")
    field = frontend.widget(_model_name="TextModel", placeholder="Type what the login asks for, then Enter or Send")
    assert field is not None
    frontend.set(field, value="Ada")
    frontend.send(field, {"method": "custom", "content": {"event": "submit"}})
    password = frontend.until(lambda: frontend.widget(_model_name="PasswordModel"), "the password field")
    frontend.until(lambda: any(c == f"IPY_MODEL_{password}" for s in frontend.widgets.values()
                               for c in s.get("children") or []) and "sign in: " in frontend.output_text(output),
                   "the password field in place of the text field, and the code asked")
    frontend.set(password, value="4321")
    frontend.send(frontend.widget(_model_name="ButtonModel", description="Send"),
                  {"method": "custom", "content": {"event": "click"}})
    final = frontend.until(lambda: next((d for d in frontend.displays.values() if "Logged in:" in
                                         d.get("text/plain", "")), None), "the login's result in its saved form")
    assert "application/vnd.jupyter.widget-view+json" not in final and "4321" not in final["text/plain"]
    assert "Logged in as Ada." in final["text/plain"] and "session login-1 opened" in final["text/plain"]
    reply, out = frontend.execute("%%acp\nhello")
    assert reply["status"] == "ok"
    reply, out = frontend.execute("import acp_notebook as acpnb\nprint(acpnb.current().id, "
                                  "acpnb.current().turns[-1].text)")
    assert out.strip() == "login-1 Hello, Ada."
