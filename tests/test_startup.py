"""What start-up relies on: names imported on first use, the SDK's package registered without its
schema models, the demo agent's lean model building, and the client's own check of an initialize answer.

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
        from acp_notebook.client import start as client_start
        print(json.dumps({"sweep": acpnb.sweep.__module__, "star_sweep": sweep.__module__,
                          "same_start": start is client_start, "dir_has": all(n in dir(acpnb) for n in acpnb.__all__)}))
    """)
    assert found == {"sweep": "acp_notebook.sweep.runner", "star_sweep": "acp_notebook.sweep.runner",
                     "same_start": True, "dir_has": True}


def test_an_unknown_name_is_an_attribute_error_that_names_it():
    import acp_notebook as acpnb

    with pytest.raises(AttributeError, match="'acp_notebook' has no attribute 'strat'"):
        acpnb.strat  # noqa: B018


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


def test_the_demo_agent_builds_the_sdk_models_lean_and_puts_pydantic_back():
    found = _fresh("""
        import json
        import pydantic
        from pydantic._internal import _fields
        from acp_notebook.demo.server import _lean_model_building
        collect = _fields.extract_docstrings_from_cls
        with _lean_model_building():
            from acp.schema import InitializeRequest
        lean = {"built": InitializeRequest.__pydantic_complete__,
                "description": InitializeRequest.model_fields["protocol_version"].description}
        parsed = InitializeRequest.model_validate({"protocolVersion": 1, "clientCapabilities": {}})
        refused = False
        try:
            InitializeRequest.model_validate({"clientCapabilities": {}})  # protocolVersion is required
        except pydantic.ValidationError:
            refused = True

        class Later(pydantic.BaseModel):
            x: int
            "the x"

        lean["description"] = lean["description"] if hasattr(_fields, "extract_docstrings_from_cls") else None
        print(json.dumps({**lean, "parsed": parsed.protocol_version, "refused": refused,
                          "restored": _fields.extract_docstrings_from_cls is collect
                          and "defer_build" not in pydantic.BaseModel.model_config,
                          "later_built": Later.__pydantic_complete__}))
    """)
    # Validators are built on first use (pydantic's public defer_build). Field docstrings are not
    # collected while pydantic has the private function server.py replaces; a pydantic without it is
    # left alone (start-up is then slower, which bench/startup.py shows, and nothing else changes).
    assert found == {"built": False, "description": None, "parsed": 1, "refused": True, "restored": True,
                     "later_built": True}


def test_the_demo_agent_process_answers_initialize_without_the_client_library_loaded(tmp_path):
    code = textwrap.dedent("""
        import sys, json
        import acp_notebook.demo.server as server
        sys.argv = ["demo"]
        original = server.serve
        async def serve(agent):
            print(json.dumps(sorted(m for m in ("acp_notebook.client", "acp_notebook.sweep.runner",
                                                "acp_notebook.widgets") if m in sys.modules)), file=sys.stderr)
            await original(agent)
        server.serve = serve
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


# A process of ours, with one line on stderr as it exits: whether the SDK's schema models were ever loaded.
_REPORTING = textwrap.dedent("""
    import atexit, json, sys
    atexit.register(lambda: print(json.dumps({"schema": "acp.schema" in sys.modules}), file=sys.stderr, flush=True))
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


@pytest.mark.parametrize("command", ["replay", "proxy"])
def test_the_proxy_and_replay_processes_serve_without_the_sdk_schema_and_take_long_lines(command, recording):
    args = ["replay", recording] if command == "replay" else ["proxy", "--agent", "d=demo"]
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
    assert json.loads(stderr.strip().splitlines()[-1]) == {"schema": False}


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
