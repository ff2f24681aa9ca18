"""``%acp pending`` and the save hook's view of requests, in one process (the real-kernel run is
tests/test_pending_kernel.py): what waits is listed and answered by number or id, a request the list names no
longer is refused in words, and a saved output that names a request says what came of it once it no longer
waits (answered, withdrawn, or its kernel gone), its header and kernel card included; one that still waits
keeps saying so.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from acp_notebook import saving
from acp_notebook._permission import KernelApproval
from acp_notebook.kernel_link import RUN_OPTIONS
from acp_notebook.magics import grammar as g
from acp_notebook.magics import pending
from acp_notebook.widgets import permission
from acp_notebook.widgets._html import HeaderInfo
from acp_notebook.turn import KernelCall
from acp_notebook.widgets.static import LIVE_WORDS, TurnSnapshot, turn_forms


@pytest.fixture
def in_a_kernel(tmp_path, monkeypatch) -> Iterator[Path]:
    """Prompts write their states as in a Jupyter kernel, under a runtime directory of the test's own."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr(permission, "kernel_id", lambda: "kernel-under-test")
    yield tmp_path / saving.REQUESTS_FOLDER


@pytest.fixture
def prompts() -> Iterator[list[permission.PermissionPrompt]]:
    made: list[permission.PermissionPrompt] = []
    yield made
    for prompt in made:
        prompt.choose(None)  # none stays in the process-wide table of waiting prompts


def ask(made: list[permission.PermissionPrompt], code: str = "y = x + 1") -> permission.PermissionPrompt:
    """A kernel-tools run_code's approval waiting in a cell (the asker is named, so no session is needed)."""
    call = KernelCall(id=f"k{len(made)}", tool="run_code", arguments={"code": code}, code=code, status="asking")
    approval = KernelApproval(None, None, call, code, [dict(o) for o in RUN_OPTIONS])  # type: ignore[arg-type]
    prompt = permission.KernelApprovalPrompt(approval, asker="agent 'demo' (session 'Sales')")
    made.append(prompt)
    return prompt


def turn_output(*waiting: permission.PermissionPrompt) -> dict[str, Any]:
    """A %%acp turn's output as saved while its requests wait (the turn view's saved forms)."""
    header = HeaderInfo(title="Sales", agent="demo", model="fast", status="waiting", extra=LIVE_WORDS)
    card = ("Run code in your kernel [kernel, waiting for you]",
            "**Run code in your kernel** (kernel, waiting for you)",
            '<div class="acpnb-kernel-call"><span>waiting for you</span></div>')
    forms = turn_forms(TurnSnapshot(header=header, kernel=[card],
                                    pending=[(p.pending_text(), p.static_html()) for p in waiting]))
    return {"output_type": "display_data", "data": forms, "metadata": {}}


def saved(*outputs: dict[str, Any], folder: Path) -> dict[str, Any]:
    model = {"type": "notebook", "content": {"cells": [{"cell_type": "code", "source": "%%acp", "metadata": {},
                                                        "outputs": list(outputs)}], "metadata": {}}}
    saving.settle_requests(model, folder=folder, path="x.ipynb")
    return model["content"]["cells"][0]["outputs"][0]["data"]


def test_the_command_line_parses_and_refuses_in_one_line():
    assert g.parse_line("pending") == g.Pending()
    assert g.parse_line("pending reject 2") == g.Pending("reject", "2")
    with pytest.raises(UsageError, match="invalid choice"):
        g.parse_line("pending maybe 1")
    with pytest.raises(UsageError, match="name the request"):
        pending.run_pending(g.Pending("allow", None))
    assert "%acp pending allow 1" in g.help_text()


def test_a_kernel_is_found_by_part_of_its_id_beside_its_ipc_sockets(tmp_path, monkeypatch):
    """Jupyter Server puts an ipc kernel's sockets beside its connection file, named after it (kernel-ID-ipc-N):
    the command line's search by part of the id takes the .json, not a socket, which cannot be read."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    kernel_id = "74e005c4-7010"
    (tmp_path / f"kernel-{kernel_id}.json").write_text("{}", encoding="utf-8")
    sockets = [socket.socket(socket.AF_UNIX) for _ in range(3)]
    try:
        for number, sock in enumerate(sockets, 1):  # made after the file: the most recent matches
            sock.bind(str(tmp_path / f"kernel-{kernel_id}-ipc-{number}"))
        assert pending.connection_file("74e005c4") == str(tmp_path / f"kernel-{kernel_id}.json")
        assert pending.connection_file(f"kernel-{kernel_id}.json") == str(tmp_path / f"kernel-{kernel_id}.json")
        with pytest.raises(OSError):
            pending.connection_file("no-such-kernel")
    finally:
        for sock in sockets:
            sock.close()


def test_what_waits_is_listed_with_who_asks_and_answered_by_number_or_id(prompts, capsys):
    first, second = ask(prompts), ask(prompts, "import os\nos.remove('data.csv')")
    listed = pending.listing_text(pending.waiting_prompts())
    assert "1. agent 'demo' (session 'Sales') asked at" in listed and "2. agent 'demo'" in listed
    assert "os.remove('data.csv')" in listed and f"request {second.key}" in listed
    assert "wait" not in listed.split("\n")[0]  # saved with the notebook, this line stays true once answered
    assert "You chose: Reject." in pending.answer(second.key[:6], "reject")
    assert second.future.result() == "reject"
    assert "You chose: Allow." in pending.answer("1", "allow")
    assert first.future.result() == "allow" and first not in pending.waiting_prompts()
    with pytest.raises(UsageError, match="no waiting request"):
        pending.answer(first.key, "allow")  # settled already: named, not answered twice
    assert "No permission request was open" in pending.listing_text([])


def test_hidden_characters_in_the_code_are_spelled_out_in_the_list(prompts):
    ask(prompts, "print('ok')\u202e # harmless")
    assert "\\u202e" in pending.listing_text(pending.waiting_prompts())


def test_a_saved_request_that_was_answered_says_its_outcome_header_and_card_included(in_a_kernel, prompts):
    prompt = ask(prompts)
    output = turn_output(prompt)
    assert json.loads((in_a_kernel / f"{prompt.key}.json").read_text())["state"] == "waiting"
    still = saved(json.loads(json.dumps(output)), folder=in_a_kernel)
    assert "Waiting for an answer" in still["text/html"] and "waiting for your answer" in still["text/plain"]
    prompt.choose("allow")
    data = saved(output, folder=in_a_kernel)
    assert "waiting" not in json.dumps(data).lower()
    assert "You chose: Allow." in data["text/html"]
    assert f"(request {prompt.key}: You chose: Allow)" in data["text/plain"]
    assert data["text/plain"].startswith("Sales · model: fast · answered · ")
    assert "acpnb-status-answered" in data["text/html"] and "settled after this was saved" in data["text/markdown"]


def test_a_withdrawn_request_and_one_of_a_gone_kernel_say_so(in_a_kernel, prompts):
    withdrawn, lost = ask(prompts), ask(prompts)
    withdrawn.choose(None)
    data = saved(turn_output(withdrawn), folder=in_a_kernel)
    assert "Withdrawn: the turn was cancelled." in data["text/html"] and " · withdrawn · " in data["text/plain"]
    (in_a_kernel / f"{lost.key}.json").unlink()  # what a kernel leaves as it exits
    data = saved(turn_output(lost), folder=in_a_kernel)
    assert saving.GONE in data["text/html"] and "waiting" not in json.dumps(data).lower()


def test_one_request_still_waiting_keeps_the_turn_waiting(in_a_kernel, prompts):
    answered, open_one = ask(prompts), ask(prompts)
    output = turn_output(answered, open_one)
    answered.choose("reject")
    data = saved(output, folder=in_a_kernel)
    assert "You chose: Reject." in data["text/html"] and "Waiting for an answer" in data["text/html"]
    assert " · waiting · " in data["text/plain"]  # the turn still waits on the other one


def test_a_forged_state_file_cannot_inject_markup(in_a_kernel, prompts):
    prompt = ask(prompts)
    output = turn_output(prompt)
    (in_a_kernel / f"{prompt.key}.json").write_text(json.dumps({"state": "settled",
                                                                "outcome": "<img src=x onerror=alert(1)>"}))
    data = saved(output, folder=in_a_kernel)
    assert "<img" not in data["text/html"] and "&lt;img" in data["text/html"]


def test_a_waiting_state_left_by_a_killed_kernel_is_not_taken_for_waiting(in_a_kernel, prompts):
    prompt = ask(prompts)
    output = turn_output(prompt)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    state = json.loads((in_a_kernel / f"{prompt.key}.json").read_text())
    assert state["host"] == socket.gethostname()
    # What a kernel killed outside its exit leaves: "waiting", under a process that is gone.
    (in_a_kernel / f"{prompt.key}.json").write_text(json.dumps({**state, "pid": int(ended.stdout)}))
    data = saved(output, folder=in_a_kernel)
    assert saving.GONE in data["text/plain"] and " · not answered · " in data["text/plain"]
