"""A request that waits while the notebook is saved, answered from a new client with ``%acp pending``.

In a real kernel driven over the Jupyter protocol: the demo agent's ``run_code`` waits for Allow; the
notebook is saved (through the server's pre-save hook, saving.py) and says it waits, with the terminal
command that answers it (which lists it, run here); a second client
connects to the same kernel, as a reloaded page does, and (on a subshell: the main shell is still running
the ``%%acp`` cell) lists the request and answers it with ``%acp pending``; the turn ends and the code
ran; the notebook saved again from what the reopened frontend holds no longer says "waiting" anywhere.
"""

from __future__ import annotations

import copy
import json
import os
import queue
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
nbformat = pytest.importorskip("nbformat")

from acp_notebook import saving  # noqa: E402
from acp_notebook.magics.cells import kernel_takes_comms_while_awaiting  # noqa: E402
from tests.kernels import kernel_manager  # noqa: E402
from tests.test_magics_kernel import CELL_TIMEOUT, Frontend  # noqa: E402

pytestmark = [pytest.mark.kernel, pytest.mark.slow,
              pytest.mark.skipif(not kernel_takes_comms_while_awaiting(),
                                 reason="needs ipykernel >= 7.4 (awaiting %%acp cells)")]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class Outputs:
    """Each cell's outputs as a frontend keeps them: displays added, ``update_display_data`` applied by display id."""

    def __init__(self) -> None:
        self.cells: dict[str, list[dict[str, Any]]] = {}
        self._displays: dict[str, list[dict[str, Any]]] = {}

    def note(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        parent = msg["parent_header"].get("msg_id")
        display_id = (content.get("transient") or {}).get("display_id")
        if kind in ("display_data", "execute_result"):
            output = {"output_type": "display_data", "data": dict(content["data"]),
                      "metadata": copy.deepcopy(content.get("metadata") or {})}
            self.cells.setdefault(parent, []).append(output)
            if display_id:
                self._displays.setdefault(display_id, []).append(output)
        elif kind == "update_display_data":
            for output in self._displays.get(display_id, ()):
                output["data"] = dict(content["data"])
                output["metadata"] = copy.deepcopy(content.get("metadata") or {})
        elif kind == "stream":
            self.cells.setdefault(parent, []).append({"output_type": "stream", "name": content["name"],
                                                      "text": content["text"]})


class Client(Frontend):
    """A Frontend that keeps every shell reply it reads, so two requests in flight do not lose each other's."""

    def __init__(self, client: Any, manager: Any) -> None:
        super().__init__(client, manager)
        self.replies: dict[str, dict[str, Any]] = {}

    def reply_to(self, msg_id: str, timeout: float = CELL_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while msg_id not in self.replies:
            reply = self.client.get_shell_msg(timeout=max(0.0, deadline - time.monotonic()))
            self.replies[reply["parent_header"].get("msg_id")] = reply["content"]
        return self.replies.pop(msg_id)

    def send_on_subshell(self, msg_type: str, content: dict[str, Any]) -> str:
        msg = self.client.session.msg(msg_type, content)
        msg["header"]["subshell_id"] = self.subshell
        self.client.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def execute_on_subshell(self, code: str, outputs: Outputs) -> Any:
        msg_id = self.send_on_subshell("execute_request", {"code": code, "silent": False, "store_history": False,
                                                           "user_expressions": {}, "allow_stdin": False})
        run = self.collect(msg_id, on_message=outputs.note)
        return msg_id, run

    def wait_for_iopub(self, attempts: int = 30) -> None:
        """Until this client's iopub hears the kernel: a new subscriber misses what is published before it is
        connected, so ask (kernel_info on the subshell, the main shell is busy) until a status comes back."""
        for _ in range(attempts):
            msg_id = self.send_on_subshell("kernel_info_request", {})
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                try:
                    msg = self.client.get_iopub_msg(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if msg["parent_header"].get("msg_id") == msg_id:
                    self.reply_to(msg_id)
                    return
        raise TimeoutError("the second client's iopub never heard the kernel")


def pump(frontend: Frontend, outputs: Outputs, until: Callable[[], bool], timeout: float = CELL_TIMEOUT) -> None:
    """Read iopub into ``outputs`` until ``until()`` holds."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError("the kernel never showed what the test waits for")
        try:
            outputs.note(frontend.client.get_iopub_msg(timeout=1.0))
        except queue.Empty:
            continue


def html_of(outputs: list[dict[str, Any]]) -> str:
    return "\n".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)


def save(cells: list[tuple[str, list[dict[str, Any]]]], running: set[str]) -> dict[str, Any]:
    """The notebook as the server saves it: the frontend's model through the extension's pre-save hook."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source, _ in cells]
    content = json.loads(json.dumps(notebook))
    for cell, (_source, outputs) in zip(content["cells"], cells):
        cell["outputs"] = copy.deepcopy(outputs)
    model = {"type": "notebook", "content": content}
    saving._pre_save(model, running_kernels=lambda: running, path="pending.ipynb")
    return model["content"]


@pytest.fixture
def kernel(tmp_path, monkeypatch) -> Iterator[tuple[Any, Path]]:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))  # the kernel and the save hook share it
    # Its connection file where Jupyter Server puts one (kernel-ID.json in the runtime directory): the terminal
    # command finds the kernel there.
    manager = kernel_manager(connection_file=str(runtime / f"kernel-{uuid.uuid4()}.json"))
    manager.start_kernel(cwd=str(tmp_path), env=dict(os.environ))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=CELL_TIMEOUT)
        yield Client(client, manager), runtime
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_request_saved_while_it_waits_is_answered_from_a_new_client_and_the_file_stops_saying_waiting(kernel):
    first, runtime = kernel
    assert first.execute("%load_ext acp_notebook\n%acp start demo\nx = 41").reply["status"] == "ok"
    seen = Outputs()
    turn_cell = first.client.execute("%%acp\nrun y = x + 1")
    pump(first, seen, lambda: "Waiting for an answer" in html_of(seen.cells.get(turn_cell, [])))
    kernel_id = Path(first.manager.connection_file).stem.removeprefix("kernel-")

    # Saved while Allow waits: the file says so, and how to answer it after a reopen.
    saved = save([("%%acp\nrun y = x + 1", seen.cells[turn_cell])], {kernel_id})
    (turn_output,) = [o for o in saved["cells"][0]["outputs"] if o["output_type"] == "display_data"]
    assert WIDGET_MIME not in turn_output["data"]
    assert "Waiting for an answer: Allow | Reject" in turn_output["data"]["text/html"]
    assert "answer with %acp pending" in turn_output["data"]["text/plain"]
    command = f"python -m acp_notebook.magics.pending --kernel {kernel_id[:8]} allow "
    assert command in turn_output["data"]["text/plain"]  # a terminal's way in, spelled out
    listed = subprocess.run([sys.executable, "-m", "acp_notebook.magics.pending", "--kernel", kernel_id[:8]],
                            capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0 and "1. agent 'demo'" in listed.stdout, listed

    # A new client of the same kernel (a reloaded page), on a subshell: the main shell still runs the cell.
    # Its own client and session (manager.client() would share the first one's, and so its socket identity).
    other = jupyter_client.BlockingKernelClient(connection_file=first.manager.connection_file)
    other.load_connection_file()
    second = Client(other, first.manager)
    second.client.start_channels()
    try:
        second.open_subshell()
        second.wait_for_iopub()
        reopened = Outputs()
        listing_id, listing = second.execute_on_subshell("%acp pending", reopened)
        assert listing.reply["status"] == "ok", listing.errors
        assert "1. agent 'demo'" in listing.stdout and "Run code in your kernel" in listing.stdout
        assert "y = x + 1" in listing.stdout and "%acp pending allow N" in listing.stdout
        (buttons,) = [o for o in reopened.cells[listing_id] if o["output_type"] == "display_data"]
        assert WIDGET_MIME in buttons["data"]  # the live buttons again, in this cell
        answer_id, answered = second.execute_on_subshell("%acp pending allow 1", reopened)
        assert answered.reply["status"] == "ok", answered.errors
        assert "You chose: Allow." in answered.stdout
        # The re-shown buttons turned into the outcome (update_display_data) as the request was settled.
        assert WIDGET_MIME not in buttons["data"] and "You chose: Allow." in buttons["data"]["text/html"]
    finally:
        second.client.stop_channels()

    turn = first.collect(turn_cell, on_message=seen.note)
    assert turn.reply["status"] == "ok", turn.errors
    assert first.execute("print(y)").stdout.strip() == "42"
    # The first frontend's output was brought to its end by the kernel itself.
    assert "You chose: Allow." in html_of(seen.cells[turn_cell]) and "Waiting" not in html_of(seen.cells[turn_cell])

    # Saved again from what the reopened frontend holds: its copy of the turn never got the turn's end.
    again = save([("%%acp\nrun y = x + 1", saved["cells"][0]["outputs"]),
                  ("%acp pending", reopened.cells[listing_id]), ("%acp pending allow 1", reopened.cells[answer_id])],
                 {kernel_id})
    text = json.dumps(again)
    assert "waiting" not in text.lower(), text
    (turn_output,) = [o for o in again["cells"][0]["outputs"] if o["output_type"] == "display_data"]
    assert "You chose: Allow." in turn_output["data"]["text/html"] and "answered" in turn_output["data"]["text/plain"]
    assert "You chose: Allow" in turn_output["data"]["text/markdown"]
    assert list((runtime / saving.REQUESTS_FOLDER).glob("*.json"))  # the kernel's record the hook read
