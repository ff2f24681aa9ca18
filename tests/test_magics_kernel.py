"""%%acp in a real ipykernel, driven over the Jupyter protocol like a frontend does.

The point of these tests: while a %%acp cell is still running, a click on one of its
buttons (a comm message on the shell channel) reaches the kernel, and a kernel interrupt
sends session/cancel and ends the cell promptly.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
from tests.kernels import start_kernel  # noqa: E402
pytest.importorskip("ipykernel")

from acp_notebook.magics.cells import kernel_takes_comms_while_awaiting  # noqa: E402

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not kernel_takes_comms_while_awaiting(),
                                 reason="needs ipykernel >= 7.4 (widget messages during awaiting cells)")]

CELL_TIMEOUT = 60.0


@dataclass
class CellRun:
    """What one execute request produced, as the frontend saw it."""

    reply: dict[str, Any]
    errors: list[dict[str, Any]] = field(default_factory=list)
    stdout: str = ""
    displays: list[dict[str, Any]] = field(default_factory=list)  # display_data and execute_result contents


class Frontend:
    """A minimal frontend: runs cells, watches iopub, sends comm messages (clicks)."""

    def __init__(self, client: Any, manager: Any) -> None:
        self.client = client
        self.manager = manager
        self.widgets: dict[str, dict[str, Any]] = {}  # comm id -> latest state
        self.subshell: str | None = None

    def execute(self, code: str, *, on_message: Callable[[dict[str, Any]], None] | None = None,
                timeout: float = CELL_TIMEOUT) -> CellRun:
        return self.collect(self.client.execute(code), on_message=on_message, timeout=timeout)

    def collect(self, msg_id: str, *, on_message: Callable[[dict[str, Any]], None] | None = None,
                timeout: float = CELL_TIMEOUT) -> CellRun:
        """What the execute request ``msg_id`` produced, once its kernel is idle again."""
        run = CellRun(reply={})
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the cell {msg_id} did not finish within {timeout} s")
            try:
                msg = self.client.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            self._track_widgets(msg)
            if on_message is not None:
                on_message(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "error":
                run.errors.append(msg["content"])
            elif msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                run.stdout += msg["content"]["text"]
            elif msg["msg_type"] in ("display_data", "execute_result"):
                run.displays.append(msg["content"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        run.reply = self.reply_to(msg_id)
        return run

    def reply_to(self, msg_id: str, timeout: float = 10) -> dict[str, Any]:
        """The shell reply to ``msg_id``. Replies to other requests are passed over: ``start_new_kernel`` asks
        for kernel_info again each second until one is answered, so a slow kernel's start leaves spare replies."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self.client.get_shell_msg(timeout=max(0.0, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"]

    def _track_widgets(self, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "comm_open":
            self.widgets[content["comm_id"]] = dict(content["data"].get("state") or {})
        elif msg["msg_type"] == "comm_msg" and content["comm_id"] in self.widgets:
            self.widgets[content["comm_id"]].update(content["data"].get("state") or {})

    def send_comm(self, data: dict[str, Any]) -> str:
        """Send a comm message (on ``subshell`` once one is open, as JupyterLab 4.6 does); returns its id."""
        msg = self.client.session.msg("comm_msg", data)
        if self.subshell is not None:
            msg["header"]["subshell_id"] = self.subshell
        self.client.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def open_subshell(self) -> None:
        """Send widget messages on a kernel subshell from now on, as JupyterLab 4.6 does by default."""
        request = self.client.session.msg("create_subshell_request", {})
        self.client.control_channel.send(request)
        reply = self.client.get_control_msg(timeout=CELL_TIMEOUT)
        assert reply["parent_header"]["msg_id"] == request["header"]["msg_id"], reply
        self.subshell = reply["content"]["subshell_id"]

    def click(self, comm_id: str) -> None:
        """What the browser sends when a Button is clicked."""
        self.send_comm({"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}})

    def change(self, comm_id: str, state: dict[str, Any]) -> str:
        """What the browser sends when a widget's value changes; returns the message's id."""
        return self.send_comm({"comm_id": comm_id, "data": {"method": "update", "state": state, "buffer_paths": []}})


@pytest.fixture
def frontend(tmp_path) -> Iterator[Frontend]:
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    manager, client = start_kernel(tmp_path)
    try:
        yield Frontend(client, manager)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def button_opened(msg: dict[str, Any], description: str) -> str | None:
    """The comm id, if msg opens a Button with that description."""
    if msg["msg_type"] != "comm_open":
        return None
    state = msg["content"]["data"].get("state") or {}
    if state.get("_model_name") == "ButtonModel" and state.get("description") == description:
        return msg["content"]["comm_id"]
    return None


def clicker(frontend, description: str) -> tuple[Callable[[dict[str, Any]], None], list[str]]:
    """A message hook that clicks the button labelled ``description`` once it is shown; and the clicks made."""
    opened: list[str] = []
    clicked: list[str] = []

    def on_message(msg: dict[str, Any]) -> None:
        comm_id = button_opened(msg, description)
        if comm_id is not None:
            opened.append(comm_id)
        # Click once the prompt is in the view (its box's children update), as a person would:
        # ipywidgets attaches a widget's message handler just after announcing it.
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_msg" else {}
        if opened and not clicked and "children" in state:
            clicked.append(opened[0])
            frontend.click(opened[0])

    return on_message, clicked


def reply_started(msg: dict[str, Any]) -> bool:
    """Whether ``msg`` puts the demo agent's first reply chunk on screen: a delta of the turn view's parts
    (LiveParts' custom comm messages) holding the reply's start, or an Output widget's outputs."""
    if msg["msg_type"] != "comm_msg":
        return False
    data = msg["content"].get("data", {})
    return bool(data.get("state", {}).get("outputs")) or (
        data.get("method") == "custom" and "[fast]" in json.dumps(data.get("content")))


def interrupter(frontend) -> tuple[Callable[[dict[str, Any]], None], list[bool]]:
    """A message hook that interrupts the kernel once the reply starts streaming; and whether it did."""
    interrupted: list[bool] = []

    def on_message(msg: dict[str, Any]) -> None:
        if reply_started(msg) and not interrupted:
            interrupted.append(True)
            frontend.manager.interrupt_kernel()

    return on_message, interrupted


def test_a_permission_button_clicked_while_the_cell_runs_answers_the_agent(frontend):
    assert frontend.execute("%load_ext acp_notebook\n%acp start demo").reply["status"] == "ok"
    click_allow, clicked = clicker(frontend, "Allow once")
    run = frontend.execute("%%acp\nread notes.txt", on_message=click_allow)
    assert run.reply["status"] == "ok", run.errors
    assert len(clicked) == 1  # the cell could only finish because the click got through
    check = frontend.execute("turn = __import__('acp_notebook').current().turns[-1]\n"
                             "print(turn.text, turn.permissions[0].chosen, sep='|')")
    assert check.stdout.strip() == "[fast] Read notes.txt: 2 lines.|allow_once"
    assert frontend.widgets[clicked[0]]["disabled"] is True


# The demo agent pauses an hour between the chunks of a reply (its first chunk comes at once): a cell that
# ends at all ended because the interrupt cancelled the turn, with no clock in the test.
PAUSED_AGENT = "%acp start demo --env ACP_DEMO_DELAY=3600"

# After the interrupt: the turn's stop reason, the chunks it got, the last method the client sent.
_INTERRUPTED_TURN = (
    "session = __import__('acp_notebook').current()\n"
    "chunks = [e for e in session.agent.log if e['dir'] == 'recv' and e['msg'].get('method') == 'session/update'"
    " and e['msg']['params']['update'].get('sessionUpdate') == 'agent_message_chunk']\n"
    "print(session.turns[-1].stop_reason, len(chunks), [e['msg'].get('method') for e in session.agent.log"
    " if e['dir'] == 'send'][-1])")


def test_the_cancel_button_of_a_running_cell_cancels_the_turn(frontend):
    assert frontend.execute(f"%load_ext acp_notebook\n{PAUSED_AGENT}").reply["status"] == "ok"
    cancel: list[str] = []  # opened with the view, long before the first chunk arrives
    clicked: list[str] = []

    def click_cancel_once_streaming(msg: dict[str, Any]) -> None:
        comm_id = button_opened(msg, "Cancel turn")
        if comm_id is not None:
            cancel.append(comm_id)
        if reply_started(msg) and cancel and not clicked:  # the first chunk is on screen
            clicked.append(cancel[0])
            frontend.click(cancel[0])

    run = frontend.execute("%%acp\na long question that takes the agent a while to answer",
                           on_message=click_cancel_once_streaming)
    assert clicked and run.reply["status"] == "ok", run.errors
    # Ended before the agent's second chunk, an hour away: the cancel cut its pause short.
    assert frontend.execute(_INTERRUPTED_TURN).stdout.strip() == "cancelled 1 session/cancel"


def test_a_kernel_interrupt_sends_session_cancel_and_ends_the_cell_promptly(frontend):
    assert frontend.execute(f"%load_ext acp_notebook\n{PAUSED_AGENT}").reply["status"] == "ok"
    interrupt_once_streaming, interrupted = interrupter(frontend)

    run = frontend.execute("%%acp\nhello there my friend, how are you on this fine day",
                           on_message=interrupt_once_streaming)
    assert interrupted
    assert run.reply["status"] == "error" and run.reply["ename"] == "TurnInterrupted"
    (error,) = run.errors
    assert len(error["traceback"]) == 2  # one message line and one hint line, no frames
    # Ended before the agent's second chunk, an hour away: the cancel cut its pause short.
    assert frontend.execute(_INTERRUPTED_TURN).stdout.strip() == "cancelled 1 session/cancel"
    # The kernel is usable afterwards, and so is the session.
    again = frontend.execute("%acp set tone=pirate\n"
                             "print(__import__('acp_notebook').current().config.values()['tone'])")
    assert again.reply["status"] == "ok" and again.stdout.strip().endswith("pirate"), again.errors


def test_clicks_and_interrupts_still_work_after_nest_asyncio_apply(frontend):
    pytest.importorskip("nest_asyncio")
    setup = "import nest_asyncio\nnest_asyncio.apply()\n%load_ext acp_notebook\n%acp start demo"
    assert frontend.execute(setup).reply["status"] == "ok"
    click_allow, clicked = clicker(frontend, "Allow once")
    run = frontend.execute("%%acp\nread notes.txt", on_message=click_allow)
    assert run.reply["status"] == "ok" and clicked, run.errors

    assert frontend.execute(PAUSED_AGENT).reply["status"] == "ok"
    interrupt_once_streaming, interrupted = interrupter(frontend)
    run = frontend.execute("%%acp\nhello there my friend, how are you on this fine day",
                           on_message=interrupt_once_streaming)
    assert interrupted and run.reply.get("ename") == "TurnInterrupted"
    assert frontend.execute(_INTERRUPTED_TURN).stdout.strip() == "cancelled 1 session/cancel"


def test_a_bad_cell_line_is_a_one_line_usage_error(frontend):
    assert frontend.execute("%load_ext acp_notebook\n%acp start demo").reply["status"] == "ok"
    lines: list[str] = []
    frontend.execute("%%acp --bogus\nhi", on_message=lambda m: m["msg_type"] == "stream"
                     and m["content"]["name"] == "stderr" and lines.append(m["content"]["text"]))
    assert "".join(lines).strip() == ("UsageError: %%acp: unrecognized arguments: --bogus; its options are --attach, "
                                      "--cell, --models, --new, --no-wait, --wait; settings such as the model change with %acp set "
                                      "ID=VALUE before the cell (see %acp?)")


def test_at_kernel_exit_every_live_output_is_sent_in_its_static_form(frontend):
    """A frontend still listening when the kernel shuts down gets each open panel as static HTML,
    marked closed: nothing the kernel leaves behind needs it any more."""
    shown: dict[str, dict[str, Any]] = {}

    def panels(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "display_data" and "acpnb-panel" in msg["content"]["data"].get("text/html", ""):
            shown[msg["content"]["transient"]["display_id"]] = msg["content"]["data"]

    assert frontend.execute("%load_ext acp_notebook\n%acp start demo", on_message=panels).reply["status"] == "ok"
    (display_id,) = shown
    assert "application/vnd.jupyter.widget-view+json" in shown[display_id]
    frontend.client.shutdown()  # a shutdown_request, as a frontend sends it
    deadline = time.monotonic() + CELL_TIMEOUT
    while True:
        msg = frontend.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))  # queue.Empty: none came
        if msg["msg_type"] == "update_display_data" and msg["content"]["transient"]["display_id"] == display_id:
            break
    data = msg["content"]["data"]
    assert set(data) == {"text/html", "text/markdown", "text/plain"}
    assert "acpnb-status-closed" in data["text/html"] and "the kernel shut down" in data["text/plain"]



def test_an_output_over_64_kib_made_static_at_kernel_exit_still_reaches_the_frontend(frontend):
    """pyzmq sends a message part of 64 KiB or more zero-copy, through a collector whose exit handler refuses
    such sends from then on: the inspector's static form, made at exit, must go out before that handler runs."""
    shown: dict[str, dict[str, Any]] = {}

    def inspectors(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "display_data" and "acpnb-inspector" in msg["content"]["data"].get("text/html", ""):
            shown[msg["content"]["transient"]["display_id"]] = msg["content"]["data"]

    assert frontend.execute("%load_ext acp_notebook\n%acp start demo").reply["status"] == "ok"
    long_prompt = frontend.execute("__import__('acp_notebook').current().prompt('word ' * 20_000)")
    assert long_prompt.reply["status"] == "ok", long_prompt.errors
    assert frontend.execute("%acp log", on_message=inspectors).reply["status"] == "ok"
    (display_id,) = shown
    frontend.client.shutdown()
    deadline = time.monotonic() + CELL_TIMEOUT
    while True:
        msg = frontend.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))  # queue.Empty: none came
        if msg["msg_type"] == "update_display_data" and msg["content"]["transient"]["display_id"] == display_id:
            break
    html = msg["content"]["data"]["text/html"]
    assert len(html.encode()) > 64 * 1024 and "acpnb-inspector-static" in html

@pytest.mark.parametrize("on_subshell", [False, True], ids=["main-shell", "subshell"])
def test_a_form_filled_in_and_submitted_while_the_cell_runs_answers_the_agent(frontend, on_subshell):
    """The person types a name into the agent's form, corrects it and clicks Submit; the reply uses the answer.

    On a subshell, as JupyterLab 4.6 sends widget messages: ipykernel would route a widget's messages after
    its first to that subshell's thread, and the click (still on the main shell) could overtake the correction.
    """
    assert frontend.execute("%load_ext acp_notebook\n%acp start demo").reply["status"] == "ok"
    if on_subshell:
        frontend.open_subshell()
    name_input: list[str] = []
    submit: list[str] = []
    typed: list[str] = []  # the ids of the change messages sent
    statuses: dict[str, list[str]] = {}  # parent msg id -> the statuses the kernel published for it

    def fill_and_submit(msg: dict[str, Any]) -> None:
        parent = msg["parent_header"].get("msg_id")
        if msg["msg_type"] == "status":
            statuses.setdefault(parent, []).append(msg["content"]["execution_state"])
        if msg["msg_type"] == "comm_open":
            state = msg["content"]["data"].get("state") or {}
            if state.get("_model_name") == "TextModel" and not name_input:
                name_input.append(msg["content"]["comm_id"])  # the form's first text field: "Your name"
            comm_id = button_opened(msg, "Submit")
            if comm_id is not None:
                submit.append(comm_id)
        state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_msg" else {}
        # Once the form is in the view (its box's children update), as a person would: type.
        if name_input and submit and not typed and "children" in state:
            typed.append(frontend.change(name_input[0], {"value": "G"}))
        # The browser sends a field's next change once the kernel said "idle" for the last: correct it, click.
        if (len(typed) == 1 and msg["msg_type"] == "status" and parent == typed[0]
                and msg["content"]["execution_state"] == "idle"):
            typed.append(frontend.change(name_input[0], {"value": "Grace"}))
            frontend.click(submit[0])

    run = frontend.execute("%%acp\nask me about tea", on_message=fill_and_submit)
    assert run.reply["status"] == "ok", run.errors
    assert len(typed) == 2  # the cell could only finish because the answers got through
    check = frontend.execute("turn = __import__('acp_notebook').current().turns[-1]\n"
                             "print(turn.text, turn.elicitations[0].action, turn.elicitations[0].content, sep='|')")
    text, action, content = check.stdout.strip().split("|")
    assert text.startswith("[fast] Thank you, Grace! Favourite colour: green. 2 cups of tea a day.")
    assert action == "accept" and content == "{'name': 'Grace', 'colour': 'green', 'cups': 2, 'notebooks': True}"
    assert frontend.widgets[submit[0]]["disabled"] is True
    # Each change was handled on the main shell, beside the running cell (a subshell would have published a
    # "busy" of its own), and acknowledged with the "idle" the browser waits for.
    assert all(statuses.get(msg_id) == ["idle"] for msg_id in typed), statuses
