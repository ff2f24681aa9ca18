"""Model sweeps against real agent subprocesses: the demo agent (directly, slowed down, through the proxy)
and tests/sweep_agents/stubborn_agent.py, which ignores model picks."""

from __future__ import annotations

import asyncio
import io
import json
import signal
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook import launch
from acp_notebook.sweep import (
    COLUMNS,
    Progress,
    SweepResult,
    TextProgress,
    WidgetProgress,
    asweep,
    percentile,
    plan_runs,
    split_model_id,
)
from tests.processes import wait_gone

STUBBORN = [sys.executable, str(Path(__file__).parent / "sweep_agents" / "stubborn_agent.py")]


def demo_with_delay(seconds: float) -> list[str]:
    return [sys.executable, "-m", "acp_notebook.demo", "--delay", str(seconds)]


@pytest.fixture(autouse=True)
def private_registry(monkeypatch):
    """Agents registered by a test disappear after it."""
    monkeypatch.setattr(launch, "_registry", dict(launch._registry))




def interval(row: dict) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(row["started_at"]), datetime.fromisoformat(row["ended_at"])


def most_at_once(rows: list[dict]) -> int:
    """The largest number of runs whose [started_at, ended_at] intervals were open at the same moment."""
    events = []
    for row in rows:
        start, end = interval(row)
        events += [(start, 1), (end, -1)]
    events.sort(key=lambda e: (e[0], e[1]))  # an end at the same instant closes before a start opens
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


# --- planning and ids ---------------------------------------------------------
def test_model_ids_split_at_the_first_colon_only():
    assert split_model_id("demo:fast") == ("demo", "fast")
    assert split_model_id("openrouter:openai/gpt-4o:free") == ("openrouter", "openai/gpt-4o:free")
    for bad in ("demo", ":fast", "demo:", ""):
        with pytest.raises(ValueError, match="agent:model"):
            split_model_id(bad)


def test_plan_covers_every_model_before_repeating():
    runs = plan_runs(["p1", "p2"], ["a:x", "b:y"], 2, with_agent=False)
    assert len(runs) == 8
    assert [(r.model, r.prompt, r.repeat) for r in runs[:4]] == [
        ("a:x", "p1", 0), ("b:y", "p1", 0), ("a:x", "p2", 0), ("b:y", "p2", 0)]
    assert {r.agent_name for r in runs} == {"a", "b"} and runs[1].value == "y"
    with_agent = plan_runs(["p"], ["a:x"], 1, with_agent=True)
    assert with_agent[0].agent_name is None and with_agent[0].value == "a:x"


def test_usage_errors_are_raised_before_anything_starts():
    with pytest.raises(ValueError, match="agent:model"):
        acpnb.sweep("hi", ["demo"], progress=False)
    with pytest.raises(ValueError, match="unknown agent 'nosuchagent'"):
        acpnb.sweep("hi", ["nosuchagent:x"], progress=False)
    with pytest.raises(ValueError, match="listed twice"):
        acpnb.sweep("hi", ["demo:fast", "demo:fast"], progress=False)
    with pytest.raises(ValueError, match="repeats"):
        acpnb.sweep("hi", ["demo:fast"], repeats=0, progress=False)
    with pytest.raises(ValueError, match="concurrency"):
        acpnb.sweep("hi", ["demo:fast"], concurrency=0, progress=False)
    with pytest.raises(ValueError, match="models="):
        acpnb.sweep("hi", ["demo:fast"], config={"model": "smart"}, progress=False)
    with pytest.raises(ValueError, match=".csv, .json or .jsonl"):
        acpnb.sweep("hi", ["demo:fast"], out="results.txt", progress=False)


# --- the demo agent's models ----------------------------------------------------
def test_sweep_over_the_demo_models_confirms_each_model_and_closes_the_agent(tmp_path):
    result = acpnb.sweep(["hello", "what is ACP?"], ["demo:fast", "demo:smart"], repeats=2, cwd=tmp_path,
                         progress=False)
    assert isinstance(result, SweepResult) and len(result) == 8
    assert all(row["status"] == "ok" and row["error"] is None for row in result.rows), result.failed
    assert [(r["prompt_index"], r["model"], r["repeat"]) for r in result.rows] == [
        (p, m, k) for p in (0, 1) for m in ("demo:fast", "demo:smart") for k in (0, 1)]
    for row in result.rows:
        assert row["confirmed_model"] == row["model"] == row["model_at_end"]
        assert row["agent"] == "demo"
        assert row["model_value"] == row["model"].split(":", 1)[1]
        assert row["config"]["model"] == row["model_value"]
        assert row["text"].startswith(f"[{row['model_value']}]")  # the demo's reply names the model
        assert row["stop_reason"] == "end_turn"
        assert 0 < row["ttft_s"] <= row["duration_s"]
        assert row["context_used"] > 0 and row["cost"] > 0 and row["currency"] == "USD"
        assert row["timed_out"] is False and row["tool_calls"] == 0
        start, end = interval(row)
        assert start <= end
    smart = [r for r in result.rows if r["model"] == "demo:smart"]
    assert all(r["thoughts"] for r in smart) and all("thought_level" in r["config"] for r in smart)
    # One process for the agent, reused by its 8 runs, and closed at the end.
    agents = result.metadata["agents"]
    assert list(agents) == ["demo"] and agents["demo"]["processes"] == 1
    assert agents["demo"]["info"]["name"] == "acp-notebook-demo"
    assert all(wait_gone(pid) for pid in agents["demo"]["pids"])
    meta = result.metadata
    assert meta["prompts"] == ["hello", "what is ACP?"] and meta["models"] == ["demo:fast", "demo:smart"]
    assert meta["repeats"] == 2 and meta["acp_notebook_version"] and meta["acp_sdk_version"]
    assert meta["planned"] == meta["executed"] == 8 and meta["skipped"] == 0
    assert meta["created"] <= meta["finished"]


def test_config_is_applied_after_the_model_and_a_bad_option_is_an_error_row(tmp_path):
    result = acpnb.sweep("hello", ["demo:smart", "demo:fast", "demo:turbo"], config={"thought_level": "high"},
                         cwd=tmp_path, progress=False)
    smart, fast, turbo = result.rows
    assert smart["status"] == "ok" and smart["config"]["thought_level"] == "high"
    assert "Thought 3 of 3" in smart["thoughts"]
    # thought_level exists only while smart is picked: the fast run fails, the sweep goes on.
    assert fast["status"] == "error" and "thought_level" in fast["error"] and fast["text"] == ""
    assert fast["confirmed_model"] == "demo:fast"
    assert turbo["status"] == "error" and "'turbo' is not a choice" in turbo["error"]
    assert "fast, smart" in turbo["error"] and turbo["confirmed_model"] is None


def test_boolean_config_values_may_be_given_as_text(tmp_path):
    result = acpnb.sweep("hello", ["demo:fast"], config={"show_thoughts": "true"}, cwd=tmp_path, progress=False)
    (row,) = result.rows
    assert row["status"] == "ok", row["error"]
    assert row["config"]["show_thoughts"] is True and row["thoughts"]


def test_a_model_switched_mid_turn_is_an_error_not_the_requested_models_answer(tmp_path):
    # The demo falls back from smart to fast when the prompt says "fallback".
    result = acpnb.sweep(["please fallback", "hello"], ["demo:smart"], cwd=tmp_path, progress=False)
    fell_back, normal = result.rows
    assert fell_back["status"] == "error" and "switched the model during the turn" in fell_back["error"]
    assert fell_back["confirmed_model"] == "demo:smart" and fell_back["model_at_end"] == "demo:fast"
    assert fell_back["text"]  # what the agent said is still recorded
    assert normal["status"] == "ok" and normal["model_at_end"] == "demo:smart"


def test_an_agent_that_ignores_the_model_pick_produces_error_rows(tmp_path):
    acpnb.register("stubborn", STUBBORN)
    result = acpnb.sweep(["hello", "bye"], ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, progress=False)
    by_model = {m: [r for r in result.rows if r["model"] == m] for m in ("stubborn:smart", "stubborn:fast")}
    for row in by_model["stubborn:smart"]:
        assert row["status"] == "error"
        assert "asked for model 'smart' but the agent reports 'fast'" in row["error"]
        assert row["confirmed_model"] == "stubborn:fast" != row["model"]
        assert row["text"] == "" and row["stop_reason"] is None  # never prompted
    for row in by_model["stubborn:fast"]:
        assert row["status"] == "ok" and row["confirmed_model"] == "stubborn:fast"
        assert row["text"] == f"[fast] ok: {row['prompt']}"
        assert row["total_tokens"] == 4 and row["input_tokens"] == 1 and row["output_tokens"] == 3
    summary = {s["model"]: s for s in result.summary()}
    assert summary["stubborn:smart"]["errors"] == 2 and summary["stubborn:smart"]["ok"] == 0
    assert summary["stubborn:smart"]["latency_median_s"] is None
    assert summary["stubborn:fast"]["total_tokens_median"] == 4


def test_a_crashing_run_does_not_stop_the_sweep_and_the_agent_is_started_again(tmp_path):
    acpnb.register("stubborn", STUBBORN)
    result = acpnb.sweep(["crash", "hello"], ["stubborn:fast"], concurrency=1, cwd=tmp_path, progress=False)
    crashed, after = result.rows
    assert crashed["status"] == "error" and "AgentExitedError" in crashed["error"]
    assert "crashing on purpose" in crashed["error"]  # the agent's last stderr line
    assert after["status"] == "ok" and after["text"] == "[fast] ok: hello"
    facts = result.metadata["agents"]["stubborn"]
    assert facts["processes"] == 2 and all(wait_gone(pid) for pid in facts["pids"])


def test_an_agent_that_cannot_start_fails_its_runs_only(tmp_path):
    acpnb.register("broken", [sys.executable, "-c", "import sys; sys.exit('no ACP here')"])
    result = acpnb.sweep("hello", ["broken:x", "demo:fast"], cwd=tmp_path, progress=False)
    broken, demo = result.rows
    assert broken["status"] == "error" and "AgentStartError" in broken["error"]
    assert demo["status"] == "ok"


# --- timeouts and concurrency -------------------------------------------------------
def test_a_slow_turn_is_cancelled_at_the_timeout_and_recorded(tmp_path):
    acpnb.register("slowdemo", demo_with_delay(30))
    result = acpnb.sweep("hello", ["slowdemo:fast", "demo:fast"], timeout=0.5, cwd=tmp_path, progress=False)
    slow, quick = result.rows
    assert slow["status"] == "timeout" and slow["timed_out"] is True
    assert slow["stop_reason"] == "cancelled"  # the agent answered our session/cancel
    assert "no answer within 0.5 s" in slow["error"]
    assert slow["confirmed_model"] == "slowdemo:fast"
    assert 0.5 <= slow["duration_s"] < 30
    assert quick["status"] == "ok"
    summary = {s["model"]: s for s in result.summary()}
    assert summary["slowdemo:fast"]["timeouts"] == 1 and summary["slowdemo:fast"]["errors"] == 1


@pytest.mark.parametrize("concurrency", [1, 2])
def test_runs_overlap_up_to_the_concurrency_limit(tmp_path, concurrency):
    acpnb.register("slowdemo", demo_with_delay(0.2))
    result = acpnb.sweep("hello", ["slowdemo:fast"], repeats=4, concurrency=concurrency, cwd=tmp_path,
                         progress=False)
    assert all(r["status"] == "ok" for r in result.rows), result.failed
    assert most_at_once(result.rows) == concurrency
    # Every run had its own session on the one agent process.
    assert len({r["session_id"] for r in result.rows}) == 4
    assert result.metadata["agents"]["slowdemo"]["processes"] == 1


def test_runs_of_different_agents_overlap(tmp_path):
    acpnb.register("slow1", demo_with_delay(0.2))
    acpnb.register("slow2", demo_with_delay(0.2))
    result = acpnb.sweep("hello", ["slow1:fast", "slow2:fast"], concurrency=4, cwd=tmp_path, progress=False)
    assert all(r["status"] == "ok" for r in result.rows), result.failed
    assert most_at_once(result.rows) == 2
    assert set(result.metadata["agents"]) == {"slow1", "slow2"}


# --- out= and resume ------------------------------------------------------------------
class FileWatcher(Progress):
    """Counts the rows in the out file each time a run finishes."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.seen: list[int] = []

    def _draw(self, row):
        if row is not None:
            self.seen.append(len(SweepResult.load(self.path)))


@pytest.mark.parametrize("suffix", [".csv", ".json", ".jsonl"])
def test_out_is_written_as_runs_finish_and_a_second_call_resumes(tmp_path, suffix):
    out = tmp_path / f"results{suffix}"
    watcher = FileWatcher(out)
    first = acpnb.sweep("hello", ["demo:fast"], repeats=2, cwd=tmp_path, out=out, progress=watcher)
    assert watcher.seen == [1, 2]
    assert first.metadata["executed"] == 2

    second = acpnb.sweep("hello", ["demo:fast", "demo:smart"], repeats=2, cwd=tmp_path, out=out, progress=False)
    assert second.metadata["skipped"] == 2 and second.metadata["executed"] == 2 and len(second) == 4
    # The runs already done were not run again: the same rows, same sessions and timestamps.
    assert second.rows[:2] == first.rows
    assert [r["model"] for r in second.rows] == ["demo:fast"] * 2 + ["demo:smart"] * 2
    stored = SweepResult.load(out)
    assert len(stored) == 4
    assert sorted((r["model"], r["repeat"]) for r in stored.rows) == sorted(
        (r["model"], r["repeat"]) for r in second.rows)
    assert stored.metadata["skipped"] == 2 and stored.metadata["previous"][0]["executed"] == 2

    third = acpnb.sweep("hello", ["demo:fast", "demo:smart"], repeats=2, cwd=tmp_path, out=out, progress=False)
    assert third.metadata["executed"] == 0 and third.rows == second.rows


class InterruptAfterFirstRun(Progress):
    """Calls ``interrupt`` (from the loop thread) once the first run has finished."""

    def __init__(self, interrupt) -> None:
        super().__init__()
        self.interrupt = interrupt

    def _draw(self, row):
        if row is not None and self.done == 1:
            self.interrupt()


def check_interrupted(out: Path, planned: int) -> int:
    """The finished rows are in the file and every agent the sweep started is gone; returns the row count."""
    stored = SweepResult.load(out)
    assert 1 <= len(stored) < planned and all(r["status"] == "ok" for r in stored.rows)
    pids = stored.metadata["agents"]["slowdemo"]["pids"]  # written by the cleanup the call waited for
    assert pids and all(wait_gone(pid, timeout=0) for pid in pids)
    return len(stored)


def test_an_interrupted_sweep_closes_its_agents_and_the_next_call_finishes_it(tmp_path):
    acpnb.register("slowdemo", demo_with_delay(0.2))
    out = tmp_path / "r.csv"
    main_thread = threading.main_thread().ident

    def sigint() -> None:  # what a kernel interrupt does to the cell blocked in sweep()
        signal.pthread_kill(main_thread, signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        acpnb.sweep("hello", ["slowdemo:fast"], repeats=6, concurrency=2, cwd=tmp_path, out=out,
                    progress=InterruptAfterFirstRun(sigint))
    done = check_interrupted(out, 6)
    rest = acpnb.sweep("hello", ["slowdemo:fast"], repeats=6, concurrency=2, cwd=tmp_path, out=out, progress=False)
    assert rest.metadata["skipped"] == done and rest.metadata["executed"] == 6 - done
    assert len(rest) == 6 and all(r["status"] == "ok" for r in rest.rows)


def test_a_cancelled_asweep_closes_its_agents(tmp_path):
    acpnb.register("slowdemo", demo_with_delay(0.2))
    out = tmp_path / "r.jsonl"

    async def cancel_after_first_run() -> None:
        loop = asyncio.get_running_loop()
        holder: dict = {}
        progress = InterruptAfterFirstRun(lambda: loop.call_soon_threadsafe(holder["task"].cancel))
        holder["task"] = asyncio.ensure_future(asweep("hello", ["slowdemo:fast"], repeats=6, concurrency=2,
                                                      cwd=tmp_path, out=out, progress=progress))
        with pytest.raises(asyncio.CancelledError):
            await holder["task"]

    asyncio.run(cancel_after_first_run())
    check_interrupted(out, 6)


def test_resume_skips_failed_runs_unless_asked_to_retry_them(tmp_path):
    acpnb.register("stubborn", STUBBORN)
    out = tmp_path / "r.csv"
    first = acpnb.sweep("hello", ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, out=out, progress=False)
    assert [r["status"] for r in first.rows] == ["error", "ok"]
    again = acpnb.sweep("hello", ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, out=out, progress=False)
    assert again.metadata["executed"] == 0
    retried = acpnb.sweep("hello", ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, out=out, retry_errors=True,
                          progress=False)
    assert retried.metadata["executed"] == 1 and retried.rows[0]["started_at"] != first.rows[0]["started_at"]
    assert retried.rows[1] == first.rows[1]


def test_resume_refuses_a_csv_with_other_columns(tmp_path):
    out = tmp_path / "other.csv"
    out.write_text("model,prompt,repeat,status,extra\ndemo:fast,hello,0,ok,1\n")
    with pytest.raises(ValueError, match="other columns"):
        acpnb.sweep("hello", ["demo:fast"], out=out, progress=False)


# --- agent= (an Agent of our own, a spec, the proxy) -------------------------------------
def test_with_an_agent_the_ids_are_its_own_model_values_and_it_stays_open(tmp_path):
    agent = acpnb.start("demo", cwd=tmp_path)
    try:
        result = acpnb.sweep("hello", ["fast", "smart"], agent=agent, progress=False)
        assert [r["confirmed_model"] for r in result.rows] == ["fast", "smart"]
        assert all(r["status"] == "ok" and r["agent"] == "demo" for r in result.rows)
        assert agent.status == "running" and agent.sessions == []  # sessions closed, agent kept
        assert result.metadata["agents"]["demo"]["started_by_sweep"] is False
    finally:
        agent.close()


def test_with_an_agent_spec_the_sweep_starts_and_closes_it(tmp_path):
    result = acpnb.sweep("hello", ["fast", "smart"], agent="demo", cwd=tmp_path, progress=False)
    assert all(r["status"] == "ok" for r in result.rows)
    facts = result.metadata["agents"]["demo"]
    assert facts["processes"] == 1 and all(wait_gone(pid) for pid in facts["pids"])


def proxy_starter():
    start = getattr(acpnb, "start_proxy", None)
    if start is None:
        try:
            from acp_notebook.proxy import start_proxy as start
        except ImportError:
            pytest.skip("the multi-agent proxy (acp_notebook.proxy.start_proxy) has not landed")
    return start


def test_sweep_through_the_proxy(tmp_path):
    proxy = proxy_starter()({"a": "demo", "b": "demo"}, cwd=tmp_path)
    try:
        result = acpnb.sweep(["hello", "bye"], ["a:fast", "a:smart", "b:fast", "b:smart", "c:fast"], agent=proxy,
                             concurrency=4, progress=False)
        assert len(result) == 10
        good = [r for r in result.rows if r["model"] != "c:fast"]
        assert all(r["status"] == "ok" for r in good), result.failed
        for row in good:
            assert row["confirmed_model"] == row["model"] == row["model_at_end"]
            assert row["text"].startswith(f"[{row['model'].split(':')[1]}]")
            assert row["agent"] == proxy.name
        # An id the proxy does not offer is an error row naming the valid ones.
        for row in (r for r in result.rows if r["model"] == "c:fast"):
            assert row["status"] == "error" and "'c:fast' is not a choice" in row["error"]
            assert "a:fast" in row["error"]
        assert proxy.status == "running" and proxy.sessions == []
    finally:
        proxy.close()


def test_asweep_runs_from_another_event_loop(tmp_path):
    result = asyncio.run(asweep("hello", ["demo:fast"], cwd=tmp_path, progress=False))
    assert result.rows[0]["status"] == "ok"


# --- the result ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed_result(tmp_path_factory):
    """Two demo models plus an ignored pick: ok rows and error rows, made once for the result tests."""
    saved = dict(launch._registry)
    try:
        acpnb.register("stubborn", STUBBORN)
        return acpnb.sweep(["hello", "why?"], ["demo:fast", "demo:smart", "stubborn:smart"], repeats=2,
                           cwd=tmp_path_factory.mktemp("mixed"), progress=False)
    finally:
        launch._registry.clear()
        launch._registry.update(saved)


def test_percentile_interpolates_between_ranks():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([4, 1, 3, 2], 90) == pytest.approx(3.7)
    assert percentile([7.0], 90) == 7.0
    assert percentile([], 50) is None


def test_summary_per_model(mixed_result):
    summary = mixed_result.summary()
    assert [s["model"] for s in summary] == ["demo:fast", "demo:smart", "stubborn:smart"]
    fast, smart, stubborn = summary
    assert (fast["runs"], fast["ok"], fast["errors"]) == (4, 4, 0)
    assert (stubborn["runs"], stubborn["ok"], stubborn["errors"]) == (4, 0, 4)
    durations = [r["duration_s"] for r in mixed_result.rows if r["model"] == "demo:smart"]
    assert smart["latency_median_s"] == pytest.approx(percentile(durations, 50))
    assert smart["latency_p90_s"] == pytest.approx(percentile(durations, 90))
    assert smart["ttft_median_s"] is not None and smart["context_used_median"] > fast["context_used_median"]
    assert smart["cost_total"] > fast["cost_total"] > 0
    text = str(summary)
    assert text.splitlines()[0].split()[:5] == ["model", "runs", "ok", "errors", "timeouts"]
    assert "stubborn:smart" in text and "output_tokens_median" not in text  # nobody reported it
    assert "<table" in summary._repr_html_()


def test_csv_and_json_round_trip(mixed_result, tmp_path):
    mixed_result.to_csv(tmp_path / "r.csv")
    mixed_result.to_json(tmp_path / "r.json")
    for name in ("r.csv", "r.json"):
        loaded = SweepResult.load(tmp_path / name)
        assert loaded.rows == mixed_result.rows, name
        assert loaded.metadata["models"] == mixed_result.metadata["models"]
    text = mixed_result.to_csv()
    assert text.splitlines()[0] == ",".join(COLUMNS)
    assert json.loads(mixed_result.to_json())["rows"][0]["model"] == "demo:fast"


def test_to_pandas(mixed_result):
    frame = mixed_result.to_pandas()
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 12
    assert frame["started_at"].dt.tz is not None
    assert frame.groupby("model")["status"].apply(lambda s: (s == "ok").sum()).to_dict() == {
        "demo:fast": 2 * 2, "demo:smart": 4, "stubborn:smart": 0}
    assert mixed_result.summary().to_pandas().loc["demo:fast", "runs"] == 4


def test_to_pandas_without_pandas_says_how_to_install_it(mixed_result, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"acp-notebook\[pandas\]"):
        mixed_result.to_pandas()


def test_plot_draws_latency_per_model(mixed_result):
    from matplotlib.figure import Figure

    figure = mixed_result.plot()
    assert isinstance(figure, Figure)
    (ax,) = figure.axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["demo:fast\n4 ok", "demo:smart\n4 ok", "stubborn:smart\n0 ok, 4 failed"]
    assert "latency" in ax.get_ylabel()
    assert sum(len(c.get_offsets()) for c in ax.collections) == 8  # one dot per successful run
    assert isinstance(mixed_result.plot(metric="ttft_s"), Figure)


def test_html_and_text_views(mixed_result):
    html = mixed_result._repr_html_()
    assert "12 runs, 8 ok, 4 failed" in html and "acp-sweep-summary" in html and "stubborn:smart" in html
    assert "12 runs" in repr(mixed_result)


# --- progress -------------------------------------------------------------------------------
def test_text_progress_on_a_pipe_writes_a_line_per_run(tmp_path):
    stream = io.StringIO()
    result = acpnb.sweep("hello", ["demo:fast", "demo:turbo"], cwd=tmp_path, progress=TextProgress(stream))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "sweep: 2 runs to do"
    assert len(lines) == 3 and all(line.startswith("sweep [") for line in lines[1:])
    assert any("demo:turbo" in line and "error" in line for line in lines)
    assert len(result) == 2


def test_text_progress_on_a_terminal_redraws_one_bar():
    stream = io.StringIO()
    bar = TextProgress(stream, live=True)
    bar.start(2)
    bar.finished({"model": "demo:fast", "status": "ok"})
    bar.finished({"model": "demo:smart", "status": "error"})
    bar.close()
    text = stream.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n")
    assert "2/2 finished, 1 failed" in text and "[" + "#" * TextProgress.WIDTH + "]" in text


def test_widget_progress_is_updated_from_another_thread():
    bar = WidgetProgress()
    bar.start(2, skipped=1)
    assert (bar.bar.value, bar.bar.max) == (0, 2)
    worker = threading.Thread(target=lambda: (bar.finished({"status": "ok"}), bar.finished({"status": "error"})))
    worker.start()
    worker.join(10)
    assert bar.bar.value == 2 and bar.bar.bar_style == "warning"
    assert bar.label.value == "2/2 finished, 1 failed (1 already done)"
