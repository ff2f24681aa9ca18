"""What start-up relies on: names imported on first use, the SDK's package registered without its
schema models (in the notebook, the demo agent, the proxy and the replay server), and the client's own
check of an initialize answer.

Each import test runs in a fresh interpreter (a subprocess), since this one has imported everything.
No time is measured here: bench/startup.py does that.
"""

from __future__ import annotations

import inspect
import json
import os
import queue
import subprocess
import sys
import textwrap
import threading

import pytest

from acp_notebook.connection.checks import init_result_problem
from acp_notebook.errors import RpcError


def _fresh(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_package_imports_neither_the_sdk_nor_the_client():
    found = _fresh("""
        import json, sys
        import acp_notebook
        heavy = ("acp", "pydantic", "acp_notebook.client", "acp_notebook.sweep.runner", "asyncio")
        print(json.dumps({"loaded": [m for m in heavy if m in sys.modules], "version": acp_notebook.__version__}))
    """)
    assert found["loaded"] == []
    assert found["version"] and found["version"][0].isdigit()


def test_public_names_resolve_to_the_same_objects_whatever_was_imported_first():
    # acpnb.sweep is a function although acp_notebook.sweep is also a subpackage: loading the
    # subpackage's modules later must not put the module in the function's place.
    found = _fresh("""
        import json
        import acp_notebook as acpnb
        import acp_notebook.sweep.runner
        from acp_notebook.sweep.store import RunStore
        from acp_notebook import *
        from acp_notebook.starting import start as client_start
        print(json.dumps({"sweep": acpnb.sweep.__module__, "star_sweep": sweep.__module__,
                          "same_start": start is client_start, "dir_has": all(n in dir(acpnb) for n in acpnb.__all__)}))
    """)
    assert found == {"sweep": "acp_notebook.sweep.runner", "star_sweep": "acp_notebook.sweep.runner",
                     "same_start": True, "dir_has": True}


def test_an_unknown_name_is_an_attribute_error_that_names_it():
    import acp_notebook as acpnb

    with pytest.raises(AttributeError, match="'acp_notebook' has no attribute 'strat'"):
        acpnb.strat  # noqa: B018


@pytest.mark.slow
def test_starting_the_demo_leaves_the_sdk_schema_unloaded_and_the_sdk_whole_on_first_use(tmp_path):
    found = _fresh(f"""
        import json, sys, threading
        import acp_notebook as acpnb
        with acpnb.start("demo", cwd={str(tmp_path)!r}) as agent:
            session = agent.new_session()
            reply = session.prompt("hello").text
        unloaded = "acp.schema" not in sys.modules
        # The user's own `import acp` afterwards gets the whole package, from two threads at once too.
        import acp
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(acp.PROTOCOL_VERSION)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        from acp import RequestError, run_agent
        from acp.schema import InitializeResponse
        missing = None
        try:
            acp.no_such_name
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps({{"unloaded": unloaded, "reply": bool(reply), "versions": seen,
                          "schema_now": "acp.schema" in sys.modules, "run_agent": callable(run_agent),
                          "missing": missing}}))
    """)
    assert found["unloaded"] and found["reply"]
    assert len(found["versions"]) == 4 and len(set(found["versions"])) == 1
    assert found["schema_now"] and found["run_agent"]
    assert "has no attribute" in found["missing"] and "no_such_name" in found["missing"]


@pytest.mark.slow
def test_an_sdk_imported_first_the_ordinary_way_is_left_alone():
    found = _fresh("""
        import json, sys
        import acp
        whole, names = sys.modules["acp"], dict(vars(sys.modules["acp"]))
        from acp_notebook._sdk import defer_sdk_package
        defer_sdk_package()
        print(json.dumps({"same": sys.modules["acp"] is whole, "untouched": vars(whole) == names}))
    """)
    assert found == {"same": True, "untouched": True}


def test_the_demo_agent_process_answers_initialize_without_the_client_library_loaded(tmp_path):
    """The demo agent starts light (the suite starts hundreds): none of the client's side, not the kernel tools'
    server, nor importlib.metadata (the version is a constant), even after it has answered."""
    code = textwrap.dedent("""
        import atexit, sys, json
        CLIENT_SIDE = ("acp_notebook.client", "acp_notebook.session", "acp_notebook.kernel_link",
                       "acp_notebook.kernel_tools.server", "acp_notebook.sweep.runner", "acp_notebook.widgets",
                       "importlib.metadata")
        atexit.register(lambda: print(json.dumps(sorted(m for m in CLIENT_SIDE if m in sys.modules)),
                                      file=sys.stderr, flush=True))
        import acp_notebook.demo.server as server
        sys.argv = ["demo"]
        sys.exit(server.main([]))
    """)
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1,
                                                                            "clientCapabilities": {}}}
    agent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "ACP_NOTEBOOK_DEMO_STATE": str(tmp_path)})
    try:
        agent.stdin.write(json.dumps(request) + "\n")
        agent.stdin.flush()
        answer = json.loads(agent.stdout.readline())  # the agent answers while its stdin is still open
    finally:
        agent.stdin.close()
        stderr = agent.stderr.read()
        agent.wait(30)
    assert answer["result"]["protocolVersion"] == 1, stderr
    assert agent.returncode == 0, stderr
    assert json.loads(stderr.strip().splitlines()[0]) == []


# A process of ours, with one line on stderr as it exits (and in the file $ACPNB_STARTUP_REPORT names, if
# set): whether the SDK's schema models were ever loaded, and whether the client library was (a server's
# process needs neither: the tests start hundreds of them).
_REPORTING = textwrap.dedent("""
    import atexit, json, os, sys
    def report():
        line = json.dumps({"schema": "acp.schema" in sys.modules, "client": "acp_notebook.client" in sys.modules})
        print(line, file=sys.stderr, flush=True)
        if os.environ.get("ACPNB_STARTUP_REPORT"):
            with open(os.environ["ACPNB_STARTUP_REPORT"], "w") as out:
                out.write(line)
    atexit.register(report)
    from acp_notebook.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> str:
    import acp_notebook as acpnb

    folder = tmp_path_factory.mktemp("recorded")
    path = folder / "demo.acp.jsonl"
    with acpnb.start("demo", cwd=folder) as agent:
        agent.record(path)
        agent.new_session().prompt("hello")
    return str(path)


@pytest.mark.parametrize("command", ["replay", "proxy", "demo-agent"])
@pytest.mark.slow
def test_the_proxy_replay_and_demo_processes_serve_without_the_sdk_schema_and_take_long_lines(command, recording,
                                                                                            tmp_path):
    args = {"replay": ["replay", recording], "proxy": ["proxy", "--agent", "d=demo"],
            "demo-agent": ["demo-agent", "--state-dir", str(tmp_path)]}[command]
    # Over a megabyte on one line: more than asyncio's default 64 KiB, so the reader has the SDK's limit.
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}, "_meta": {"pad": "x" * 1_200_000}}}
    server = subprocess.Popen([sys.executable, "-c", _REPORTING, *args], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answers: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: answers.put(server.stdout.readline()), daemon=True).start()
    try:
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        answer = answers.get(timeout=60)
    finally:
        server.stdin.close()  # end of stdin: the server stops
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
        finally:
            stderr = server.stderr.read()
    assert json.loads(answer)["result"]["protocolVersion"] == 1, stderr[-3000:]
    assert server.returncode == 0, stderr[-3000:]
    assert json.loads(stderr.strip().splitlines()[-1]) == {"schema": False, "client": False}


def test_the_demo_agent_runs_file_work_a_form_and_a_bad_request_without_the_sdk_schema(tmp_path):
    import acp_notebook as acpnb

    report = tmp_path / "report.json"
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    command = [sys.executable, "-c", _REPORTING, "demo-agent", "--state-dir", str(tmp_path / "state")]
    with acpnb.start(command, cwd=tmp_path, env={"ACPNB_STARTUP_REPORT": str(report)}, permission="allow",
                     timeout=60) as agent:
        session = agent.new_session()
        read = session.prompt("read notes.txt", timeout=60)
        form = session.prompt("ask me about my order", timeout=60)  # the client's default policy declines it
        with pytest.raises(RpcError, match="needs a string .modeId."):
            agent.request("session/set_mode", {"sessionId": session.id})
    assert "2 lines" in read.text and read.tool_calls[-1].status == "completed", read.text
    assert form.text.endswith("No problem, I will not ask."), form.text
    assert json.loads(report.read_text()) == {"schema": False, "client": False}


def test_the_stdio_buffer_limit_and_streams_are_the_sdks():
    from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
    from acp.stdio import stdio_streams as sdk_stdio_streams

    from acp_notebook import _sdk

    assert _sdk.STDIO_BUFFER_LIMIT_BYTES == DEFAULT_STDIO_BUFFER_LIMIT_BYTES
    # The same parameters as the SDK's function, so open_stdio calls them alike.
    assert list(inspect.signature(_sdk.stdio_streams).parameters) == list(
        inspect.signature(sdk_stdio_streams).parameters)


@pytest.mark.parametrize("result", [
    {"protocolVersion": 1},
    {"protocolVersion": 1, "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
     "authMethods": [{"id": "login", "name": "Log in", "type": "terminal", "args": ["--login"]}],
     "agentInfo": {"name": "x", "version": "1.0", "title": None}, "_meta": {"extra": 1}, "somethingNew": [1]},
])
def test_valid_initialize_results_pass(result):
    assert init_result_problem(result) is None


@pytest.mark.parametrize("result, problem", [
    (None, "not an object (null)"),
    ({"agentInfo": {"name": "x"}}, "no protocolVersion"),
    ({"protocolVersion": True}, "not a version number (True)"),
    ({"protocolVersion": 70000}, "not a version number (70000)"),
    ({"protocolVersion": 1, "agentCapabilities": []}, "agentCapabilities is not an object (array)"),
    ({"protocolVersion": 1, "agentCapabilities": {"loadSession": "yes"}}, "its loadSession has the wrong type"),
    ({"protocolVersion": 1, "authMethods": [{"id": "a"}]}, "lacks a string id or name"),
    ({"protocolVersion": 1, "authMethods": {"id": "a"}}, "authMethods is not a list of objects"),
    ({"protocolVersion": 1, "agentInfo": {"name": "x"}}, "agentInfo has no string version"),
])
def test_invalid_initialize_results_are_named(result, problem):
    assert problem in (init_result_problem(result) or "")


def test_a_session_of_an_agent_that_connects_when_needed_imports_the_mcp_sdk_only_when_it_does(tmp_path):
    """The kernel tools' MCP SDK is most of a second of CPU: a demo session (the demo connects only for a prompt
    that needs the kernel) that never uses the kernel does not pay it; the first prompt that does still works."""
    found = _fresh(f"""
        import json, sys
        import acp_notebook as acpnb
        with acpnb.start("demo", kernel_tools="allow", cwd={str(tmp_path)!r}) as agent:
            session = agent.new_session()
            chatted = session.prompt("hello").text
            before = "mcp" in sys.modules  # the import, once begun, puts the package there at once
            listed = session.prompt("list variables")
            print(json.dumps({{"before": before, "after": "mcp.server.lowlevel" in sys.modules,
                              "tools": [call.title for call in listed.tool_calls], "chatted": bool(chatted)}}))
    """)
    assert found["chatted"] and found["before"] is False
    assert found["after"] is True and any("list_variables" in title for title in found["tools"]), found


def test_the_test_environments_jsonschema_builds_no_iri_grammar_at_import():
    """pyproject.toml's dev extra keeps jsonschema below 4.25, which imports rfc3987-syntax with itself (its IRI
    grammar built at import, about 1.7 s of CPU): every xdist worker, JupyterLab, nbclient run and Ray process of the
    suite imports jsonschema. This fails when that pin is lifted while jsonschema still imports it eagerly."""
    found = _fresh("""
        import json, sys
        import jsonschema, nbformat
        print(json.dumps({"loaded": [m for m in ("rfc3987_syntax", "lark") if m in sys.modules]}))
    """)
    assert found["loaded"] == []
