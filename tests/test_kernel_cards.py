"""One card per kernel call (issue 35, point 3): the agent's tool_call and the kernel's record of the call drawn as
one card with the arguments, the decision, the result and images as images; calls matched by identity (each MCP
request its own record; each paired with the agent's tool_call by name and rawInput, in order), with two
identical calls in flight.

The kernel side is the real server over the real bridge (the demo agent's MCP client, or the MCP SDK's client
here); outside a kernel the tools serve ``__main__`` and run their work on this thread while it waits in a blocking
call of ours.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook.turn import KernelCall, ToolCall
from acp_notebook.widgets.chat import TurnView
from acp_notebook.widgets.kernel import pair_kernel_calls
from acp_notebook.widgets.static import turn_forms
from tests.shells import served_namespace

TIMEOUT = 30.0


@pytest.fixture
def main_ns(monkeypatch):
    namespace = served_namespace()

    def put(**values: Any) -> dict[str, Any]:
        for name, value in values.items():
            monkeypatch.setitem(namespace, name, value)
        return namespace

    return put


def demo(tmp_path, **options: Any) -> acpnb.Agent:
    from acp_notebook.demo.agent import DemoAgent

    return acpnb.start(DemoAgent(), timeout=TIMEOUT, cwd=tmp_path, **options)


def finished_view(turn: Any) -> TurnView:
    view = TurnView(turn)
    view.finished.result(TIMEOUT)
    return view


# --- matching ------------------------------------------------------------------------------------------
def tool_call(call_id: str, name: str | None, raw: Any, title: str = "") -> ToolCall:
    return ToolCall(id=call_id, title=title, name=name, raw_input=raw, status="in_progress")


def test_identical_calls_pair_one_to_one_in_order_and_a_late_tool_call_pairs_when_it_comes():
    first, second = (KernelCall(id=f"kernel-{n}", tool="run_code", arguments={"code": "x = 1"}, request=f"1:{n}")
                     for n in (1, 2))
    paired: dict[str, str] = {}
    calls = [tool_call("a", "mcp__kernel__run_code", {"code": "x = 1"})]
    assert pair_kernel_calls(calls, [first, second], paired) == {"a": first}  # the second waits for its own
    calls.append(tool_call("b", "mcp__kernel__run_code", {"code": "x = 1"}))
    assert pair_kernel_calls(calls, [first, second], paired) == {"a": first, "b": second}
    assert pair_kernel_calls(calls, [first, second], paired) == {"a": first, "b": second}  # stable


def test_matching_reads_each_agents_naming_and_the_raw_input():
    listing = KernelCall(id="k1", tool="list_variables", arguments={})
    inspect = KernelCall(id="k2", tool="inspect_variable", arguments={"name": "sales"})
    calls = [tool_call("read", "read_text_file", None, "Read data.csv"),  # not the kernel's
             tool_call("other", "mcp__kernel__inspect_variable", {"name": "costs"}),  # another variable
             tool_call("gem", None, None, "list_variables (kernel MCP Server)"),  # Gemini CLI: a title, no rawInput
             tool_call("oc", "kernel_inspect_variable", {"name": "sales"})]  # OpenCode's name
    assert pair_kernel_calls(calls, [listing, inspect], {}) == {"gem": listing, "oc": inspect}
    # A tool whose name holds another's is not taken for it.
    assert pair_kernel_calls([tool_call("x", "mcp__kernel__run_code_fast", {})],
                             [KernelCall(id="k", tool="run_code", arguments={})], {}) == {}


def test_two_identical_run_code_calls_in_flight_keep_their_own_answers(tmp_path, main_ns):
    """Same session, same code, both waiting for the user at once: the one rejected stays rejected, the one
    allowed runs (matched by code, each got the other's status and output)."""
    from acp_notebook.kernel_tools.client import open_kernel_tools

    namespace = main_ns(twin_runs=0)
    asked: list[concurrent.futures.Future[str | None]] = []
    both_asked = threading.Event()

    def policy(_request: Any) -> concurrent.futures.Future[str | None]:
        answer: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        asked.append(answer)
        if len(asked) == 2:
            both_asked.set()
        return answer

    never: concurrent.futures.Future[Any] = concurrent.futures.Future()
    agent = demo(tmp_path, kernel_tools="ask", permission=policy, elicitation=lambda _r: never)
    try:
        session = agent.new_session()
        waiting = session.start_turn("ask me anything")  # a running turn the questions belong to
        code = "twin_runs += 1\nprint('run', twin_runs)"

        async def two_calls() -> list[Any]:
            import asyncio

            async with open_kernel_tools(session.kernel_tools.entry) as client:
                calls = [asyncio.ensure_future(client.call_tool("run_code", {"code": code})) for _ in range(2)]
                await asyncio.get_running_loop().run_in_executor(None, both_asked.wait, TIMEOUT)
                asked[0].set_result("reject")  # the first asked is rejected, the second allowed
                asked[1].set_result("allow")
                return list(await asyncio.gather(*calls))

        results = _loop.run_sync(two_calls(), TIMEOUT)
        assert namespace["twin_runs"] == 1
        records = list(waiting.kernel_calls)
        assert len(records) == 2 and len({r.request for r in records}) == 2 and all(r.request for r in records)
        assert sorted((r.status, r.decision) for r in records) == [("done", "allowed"), ("refused", "rejected")]
        ran = next(r for r in records if r.status == "done")
        assert ran.outputs == [{"type": "text", "text": "run 1\n"}]
        assert sorted(bool(r.is_error) for r in results) == [False, True]
        session.cancel()
        waiting.future.result(TIMEOUT)
    finally:
        agent.close()


# --- the card --------------------------------------------------------------------------------------
def test_each_call_is_one_card_with_its_arguments_decision_and_result(tmp_path, main_ns):
    main_ns(sales_total=1491, card_y=None)
    agent = demo(tmp_path, kernel_tools="allow")
    try:
        session = agent.new_session()
        turn = session.prompt("what is in sales_total?", timeout=TIMEOUT)
        view = finished_view(turn)
        live = view.tools.value
        assert live.count("acpnb-kernel-merged") == 2 and view.kernel.value == ""  # no second card per call
        assert "inspect_variable(name=&#x27;sales_total&#x27;)" in live  # the arguments
        assert "the agent&#x27;s call: kernel: inspect_variable" in live and "1491" in live  # the result, once here
        assert "style=" not in live.split("acpnb-card-head", 1)[0]  # the live card's look is the stylesheet's
        saved = turn_forms(view.saved_snapshot())["text/html"]
        assert saved.count("acpnb-kernel-merged") == 2 and 'class="acpnb-kernel-call acpnb-l-done acpnb-kernel-merged" style="' in saved

        ran = session.prompt("run card_y = 6 * 7", timeout=TIMEOUT)
        card = finished_view(ran).tools.value
        assert "decision: allowed by the policy (kernel_tools = &#x27;allow&#x27;)" in card
        agent.kernel_tools = "read-only"
        refused = session.prompt("run card_y = 0", timeout=TIMEOUT)
        card = finished_view(refused).tools.value
        assert "refused by the policy (kernel_tools = &#x27;read-only&#x27;)" in card and "refused" in card
    finally:
        agent.close()


def test_a_figure_the_agent_inspected_shows_as_the_image_it_saw(tmp_path, main_ns):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots()
    axes.bar(["north", "south"], [3, 5])
    main_ns(fig=figure)
    agent = demo(tmp_path, kernel_tools="read-only")
    try:
        turn = agent.new_session().prompt("inspect fig", timeout=TIMEOUT)
        inspected = turn.kernel_calls[-1]
        assert inspected.tool == "inspect_variable" and any(b["type"] == "image" for b in inspected.outputs)
        view = finished_view(turn)
        assert '<img class="acpnb-kernel-image" src="data:image/png;base64,' in view.tools.value
        assert "[an image" not in view.tools.value  # the agent's own words for it are not what is shown
        saved = turn_forms(view.saved_snapshot())
        assert 'src="data:image/png;base64,' in saved["text/html"] and "[an image, image/png]" in saved["text/plain"]
    finally:
        plt.close(figure)
        agent.close()
