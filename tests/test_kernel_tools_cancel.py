"""Cancelling while run_code waits for the user's Allow (issue 35, point 1): the turn ends ``cancelled`` (not
an internal error of the agent), the question is withdrawn on both sides, and the session goes on.

Three ways the wait ends without an answer, each through the real client and the demo agent (in memory and
as a subprocess: the demo's MCP client talks to the kernel tools over the real bridge):
- the user cancels the turn (Cancel turn, or a kernel interrupt: both call ``session.cancel``);
- the agent cancels its own MCP call (``notifications/cancelled``, sent by the MCP SDK when its caller gives up);
- and the session goes on: the next turn's run_code is asked again and runs once allowed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook.kernel_link import WITHDRAWN, WITHDRAWN_BY_AGENT
from acp_notebook.widgets.kernel import kernel_call_text
from acp_notebook.widgets.permission import KernelApprovalPrompt, PermissionPrompt
from tests.shells import served_namespace

TIMEOUT = 30.0


@pytest.fixture(params=["memory", "subprocess"])
def demo_spec(request):
    from acp_notebook.demo.agent import DemoAgent

    return (lambda: DemoAgent()) if request.param == "memory" else (
        lambda: [sys.executable, "-m", "acp_notebook.demo"])


class Prompts:
    """A permission policy that shows each run_code approval as the cell would (a KernelApprovalPrompt) and nobody
    clicks it (until the test does)."""

    def __init__(self) -> None:
        self.shown: list[PermissionPrompt] = []
        self.asked = threading.Event()

    def __call__(self, request: Any) -> concurrent.futures.Future[str | None]:
        assert isinstance(request, acpnb.KernelApproval), request  # run_code asks as itself, not as a permission
        prompt = KernelApprovalPrompt(request)
        self.shown.append(prompt)
        self.asked.set()
        return prompt.future


@pytest.mark.slow
def test_cancelling_the_turn_while_run_code_waits_ends_it_cancelled_and_withdraws_the_question(demo_spec, tmp_path):
    namespace = served_namespace()
    namespace.pop("cancel_probe", None)
    prompts = Prompts()
    agent = acpnb.start(demo_spec(), kernel_tools="ask", permission=prompts, timeout=TIMEOUT, cwd=tmp_path)
    try:
        session = agent.new_session()
        turn = session.start_turn("run cancel_probe = 1")
        assert prompts.asked.wait(TIMEOUT)
        session.cancel()
        turn.future.result(TIMEOUT)  # no RpcError: the agent ended its turn as cancelled
        assert (turn.status, turn.stop_reason) == ("cancelled", "cancelled")
        (call,) = turn.kernel_calls
        assert (call.status, call.decision) == ("withdrawn", WITHDRAWN)
        assert "withdrawn" in kernel_call_text(call)
        (prompt,) = prompts.shown
        concurrent.futures.wait([prompt.future], TIMEOUT)  # withdrawn on the loop as the question's wait ends
        assert prompt.decision == "Withdrawn: the turn was cancelled."
        assert [c.status for c in turn.tool_calls] == ["failed"]  # the agent's own card of the call
        assert "cancel_probe" not in namespace

        # The session goes on: asked again, allowed, run.
        prompts.asked.clear()
        second = session.start_turn("run cancel_probe = 2")
        assert prompts.asked.wait(TIMEOUT)
        prompts.shown[-1].choose("allow")
        # Outside a kernel the tools' work runs on this thread while it waits in one of our blocking calls.
        acpnb._loop.wait(second.future, TIMEOUT)
        assert second.stop_reason == "end_turn" and namespace.get("cancel_probe") == 2
        assert [(c.status, c.decision) for c in second.kernel_calls] == [("done", "allowed")]
    finally:
        namespace.pop("cancel_probe", None)
        agent.close()


def test_the_agent_cancelling_its_call_withdraws_the_question_it_raised(tmp_path):
    """An agent that gives up on its tools/call (MCP notifications/cancelled) takes its question back: the prompt
    is withdrawn, not left with live buttons, and the call says so."""
    from acp_notebook.demo.agent import DemoAgent
    from acp_notebook.kernel_tools.client import open_kernel_tools

    prompts = Prompts()
    never = concurrent.futures.Future()
    agent = acpnb.start(DemoAgent(), kernel_tools="ask", permission=prompts, elicitation=lambda _request: never,
                        timeout=TIMEOUT, cwd=tmp_path)
    try:
        session = agent.new_session()
        waiting = session.start_turn("ask me something")  # a turn that waits on its form: a turn is running
        entry = session.kernel_tools.entry

        async def call_then_give_up() -> None:
            async with open_kernel_tools(entry) as client:
                call = asyncio.ensure_future(client.call_tool("run_code", {"code": "given_up = 1"}))
                asked = asyncio.get_running_loop().run_in_executor(None, prompts.asked.wait, TIMEOUT)
                await asyncio.wait({call, asked}, return_when=asyncio.FIRST_COMPLETED)
                assert prompts.asked.is_set(), call
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call

        withdrawn = threading.Event()  # the call's record follows on the loop once the cancellation reaches it
        unobserve = waiting.observe(lambda event: event.kind == "kernel" and event.data.status == "withdrawn"
                                    and withdrawn.set())
        asyncio.run(asyncio.wait_for(call_then_give_up(), TIMEOUT))
        (prompt,) = prompts.shown
        concurrent.futures.wait([prompt.future], TIMEOUT)
        assert prompt.decision == "Withdrawn: the agent cancelled its request."  # no live buttons left
        assert withdrawn.wait(TIMEOUT)
        unobserve()
        (call,) = waiting.kernel_calls
        assert (call.status, call.decision) == ("withdrawn", WITHDRAWN_BY_AGENT)
        session.cancel()
        assert waiting.future.result(TIMEOUT).stop_reason == "cancelled"
    finally:
        agent.close()
