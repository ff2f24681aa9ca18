"""The kernel tools in a real ipykernel: the agent's MCP client (here, the test process) reaches the
kernel's namespace through the bridge while the kernel is idle, while a cell awaits, and while a
cell blocks in one of our waits; run_code's policy, timeout, interrupt and refusals; a busy kernel.

Cells and the code the tools run signal the test through FIFOs (a blocking open is the event), so
nothing here sleeps to wait.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
from tests.kernels import start_kernel  # noqa: E402
pytest.importorskip("ipykernel")
pytest.importorskip("pandas")

from acp_notebook import _loop  # noqa: E402
from acp_notebook.kernel_tools.client import open_kernel_tools  # noqa: E402
from test_magics_kernel import Frontend  # noqa: E402

pytestmark = pytest.mark.kernel

TIMEOUT = 60.0
SETUP = """
import json as _json
from acp_notebook import _loop as _acp_loop
from acp_notebook.kernel_tools import KernelTools as _KernelTools
_kt = _KernelTools(policy="allow", run_timeout=30)
_entry = _acp_loop.run_sync(_kt.start(), 30)
print(_json.dumps(_entry))
"""

# An agent inside the kernel itself: an MCP client on the kernel's background loop, through the bridge.
AGENT_IN_KERNEL = """
from acp_notebook.kernel_tools.client import open_kernel_tools as _open_kernel_tools
async def _agent(*calls):
    async with _open_kernel_tools(_entry) as session:
        return [await session.call_tool(tool, arguments) for tool, arguments in calls]
"""


class Kernel:
    """A kernel driven over the Jupyter protocol; cells can be sent and collected separately."""

    def __init__(self, manager: Any, client: Any) -> None:
        self.manager, self.client = manager, client

    def send(self, code: str) -> str:
        return self.client.execute(code)

    def collect(self, msg_id: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The cell's reply status, stdout, errors and display data once it is idle."""
        cell = Frontend(self.client, self.manager).collect(msg_id, timeout=timeout)
        return {"stdout": cell.stdout, "errors": cell.errors, "displays": cell.displays,
                "status": cell.reply["status"]}

    def run(self, code: str) -> dict[str, Any]:
        cell = self.collect(self.send(code))
        assert cell["status"] == "ok", cell["errors"]
        return cell


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    manager, client = start_kernel(tmp_path)
    try:
        yield Kernel(manager, client)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


@pytest.fixture
def entry(kernel: Kernel) -> dict[str, Any]:
    return json.loads(kernel.run(SETUP)["stdout"].strip().splitlines()[-1])


def call(entry: dict[str, Any], tool: str, arguments: dict[str, Any] | None = None) -> Any:
    async def go() -> Any:
        async with open_kernel_tools(entry) as session:
            return await session.call_tool(tool, arguments or {})

    return _loop.run_sync(go(), TIMEOUT)


def texts(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


class Fifo:
    """A named pipe: one side blocks in open until the other side comes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)

    def received(self, timeout: float = TIMEOUT) -> str:
        """What the kernel wrote, once it has (the open blocks until it writes)."""
        got: list[str] = []
        done = threading.Event()

        def read() -> None:
            with open(self.path) as pipe:
                got.append(pipe.read())
            done.set()

        threading.Thread(target=read, daemon=True).start()
        assert done.wait(timeout), f"nothing came through {self.path} within {timeout} s"
        return got[0]

    def release(self) -> None:
        with open(self.path, "w") as pipe:
            pipe.write("go")


def test_the_tools_see_and_change_the_users_namespace(kernel: Kernel, entry: dict[str, Any]) -> None:
    kernel.run("import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south'], 'units': [12, None]})")
    listing = call(entry, "list_variables")
    assert [v["name"] for v in listing.structured_content["variables"]] == ["pd", "sales"][1:]
    assert "sales: pandas.DataFrame, shape 2x2" in texts(listing)
    inspected = call(entry, "inspect_variable", {"name": "sales"})
    assert "- region: " in texts(inspected) and "- units: float64, 1" in texts(inspected)
    ran = call(entry, "run_code", {"code": "total_units = sales['units'].sum()\nprint('total', total_units)"})
    assert not ran.is_error and texts(ran) == "total 12.0\n"
    assert kernel.run("print(total_units * 2)")["stdout"] == "24.0\n"
    history = call(entry, "notebook_history", {"n": 3})
    assert "print(total_units * 2)" in texts(history) and "sales = pd.DataFrame" in texts(history)


def test_run_code_is_refused_under_read_only_and_exit_never_ends_the_kernel(kernel: Kernel,
                                                                            entry: dict[str, Any]) -> None:
    kernel.run("_kt.policy = 'read-only'")
    refused = call(entry, "run_code", {"code": "made = 1"})
    assert refused.is_error and texts(refused).startswith("refused: the kernel tools are read-only")
    kernel.run("_kt.policy = 'allow'")
    for code in ("exit()", "quit()", "import sys; sys.exit()", "raise SystemExit", "get_ipython().ask_exit()"):
        answer = call(entry, "run_code", {"code": code})
        assert texts(answer).startswith("refused: run_code never ends"), code
    assert kernel.run("print('still here', 'made' in dir())")["stdout"] == "still here False\n"


def test_output_figures_and_secrets(kernel: Kernel, entry: dict[str, Any]) -> None:
    kernel.run("SERVICE_TOKEN = 'tok-5f3a9b2c7d1e'\nimport matplotlib\nmatplotlib.use('agg')")
    code = ("import matplotlib.pyplot as plt\nplt.plot([1, 4, 2])\nprint('token', SERVICE_TOKEN)\n"
            "from IPython.display import display, Markdown\ndisplay(Markdown('**shown**'))\n{'t': SERVICE_TOKEN}")
    ran = call(entry, "run_code", {"code": code})
    assert not ran.is_error
    kinds = [block.type for block in ran.content]
    assert "image" in kinds and "tok-5f3a9b2c7d1e" not in texts(ran)
    assert "token ***SERVICE_TOKEN***" in texts(ran) and "<IPython.core.display.Markdown object>" in texts(ran)
    masked = call(entry, "inspect_variable", {"name": "SERVICE_TOKEN"})
    assert "tok-5f3a9b2c7d1e" not in texts(masked) and "***" in texts(masked)
    # Nothing the agent's code printed went to the user's cells.
    assert kernel.run("print('after')")["stdout"] == "after\n"


def test_a_tool_call_made_while_a_cell_blocks_on_our_wait_runs_instead_of_deadlocking(
        kernel: Kernel, entry: dict[str, Any]) -> None:
    cell = kernel.run(AGENT_IN_KERNEL + (
        "_ran, _listed = _acp_loop.run_sync(_agent(('run_code', {'code': 'inside = 5'}), ('list_variables', {})), 60)\n"
        "print(_ran.is_error, inside, [v['name'] for v in _listed.structured_content['variables']])"))
    assert cell["stdout"] == "False 5 ['inside']\n"


def test_a_tool_call_made_while_a_cell_awaits_runs_on_the_kernel_loop(kernel: Kernel, entry: dict[str, Any]) -> None:
    cell = kernel.run(AGENT_IN_KERNEL + (
        "(_ran,) = await _acp_loop.run_async(_agent(('run_code', {'code': 'awaited = 7\\nawaited * 6'})), 60)\n"
        "print(_ran.is_error, awaited, _ran.content[0].text.strip())"))
    assert cell["stdout"] == "False 7 42\n"


def test_code_that_never_returns_is_stopped_by_the_timeout(kernel: Kernel, entry: dict[str, Any]) -> None:
    kernel.run("_kt.run_timeout = 1.5")
    for code in ("while True:\n    pass", "import time\nprint('napping')\ntime.sleep(3600)"):
        answer = call(entry, "run_code", {"code": code})
        assert answer.is_error and texts(answer).endswith("stopped: the code ran over the 1.5 s limit"), code
    assert "napping" in texts(answer)
    assert kernel.run("print('alive')")["stdout"] == "alive\n"


def test_a_kernel_interrupt_stops_run_code(kernel: Kernel, entry: dict[str, Any], tmp_path: Path) -> None:
    started = Fifo(tmp_path / "started")
    result: list[Any] = []
    code = f"open({str(started.path)!r}, 'w').write('running')\nwhile True:\n    pass"
    caller = threading.Thread(target=lambda: result.append(call(entry, "run_code", {"code": code})), daemon=True)
    caller.start()
    assert started.received() == "running"
    kernel.manager.interrupt_kernel()
    caller.join(TIMEOUT)
    (answer,) = result
    assert answer.is_error and texts(answer).endswith("interrupted: the user interrupted the kernel")
    assert kernel.run("print('alive')")["stdout"] == "alive\n"


def test_while_a_users_cell_computes_the_tools_wait_then_say_the_kernel_is_busy(
        kernel: Kernel, entry: dict[str, Any], tmp_path: Path) -> None:
    go = Fifo(tmp_path / "go")
    kernel.run("_kt.run_timeout = 1")
    busy_cell = kernel.send(f"open({str(go.path)!r}).read()\nafter_the_wait = 1")
    answer = call(entry, "list_variables")
    assert answer.is_error and texts(answer).startswith("the kernel is busy running a cell: waited 1 s")
    go.release()
    assert kernel.collect(busy_cell)["status"] == "ok"
    assert "after_the_wait" in texts(call(entry, "list_variables"))


def test_two_kernel_tools_in_one_kernel_keep_their_own_channel_and_policy(kernel: Kernel,
                                                                         entry: dict[str, Any]) -> None:
    second = json.loads(kernel.run(
        "_kt2 = _KernelTools(policy='read-only')\n"
        "print(_json.dumps(_acp_loop.run_sync(_kt2.start(), 30)))")["stdout"].strip())
    assert second["env"] != entry["env"]
    assert call(second, "run_code", {"code": "x = 1"}).is_error
    assert not call(entry, "run_code", {"code": "x = 1"}).is_error
    kernel.run("_acp_loop.run_sync(_kt2.close(), 30)")
    assert not Path(second["env"][0]["value"]).exists()
    assert "x: int" in texts(call(entry, "list_variables"))


def test_a_kernel_restart_during_a_call_ends_the_call_and_the_bridge(kernel: Kernel, entry: dict[str, Any],
                                                                    tmp_path: Path) -> None:
    started = Fifo(tmp_path / "started")
    errlog_path = tmp_path / "bridge.err"
    code = f"open({str(started.path)!r}, 'w').write('running')\nwhile True:\n    pass"

    async def go() -> BaseException | None:
        with errlog_path.open("w") as errlog:
            async with open_kernel_tools(entry, errlog=errlog) as session:
                call = asyncio.ensure_future(session.call_tool("run_code", {"code": code}))
                loop = asyncio.get_running_loop()
                assert await loop.run_in_executor(None, started.received) == "running"
                await loop.run_in_executor(None, lambda: kernel.manager.restart_kernel(now=True))
                try:
                    await asyncio.wait_for(call, TIMEOUT)
                except Exception as exc:  # noqa: BLE001 - the error is what this test looks at
                    return exc
                return None

    assert _loop.run_sync(go(), TIMEOUT * 2) is not None, "the call answered although its kernel restarted"
    assert errlog_path.read_text().strip().splitlines() == [
        "acp-notebook kernel bridge: the kernel's channel closed (the kernel restarted or its session ended)"]


def test_an_agents_tool_calls_run_while_a_cell_blocks_in_session_prompt_or_awaits_aprompt(kernel: Kernel) -> None:
    """The demo agent (a subprocess) calls run_code through its bridge during the turn of a cell that waits
    for that very turn: blocking in ``session.prompt()``, then awaiting ``session.aprompt()``."""
    kernel.run("import acp_notebook as acpnb\n"
               "agent = acpnb.start('demo', kernel_tools='allow')\n"
               "session = agent.new_session()")
    blocking = kernel.run("turn = session.prompt('run made_in_turn = 3')\nprint(made_in_turn, turn.stop_reason)")
    assert blocking["stdout"] == "3 end_turn\n"
    awaiting = kernel.run("turn = await session.aprompt('compute made_in_turn * 14')\nprint('42' in turn.text)")
    assert awaiting["stdout"] == "True\n"
    kernel.run("agent.close()")


def test_the_tools_still_reach_the_kernel_after_nest_asyncio_apply(kernel: Kernel, entry: dict[str, Any]) -> None:
    pytest.importorskip("nest_asyncio")
    kernel.run("import nest_asyncio\nnest_asyncio.apply()\nbefore = 1")
    assert "before: int" in texts(call(entry, "list_variables"))  # the idle kernel's loop, patched
    cell = kernel.run(AGENT_IN_KERNEL + (
        "import asyncio\n"
        "(_ran,) = asyncio.get_event_loop().run_until_complete(\n"
        "    _acp_loop.run_async(_agent(('run_code', {'code': 'nested = before + 1'})), 60))\n"
        "print(_ran.is_error, nested)"))
    assert cell["stdout"] == "False 2\n"
