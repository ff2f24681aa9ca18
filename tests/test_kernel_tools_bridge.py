"""The kernel tools over their real channel: the bridge started as its own process from the
mcpServers entry, driven by the official MCP client; refusals of the bridge; the policy.

The tools here serve a namespace dict of the test's; the kernel thread is the test's main
thread, which runs the tools' work while it waits in ``_loop.run_sync`` (the pump's blocking
path). Kernel behaviour proper is in test_kernel_tools_kernel.py.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from acp_notebook import _loop
from acp_notebook.kernel_tools import POLICIES, KernelToolEvent, KernelTools, parse_policy, start_kernel_tools
from acp_notebook.kernel_tools.client import entry_environment, open_kernel_tools

pd = pytest.importorskip("pandas")

TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[1]


def run(coro: Any, timeout: float = TIMEOUT) -> Any:
    return _loop.run_sync(coro, timeout)


@pytest.fixture
def namespace() -> dict[str, Any]:
    return {"df": pd.DataFrame({"city": ["Oslo", "Lima", None], "temp": [3.5, 19.0, 11.2]}),
            "numbers": [1, 2, 3], "MY_API_KEY": "sk-live-0123456789abcdef", "os": os, "_hidden": 1,
            "greeting": "hello"}


@pytest.fixture
def events() -> list[KernelToolEvent]:
    return []


@pytest.fixture
def tools(namespace: dict[str, Any], events: list[KernelToolEvent]) -> Iterator[KernelTools]:
    kt = KernelTools(policy="allow", on_event=events.append, run_timeout=20.0, namespace=namespace)
    run(kt.start())
    try:
        yield kt
    finally:
        run(kt.close())


async def wait_until(condition: Any, timeout: float = TIMEOUT) -> None:
    """Poll ``condition`` (a file another process writes has no event to wait on) until true, or fail."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting for the bridge"
        await asyncio.sleep(0.02)


def bridge_env(entry: dict[str, Any] | None, **changes: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ACPNB_KERNEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if entry is not None:
        env.update(entry_environment(entry))
    env.update(changes)
    return env


def run_bridge(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acp_notebook.kernel_tools.bridge"], env=env, input="",
                          capture_output=True, text=True, timeout=TIMEOUT)


def call_all(entry: dict[str, Any], calls: list[tuple[str, dict[str, Any]]], errlog: Any = None) -> Any:
    async def go() -> Any:
        async with open_kernel_tools(entry, errlog=errlog) as session:
            listed = await session.list_tools()
            answers = [await session.call_tool(name, arguments) for name, arguments in calls]
            return listed, answers

    return run(go())


def texts(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_the_entry_is_an_acp_stdio_server_that_runs_the_bridge(tools: KernelTools) -> None:
    entry = tools.entry
    assert entry is not None and entry["name"] == "kernel" and entry["command"] == sys.executable
    assert entry["args"] == ["-m", "acp_notebook.kernel_tools.bridge"]
    env = {item["name"]: item["value"] for item in entry["env"]}
    socket_path = Path(env["ACPNB_KERNEL_CHANNEL"])
    assert socket_path.is_socket() and len(env["ACPNB_KERNEL_TOKEN"]) >= 32
    assert socket_path.parent.stat().st_mode & 0o777 == 0o700


def test_the_mcp_client_lists_and_calls_every_tool_through_the_bridge(tools: KernelTools,
                                                                      events: list[KernelToolEvent]) -> None:
    listed, answers = call_all(tools.entry, [
        ("list_variables", {}),
        ("inspect_variable", {"name": "df", "rows": 2}),
        ("run_code", {"code": "made_here = len(df) * 10\nprint('made', made_here)\nmade_here + 1"}),
        ("notebook_history", {"n": 3}),
        ("propose_cell", {"code": "df.plot()", "explanation": "A quick look."}),
    ])
    assert [tool.name for tool in listed.tools] == ["list_variables", "inspect_variable", "run_code",
                                                   "notebook_history", "propose_cell"]
    listing, inspected, ran, history, proposed = answers
    assert not listing.is_error and "df: pandas.DataFrame, shape 3x2" in texts(listing)
    names = [entry["name"] for entry in listing.structured_content["variables"]]
    assert names == ["df", "numbers", "MY_API_KEY", "greeting"]  # no modules, no _names
    assert "- city: " in texts(inspected) and "- temp: float64, 0" in texts(inspected) and "head(2)" in texts(inspected)
    assert not ran.is_error and texts(ran) == "made 30\n31\n"
    if InteractiveShell.initialized():  # an earlier test in this worker made a shell: its history, whatever it holds
        shown = texts(history)
        assert not history.is_error and ("No cells have run yet." in shown or shown.startswith("In ["))
    else:  # a plain process has no history
        assert history.is_error and "needs IPython" in texts(history)
    assert not proposed.is_error and "not run" in texts(proposed)
    kinds = [(event.kind, event.tool) for event in events]
    assert ("run_code_started", "run_code") in kinds and ("run_code_finished", "run_code") in kinds
    proposal = next(event for event in events if event.kind == "propose_cell")
    assert proposal.code == "df.plot()" and proposal.explanation == "A quick look."
    finished = next(event for event in events if event.kind == "run_code_finished")
    assert finished.outputs == [{"type": "text", "text": "made 30\n31\n"}] and finished.error is None


def test_run_code_defines_variables_in_the_namespace(tools: KernelTools, namespace: dict[str, Any]) -> None:
    _listed, (answer,) = call_all(tools.entry, [("run_code", {"code": "total = df['temp'].sum()"})])
    assert not answer.is_error and texts(answer) == "(no output)"
    assert namespace["total"] == pytest.approx(33.7)


def test_tool_errors_name_what_went_wrong(tools: KernelTools) -> None:
    _listed, answers = call_all(tools.entry, [
        ("inspect_variable", {"name": "dff"}),
        ("inspect_variable", {}),
        ("run_code", {"code": "1 / 0"}),
        ("run_code", {"code": "def broken(:\n  pass"}),
        ("run_code", {"code": "exit()"}),
        ("run_code", {"code": "import sys\nsys.exit(3)"}),
        ("run_code", {"code": "raise SystemExit(1)"}),
        ("run_code", {"code": "import os\nend = os._exit\nend(0)"}),
        ("no_such_tool", {}),
    ])
    missing, no_name, division, syntax, exit_call, sys_exit, raised_exit, hidden_exit, unknown = answers
    assert all(answer.is_error for answer in answers)
    assert "No variable named 'dff'" in texts(missing) and "Close names: df" in texts(missing)
    assert "needs the argument 'name'" in texts(no_name)
    assert "ZeroDivisionError" in texts(division) and '"<agent code>", line 1' in texts(division)
    assert "SyntaxError" in texts(syntax)
    for refused in (exit_call, sys_exit, raised_exit, hidden_exit):
        assert texts(refused).startswith("refused: run_code never ends the kernel")
    assert "No tool named 'no_such_tool'" in texts(unknown)


def test_every_call_is_reported_answered_with_its_error_a_crash_or_a_cancel(tools: KernelTools,
                                                                            events: list[KernelToolEvent]) -> None:
    def answered() -> list[tuple[str, str | None]]:
        return [(e.tool, e.error) for e in events if e.kind == "tool_answered"]

    run(tools.call("list_variables", {}))
    run(tools.call("inspect_variable", {"name": "dff"}))
    assert answered()[0] == ("list_variables", None)
    assert answered()[1][0] == "inspect_variable" and answered()[1][1].startswith("No variable named 'dff'")

    async def crash(_arguments: dict[str, Any]) -> Any:
        raise RuntimeError("a bug in a tool")

    async def stuck(_arguments: dict[str, Any]) -> Any:
        started.set()
        await asyncio.Event().wait()

    tools._tool_list_variables = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        run(tools.call("list_variables", {}))
    assert answered()[-1] == ("list_variables", "failed: RuntimeError: a bug in a tool")
    tools._tool_notebook_history = stuck  # type: ignore[method-assign]
    started = asyncio.Event()

    async def give_up() -> None:
        call = asyncio.ensure_future(tools.call("notebook_history", {}))
        await started.wait()  # the call runs; then the caller gives up on it
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    run(give_up())
    assert answered()[-1] == ("notebook_history", "stopped: the tool call was cancelled")


def test_secrets_are_masked_in_inspections_and_outputs(tools: KernelTools) -> None:
    _listed, answers = call_all(tools.entry, [
        ("inspect_variable", {"name": "MY_API_KEY"}),
        ("run_code", {"code": "print('key is', MY_API_KEY)"}),
        ("run_code", {"code": "{'k': MY_API_KEY}"}),
    ])
    for answer in answers:
        assert "sk-live-0123456789abcdef" not in texts(answer)
    assert "***" in texts(answers[0]) and "***MY_API_KEY***" in texts(answers[1])


def test_images_come_back_as_png(tools: KernelTools, namespace: dict[str, Any]) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(2, 2))
    figure.add_subplot().plot([1, 3, 2])
    namespace["fig"] = figure
    _listed, (inspected,) = call_all(tools.entry, [("inspect_variable", {"name": "fig"})])
    image = next(block for block in inspected.content if block.type == "image")
    assert image.mime_type == "image/png" and base64.b64decode(image.data).startswith(b"\x89PNG")


def test_read_only_refuses_run_code_and_ask_asks(tools: KernelTools, namespace: dict[str, Any]) -> None:
    asked: list[str] = []
    verdicts = iter([False, True])

    async def ask(request: Any) -> bool:
        asked.append(request.code)
        return next(verdicts)

    tools.policy = "read-only"
    _listed, (refused, listed) = call_all(tools.entry, [("run_code", {"code": "a = 1"}), ("list_variables", {})])
    assert refused.is_error and texts(refused).startswith("refused: the kernel tools are read-only")
    assert 'AcpMagics.kernel_tools = "allow"' in texts(refused) and not listed.is_error
    tools.policy, tools.ask = "ask", ask
    _listed, (rejected, allowed) = call_all(tools.entry, [("run_code", {"code": "b = 1"}),
                                                          ("run_code", {"code": "c = 2"})])
    assert rejected.is_error and texts(rejected) == "the user rejected running this code"
    assert not allowed.is_error and asked == ["b = 1", "c = 2"]
    assert "a" not in namespace and "b" not in namespace and namespace["c"] == 2


def test_policies_parse_with_a_clear_error() -> None:
    assert POLICIES == ("ask", "read-only", "allow", "off")
    assert [parse_policy(word) for word in ("ASK", " read_only ", "readonly", "allow", "off")] == \
        ["ask", "read-only", "read-only", "allow", "off"]
    with pytest.raises(ValueError, match="must be one of 'ask', 'read-only', 'allow', 'off', not 'sometimes'"):
        parse_policy("sometimes")
    with pytest.raises(ValueError):
        KernelTools(policy="never")
    assert run(start_kernel_tools("off")) is None
    with pytest.raises(ValueError, match='"off"'):
        run(KernelTools(policy="off").start())


def test_the_bridge_without_a_channel_says_so_in_one_line() -> None:
    done = run_bridge(bridge_env(None))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no kernel channel: ACPNB_KERNEL_CHANNEL" in done.stderr


def test_the_bridge_with_a_wrong_token_is_refused(tools: KernelTools) -> None:
    done = run_bridge(bridge_env(tools.entry, ACPNB_KERNEL_TOKEN="not-the-token"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "the kernel refused this bridge: refused: wrong token" in done.stderr


def test_the_bridge_to_a_socket_that_is_gone_says_so(tmp_path: Path) -> None:
    done = run_bridge(bridge_env(None, ACPNB_KERNEL_CHANNEL=str(tmp_path / "gone.sock"), ACPNB_KERNEL_TOKEN="t"))
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "cannot reach the kernel at" in done.stderr


def test_two_kernel_tools_have_their_own_channels(tools: KernelTools) -> None:
    other_namespace = {"only_in_other": 1}
    other = KernelTools(policy="allow", namespace=other_namespace)
    run(other.start())
    try:
        mine = {item["name"]: item["value"] for item in tools.entry["env"]}
        theirs = {item["name"]: item["value"] for item in other.entry["env"]}
        assert mine["ACPNB_KERNEL_CHANNEL"] != theirs["ACPNB_KERNEL_CHANNEL"]
        assert mine["ACPNB_KERNEL_TOKEN"] != theirs["ACPNB_KERNEL_TOKEN"]
        crossed = run_bridge(bridge_env(other.entry, ACPNB_KERNEL_TOKEN=mine["ACPNB_KERNEL_TOKEN"]))
        assert crossed.returncode == 1 and "wrong token" in crossed.stderr
        _listed, (listing,) = call_all(other.entry, [("list_variables", {})])
        assert texts(listing).endswith("- only_in_other: int, 28 B")
    finally:
        run(other.close())
    assert not Path(theirs["ACPNB_KERNEL_CHANNEL"]).parent.exists()


def test_closing_while_a_call_runs_ends_the_bridge_and_fails_the_call(tools: KernelTools, tmp_path: Path,
                                                                    namespace: dict[str, Any]) -> None:
    """What a kernel restart mid-call looks like to the agent: an MCP error, and the bridge's one line."""
    running = threading.Event()
    namespace["running"] = running
    errlog_path = tmp_path / "bridge.err"

    async def go() -> BaseException | None:
        with errlog_path.open("w") as errlog:
            async with open_kernel_tools(tools.entry, errlog=errlog) as session:
                code = "import time\nrunning.set()\ntime.sleep(120)\nafter = 1"
                call = asyncio.ensure_future(session.call_tool("run_code", {"code": code}))
                assert await asyncio.get_running_loop().run_in_executor(None, running.wait, TIMEOUT)
                await tools.close()
                try:
                    await asyncio.wait_for(call, TIMEOUT)
                except Exception as exc:  # noqa: BLE001 - the error is what this test looks at
                    failure: BaseException | None = exc
                else:
                    failure = None
                # The call can fail (the server answers it as it stops) before the bridge has read the end of the
                # channel; leaving the client now would close the bridge's stdin first, a normal end with no line.
                await wait_until(lambda: errlog_path.read_text().strip() != "")
                return failure

    error = run(go())
    assert error is not None, "the call answered although its server closed"
    assert errlog_path.read_text().strip().splitlines() == [
        "acp-notebook kernel bridge: the kernel's channel closed (the kernel restarted or its session ended)"]
    assert "after" not in namespace  # the code was stopped in its sleep


@pytest.mark.slow
def test_a_call_the_client_gives_up_on_is_cancelled_and_its_code_stopped(tools: KernelTools,
                                                                         namespace: dict[str, Any]) -> None:
    async def go() -> tuple[BaseException | None, Any]:
        async with open_kernel_tools(tools.entry) as session:
            error = None
            try:
                await session.call_tool("run_code", {"code": "import time\ntime.sleep(3600)\nafter = 1"},
                                        read_timeout_seconds=1.0)
            except Exception as exc:  # noqa: BLE001 - the client's own timeout is what this test makes
                error = exc
            # The kernel thread is free again: this runs at once instead of waiting out the sleep.
            return error, await session.call_tool("run_code", {"code": "then = 2"})

    error, then = run(go())
    assert error is not None and "timed out" in str(error)
    assert not then.is_error and namespace["then"] == 2 and "after" not in namespace


def test_printing_from_another_thread_while_agent_code_runs_is_not_captured(tools: KernelTools, capsys: Any) -> None:
    code = ("import threading\n"
            "worker = threading.Thread(target=lambda: print('from the worker'))\n"
            "worker.start(); worker.join()\n"
            "print('from the code')")
    _listed, (answer,) = call_all(tools.entry, [("run_code", {"code": code})])
    assert texts(answer) == "from the code\n"
    assert "from the worker" in capsys.readouterr().out


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A temporary directory with a path short enough for a socket in it (pytest's are not)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="kt-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_channel_left_by_a_killed_kernel_is_removed_when_the_next_opens(short_tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    tmp_path = short_tmp_path
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    root = tmp_path / f"acpnb-kt-{os.getuid()}"
    root.mkdir(mode=0o700)
    dead = root / "kt-dead"
    dead.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(dead / "kernel.sock"))
    listener.close()  # bound, never listening: what a killed kernel leaves
    unrelated = root / "kt-starting"
    unrelated.mkdir()  # no socket yet: another kernel may be about to bind it
    tools = KernelTools(namespace={})
    run(tools.start())
    try:
        live = Path(entry_environment(tools.entry)["ACPNB_KERNEL_CHANNEL"]).parent
        assert live.parent == root and live.exists()
        assert not dead.exists() and unrelated.exists()
    finally:
        run(tools.close())


def test_a_channel_root_another_user_could_have_made_is_not_used(short_tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder of the root's name that is open to others (or is a symlink) is passed over, never used."""
    from acp_notebook.kernel_tools.channel import channel_root

    runtime, other = short_tmp_path / "run", short_tmp_path / "tmp"
    runtime.mkdir()
    other.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("TMPDIR", str(other))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    planted = runtime / f"acpnb-kt-{os.getuid()}"
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)
    assert channel_root() == other / f"acpnb-kt-{os.getuid()}"
    shutil.rmtree(other / f"acpnb-kt-{os.getuid()}")
    (other / f"acpnb-kt-{os.getuid()}").symlink_to(planted)
    assert channel_root() not in (planted, other / f"acpnb-kt-{os.getuid()}")


def test_a_message_over_the_line_limit_ends_the_connection_with_the_bridges_line(
        namespace: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_notebook.kernel_tools import channel

    monkeypatch.setattr(channel, "LINE_LIMIT", 4096)
    tools = KernelTools(policy="allow", namespace=namespace)
    run(tools.start())
    errlog_path = tmp_path / "bridge.err"

    async def go() -> BaseException | None:
        with errlog_path.open("w") as errlog:
            async with open_kernel_tools(tools.entry, errlog=errlog) as session:
                try:
                    await asyncio.wait_for(session.call_tool("run_code", {"code": "#" * 10_000}), TIMEOUT)
                except Exception as exc:  # noqa: BLE001 - the error is what this test looks at
                    return exc
                return None

    try:
        assert run(go()) is not None
    finally:
        run(tools.close())
    assert errlog_path.read_text().strip().splitlines() == [
        "acp-notebook kernel bridge: the kernel's channel closed (the kernel restarted or its session ended)"]


SCRIPT = """
import sys
from acp_notebook import _loop
from acp_notebook.kernel_tools import KernelTools
from acp_notebook.kernel_tools.client import open_kernel_tools

answer = 42
tools = KernelTools(policy="allow")
entry = _loop.run_sync(tools.start(), 30)

async def agent():
    async with open_kernel_tools(entry) as session:
        listed = await session.call_tool("list_variables", {})
        ran = await session.call_tool("run_code", {"code": "doubled = answer * 2"})
        return listed, ran

listed, ran = _loop.run_sync(agent(), 60)
print([v["name"] for v in listed.structured_content["variables"]], ran.is_error, doubled)
_loop.run_sync(tools.close(), 30)
"""


@pytest.mark.slow  # a script starting the demo agent and the kernel tools: about 12 s on a loaded machine
def test_outside_ipython_the_tools_serve_main_while_the_script_waits_in_our_call(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], env=bridge_env(None), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == (
        "['KernelTools', 'open_kernel_tools', 'answer', 'tools', 'entry', 'agent'] False 84")
