"""Kernel-tools approvals are their own request type (issue 34 point 3): a run_code under the "ask" policy reaches
a permission policy as a ``KernelApproval`` (its code and the kernel's record of the call), an agent's
``session/request_permission`` as a ``PermissionRequest`` carrying the agent's own tool call; both are decided by
the same policy order and option kinds. In a %%acp cell's view the approval is a ``KernelApprovalPrompt``, shown
as a kernel approval by its type, and its answer goes to the kernel call's card: no tool call id is made up for it.

The demo agent runs as a subprocess and asks through the real kernel tools (bridge, MCP, socket); outside a
Jupyter kernel the tools serve this process's namespace, as tests/test_kernel_tools_notebook.py explains.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook._permission import KernelApproval, PermissionRequest
from acp_notebook.magics import pending
from acp_notebook.widgets.permission import KernelApprovalPrompt, PermissionAsker, PermissionPrompt, waiting_prompts
from acp_notebook.widgets.static import turn_forms
from tests.shells import served_namespace
from tests.shells import quiet_comms  # noqa: F401 - fixture

TIMEOUT = 30.0


@pytest.fixture
def namespace(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The namespace the kernel tools serve, with ``z`` set to None (restored afterwards)."""
    served = served_namespace()
    monkeypatch.setitem(served, "z", None)
    return served


@pytest.fixture
def demo(tmp_path: Any) -> Any:
    """start(**kwargs): the demo agent as a subprocess, with the kernel tools on "ask"; closed after the test."""
    started: list[acpnb.Agent] = []

    def start(**kwargs: Any) -> acpnb.Agent:
        agent = acpnb.start([sys.executable, "-m", "acp_notebook.demo"], kernel_tools="ask", cwd=tmp_path,
                            timeout=TIMEOUT, **kwargs)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


def asked_tool_calls(agent: acpnb.Agent) -> list[dict[str, Any]]:
    """The toolCall of each session/request_permission the agent sent."""
    return [e["msg"]["params"]["toolCall"] for e in agent.log
            if e["dir"] == "recv" and e["msg"].get("method") == "session/request_permission"]


@pytest.mark.slow
def test_a_callable_policy_gets_a_kernel_approval_for_run_code_and_a_permission_request_for_the_agents_ask(
        demo: Any, namespace: dict[str, Any], tmp_path: Any) -> None:
    received: list[Any] = []

    def policy(request: Any) -> str | None:
        received.append(request)
        return request.option_for("allow_once")

    (tmp_path / "notes.txt").write_text("owls hoot at night\n", encoding="utf-8")
    agent = demo(permission=policy)
    session = agent.new_session()

    ran = session.prompt("run z = 6 * 7", timeout=TIMEOUT)
    assert namespace["z"] == 42
    (approval,) = received
    (call,) = ran.kernel_calls
    assert isinstance(approval, KernelApproval) and not isinstance(approval, PermissionRequest)
    assert approval.kind == "kernel" and approval.title == "Run code in your kernel"
    assert approval.code == "z = 6 * 7" and approval.call is call and approval.turn is ran
    assert approval.session is session
    assert not hasattr(approval, "tool_call")  # no ACP tool call is made up for it
    assert (call.status, call.decision) == ("done", "allowed")
    # Nothing of it leaks into the turn's ACP records: no permission record, no tool call under the kernel call's id.
    assert ran.permissions == [] and call.id not in ran.tool_calls_by_id

    read = session.prompt("read notes.txt", timeout=TIMEOUT)
    assert "Read notes.txt: 1 line" in read.text
    (request,) = received[1:]
    assert isinstance(request, PermissionRequest) and not isinstance(request, KernelApproval)
    assert request.kind == "permission" and request.turn is read
    # The tool call the policy saw is the one the agent sent, id and all, and the turn recorded that one.
    (sent,) = asked_tool_calls(agent)
    assert request.tool_call == sent and request.title == sent.get("title")
    (record,) = read.permissions
    assert record.tool_call["toolCallId"] == sent["toolCallId"] in read.tool_calls_by_id
    assert record.chosen == request.option_for("allow_once")
    # No request the policy saw carries a tool call id the agent did not send (the old "kernel-N" disguise).
    assert [r.tool_call.get("toolCallId") for r in received if isinstance(r, PermissionRequest)] == \
        [c["toolCallId"] for c in asked_tool_calls(agent)]


@pytest.mark.slow
def test_allow_and_deny_answer_a_kernel_approval_by_its_option_kinds(demo: Any, namespace: dict[str, Any]) -> None:
    denied = demo(permission="deny").new_session().prompt("run z = 1", timeout=TIMEOUT)
    assert namespace["z"] is None and [(c.status, c.decision) for c in denied.kernel_calls] == [("refused", "rejected")]
    allowed = demo(permission="allow").new_session().prompt("run z = 2", timeout=TIMEOUT)
    assert namespace["z"] == 2 and [(c.status, c.decision) for c in allowed.kernel_calls] == [("done", "allowed")]


class Collector:
    """A turn view's stand-in for where a PermissionAsker shows its prompts: keeps each and answers it."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[PermissionPrompt] = []

    def add_prompt(self, prompt: PermissionPrompt) -> None:
        self.prompts.append(prompt)
        snapshot = (prompt.label.value, prompt.static_html(), prompt.pending_text(),
                    pending.listing_text(waiting_prompts()))
        prompt.shown_while_waiting = snapshot  # type: ignore[attr-defined]
        prompt.choose(self.answer)


@pytest.mark.slow
def test_the_cells_prompt_is_a_kernel_approval_by_its_type_and_names_no_tool_call(
        quiet_comms: None, demo: Any, namespace: dict[str, Any]) -> None:
    view = Collector("allow")
    asker = PermissionAsker()
    asker.attach(view)
    turn = demo().new_session().prompt("run z = 7 * 6", timeout=TIMEOUT, permission=asker)
    assert namespace["z"] == 42
    (prompt,) = view.prompts
    (call,) = turn.kernel_calls
    assert isinstance(prompt, KernelApprovalPrompt) and prompt.kernel_call is call and prompt.call_id == ""
    assert prompt.tool_call == {} and prompt.title == "Run code in your kernel" and prompt.code == "z = 7 * 6"
    label, html, text, listed = prompt.shown_while_waiting  # type: ignore[attr-defined]
    for shown in (label, html):
        assert "asks to run code in your kernel:" in shown and "asks permission" not in shown and "7 * 6" in shown
    assert 'class="acpnb-permission acpnb-kernel-approval"' in html and "Waiting for an answer: Allow | Reject" in html
    assert text.startswith("The agent asks to run code in your kernel (waiting for your answer). Asked by agent ")
    assert f"Request {prompt.key}: reopened?" in text and "    z = 7 * 6" in text
    assert "Run code in your kernel (request" in listed and "z = 7 * 6" in listed
    assert "acpnb-kernel-approval" in prompt.widget._dom_classes
    assert "You chose: Allow." in prompt.static_html()


@pytest.mark.slow
def test_the_turn_view_puts_the_answer_on_the_kernel_calls_card(quiet_comms: None, demo: Any,
                                                                 namespace: dict[str, Any]) -> None:
    from acp_notebook.widgets.chat import TurnView

    session = demo().new_session()
    shown: list[PermissionPrompt] = []

    class Answering(PermissionAsker):
        def _show(self, view: Any, prompt: Any) -> None:
            super()._show(view, prompt)
            shown.append(prompt)
            prompt.choose("reject")

    asker = Answering()
    view = TurnView(session.start_turn("run z = 5", permission=asker), asker=asker)
    turn = view.finished.result(TIMEOUT)
    assert namespace["z"] is None
    (prompt,) = shown
    (call,) = turn.kernel_calls
    assert isinstance(prompt, KernelApprovalPrompt) and prompt.kernel_call is call and call.status == "refused"
    plain = turn_forms(view.snapshot())["text/plain"]
    # The answer is said once, on the kernel call's card, not as a decision about a tool call nobody made.
    assert plain.count("permission: You chose: Reject.") == 1, plain
    card = plain.split("Run code in your kernel [kernel, refused]\n", 1)[1].split("\n[fast]", 1)[0]
    assert "    z = 5" in card and "permission: You chose: Reject." in card, plain


def test_the_answer_goes_to_the_kernel_call_even_when_an_agents_tool_call_has_the_same_id(quiet_comms: None,
                                                                                          tmp_path: Any) -> None:
    """Routed by the prompt's type, not by an id: an agent's tool call named like the kernel call gets nothing, and
    the agent's own report of the run_code (merged with the kernel's record into one card) shows the answer once."""
    from acp_notebook import _loop
    from acp_notebook.kernel_link import RUN_OPTIONS
    from acp_notebook.turn import KernelCall, Turn
    from acp_notebook.widgets.chat import TurnView

    with acpnb.start("demo", cwd=tmp_path, kernel_tools="off", timeout=TIMEOUT) as agent:
        session = agent.new_session()
        turn = Turn("run z = 3", session.id, session=session)
        view = TurnView(turn)
        call = KernelCall(id="k1", tool="run_code", arguments={"code": "z = 3"}, code="z = 3", status="asking",
                          request="1:1")

        async def record() -> None:
            turn.apply({"sessionUpdate": "tool_call", "toolCallId": "k1", "title": "Read notes.txt", "kind": "read",
                        "status": "completed"})
            turn.apply({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "mcp__kernel__run_code",
                        "kind": "execute", "status": "pending", "rawInput": {"code": "z = 3"}})
            turn.record_kernel(call)

        _loop.run_sync(record(), TIMEOUT)
        prompt = KernelApprovalPrompt(KernelApproval(session, turn, call, "z = 3", [dict(o) for o in RUN_OPTIONS]))
        view.add_prompt(prompt)
        prompt.choose("allow")
        forms = turn_forms(view.snapshot())
        for mime in ("text/plain", "text/markdown"):
            assert forms[mime].count("You chose: Allow.") == 1, forms[mime]
        html = forms["text/html"]
        assert html.count("You chose: Allow.") == 1 and "acpnb-kernel-merged" in html, html
        read_card = html[html.index("Read notes.txt"):]
        assert "You chose" not in read_card.split("acpnb-kernel-call")[0], html

        async def finish() -> None:
            turn.finish({"stopReason": "end_turn"}, None)

        _loop.run_sync(finish(), TIMEOUT)
        assert view.finished.result(TIMEOUT) is turn
