"""The benchmarks keep working: ``bench/run.py --quick`` runs every one with tiny sizes, and its results have the
shape the README's table is made from. No timing is asserted: the numbers of a quick run mean nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402

SUMMARY = {"median", "mean", "min", "max", "n"}


def _summary(value: object) -> bool:
    return isinstance(value, dict) and SUMMARY <= value.keys()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "results.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.timeout(660)
@pytest.mark.slow  # the quick benchmark run of the `results` fixture
def test_every_benchmark_runs_and_reports_its_machine(results: dict) -> None:
    assert results["mode"] == "quick"
    assert set(results["benchmarks"]) == {"client", "proxy", "load", "notebook", "sweeps", "startup", "memory",
                                          "kernel_tools", "workspaces"}
    machine = results["machine"]
    assert machine["cores"] and machine["python"] and "agent-client-protocol" in machine["packages"]
    for name, found in results["benchmarks"].items():
        assert found["command"].startswith(".venv/bin/python bench/"), name
        assert isinstance(found.get("load") or found.get("by_delay"), dict), name


@pytest.mark.slow  # the quick benchmark run of the `results` fixture
def test_side_by_side_benchmarks_report_both_sides_and_their_ratio(results: dict) -> None:
    bench = results["benchmarks"]
    client = bench["client"]
    assert _summary(client["bare_sdk"]) and _summary(client["acp_notebook"]) and client["ratio"] > 0
    per_trial = bench["sweeps"]["per_trial"]
    assert _summary(per_trial["bare_sdk"]) and _summary(per_trial["sweep"]) and "overhead_per_trial_s" in per_trial
    assert _summary(bench["sweeps"]["concurrency"]["concurrent"]) and bench["sweeps"]["concurrency"]["ratio"] > 0
    load = bench["load"]
    assert load["proxy"]["n"] == load["relay"]["n"] == load["sessions"] and load["ratio_median"] > 0
    assert load["turns_checked"] == 4 * load["sessions"]  # a warm-up turn and a measured one, on each side
    for delay in bench["proxy"]["by_delay"].values():
        for metric in ("request", "turn"):
            for floor in ("metrics", "relay_metrics", "sdk_relay_metrics"):
                assert {"direct_ms", "proxied_ms", "ratio_median", "added_ms_median"} <= delay[floor][metric].keys()


@pytest.mark.slow  # the quick benchmark run of the `results` fixture
def test_notebook_startup_and_memory_results_have_their_fields(results: dict) -> None:
    bench = results["benchmarks"]
    notebook = bench["notebook"]
    assert _summary(notebook["comm_msg_per_s"]) and _summary(notebook["duration_s"])
    assert notebook["trivial_cells"] >= 0
    startup = bench["startup"]
    assert _summary(startup["import"]) and _summary(startup["start"]) and _summary(startup["bare_sdk_start"])
    assert startup["sdk_loaded"] in (True, False)
    assert all(startup[f"{server}_schema_loaded"] in (True, False) for server in ("demo", "proxy", "replay"))
    for case in ("long_turn", "long_session"):
        found = bench["memory"][case]
        for side in ("many_chunks", "few_chunks"):
            assert {"growth_median", "rss_after", "log_entries", "log_limit_entries"} <= found[side].keys()
        assert found["many_chunks"]["text_chars"] == found["few_chunks"]["text_chars"]


@pytest.mark.slow  # the quick benchmark run of the `results` fixture
def test_the_kernel_tools_results_have_their_fields(results: dict) -> None:
    found = results["benchmarks"]["kernel_tools"]
    for metric in ("list_variables", "inspect_variable", "direct_call", "bridge_call", "start", "first_connection"):
        assert _summary(found[metric]), metric
    assert isinstance(found["bridge_added_s"], float)


@pytest.mark.slow  # the quick benchmark run of the `results` fixture
def test_the_readme_table_is_made_from_the_results(results: dict, tmp_path: Path) -> None:
    table = report.render_table(results)
    assert table.startswith("| # | measured | target | result | met |")
    assert "| 1 client |" in table and "Machine:" in table
    readme = tmp_path / "README.md"
    readme.write_text(f"# Benchmarks\n\nintro\n\n{report.START}\nold\n{report.END}\n\nafter\n", encoding="utf-8")
    report.update_readme(readme, table)
    text = readme.read_text(encoding="utf-8")
    assert "old" not in text and table in text and text.endswith("after\n") and text.startswith("# Benchmarks")


INITIALIZE = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
# An agent that answers one request and exits.
ONE_ANSWER = [sys.executable, "-c", "import sys; sys.stdin.readline(); "
              "print('{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}', flush=True)"]


# The SDK's relay builds the SDK's schema models in a process of its own: about 10 s a case on a loaded machine.
@pytest.mark.parametrize("relay", ["relay.py", pytest.param("sdk_relay.py", marks=pytest.mark.slow)])
@pytest.mark.parametrize("gone", ["client", "agent"])
def test_a_relay_ends_when_its_client_or_agent_does(relay: str, gone: str) -> None:
    """The client closing the relay's stdin ends the relay and its agent, and an agent that exits ends the
    relay: the benchmark never waits for a kill."""
    agent = [sys.executable, "-m", "acp_notebook.demo"] if gone == "client" else ONE_ANSWER
    process = subprocess.Popen([sys.executable, str(ROOT / "bench" / relay), json.dumps(agent)], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(INITIALIZE)
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        assert answer["id"] == 0 and answer["result"]["protocolVersion"] == 1
        if gone == "client":
            process.stdin.close()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow  # the quick benchmark run of the `results` fixture
def test_the_workspace_benchmark_reports_set_up_and_overhead(results: dict) -> None:
    found = results["benchmarks"]["workspaces"]
    for method in ("worktree", "copy"):
        assert found["setup"][method]["method"] == method
        assert _summary(found["setup"][method]["setup_s"]) and _summary(found["setup"][method]["diff_and_remove_s"])
    overhead = found["overhead"]
    assert overhead["trials"] == 6 and _summary(overhead["overhead_per_trial_s"]) and _summary(overhead["turn_s"])
    assert "wall_per_slot_minus_turn_and_check_s" in overhead and overhead["check_s"] > 0
    assert "8 workspaces" in report.render_table(results)
