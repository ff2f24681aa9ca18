"""Sweeps against real agent subprocesses: the demo agent (directly, slowed down, through the proxy), and the
test agents in tests/sweep_agents/ (stubborn_agent ignores model picks; scripted_agent fails on cue)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import signal
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.record import Recording
from acp_notebook.testing import replay_script
from acp_notebook import launch
from acp_notebook.sweep import Progress, SweepResult, TextProgress, WidgetProgress, asweep, plan_trials
from acp_notebook.sweep.dataset import load_dataset
from acp_notebook.sweep.trial import agent_and_value
from tests.processes import wait_gone

AGENTS = Path(__file__).parent / "sweep_agents"
STUBBORN = [sys.executable, str(AGENTS / "stubborn_agent.py")]


def scripted(state: Path, cost: float = 0.01) -> list[str]:
    return [sys.executable, str(AGENTS / "scripted_agent.py"), "--state", str(state), "--cost", str(cost)]


INTERRUPT_WAIT_S = 30  # how long the loop waits for the main thread to take an interrupt


def demo_with_delay(seconds: float) -> list[str]:
    return [sys.executable, "-m", "acp_notebook.demo", "--delay", str(seconds)]


@pytest.fixture(autouse=True)
def private_registry():
    """Agents registered by a test disappear after it."""
    with launch.registry.overlay():
        yield


def interval(row: dict) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(row["started_at"]), datetime.fromisoformat(row["ended_at"])


def most_at_once(rows: list[dict]) -> int:
    """The largest number of trials whose [started_at, ended_at] intervals were open at the same moment."""
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


# --- planning and usage errors ---------------------------------------------------------------
def test_model_ids_split_at_the_first_colon_and_the_plan_covers_every_model_first():
    assert agent_and_value("openrouter:openai/gpt-4o:free", with_agent=False) == ("openrouter", "openai/gpt-4o:free")
    assert agent_and_value("a:fast", with_agent=True) == (None, "a:fast")
    for bad in ("demo", ":fast", "demo:"):
        with pytest.raises(ValueError, match="agent:model"):
            agent_and_value(bad, with_agent=False)
    trials = plan_trials(load_dataset(["p1", "p2"]), ["a:x", "b:y"], 2, with_agent=False)
    assert [(t.model, t.sample.prompt, t.repeat) for t in trials[:4]] == [
        ("a:x", "p1", 0), ("b:y", "p1", 0), ("a:x", "p2", 0), ("b:y", "p2", 0)]
    assert len({t.trial_id for t in trials}) == 8
    assert trials == plan_trials(load_dataset(["p1", "p2"]), ["a:x", "b:y"], 2, with_agent=False)  # stable ids


@pytest.mark.parametrize("options, message", [
    ({"models": ["demo"]}, "agent:model"),
    ({"models": ["nosuchagent:x"]}, r"unknown agent 'nosuchagent'.*acpnb.register"),
    ({"models": ["dmeo:fast", "clade:x"]}, r"unknown agents 'clade' \(did you mean 'claude'\?\), 'dmeo' \(did you "
                                           r"mean 'demo'\?\) in the model ids"),
    ({"models": ["demo:fast", "demo:fast"]}, "listed twice"),
    ({"repeats": 0}, "repeats= must be a whole number >= 1"),
    ({"concurrency": 0}, "concurrency="),
    ({"retries": -1}, "retries= must be a whole number >= 0"),
    ({"budget": 0}, "budget= must be a number > 0"),
    ({"timeout": -1}, "timeout="),
    ({"agent_concurrency": {"other": 1}}, "'other', which no model id uses"),
    ({"config": {"model": "smart"}}, "models="),
    ({"out": "notes.txt"}, "is a file but not a results file"),
    ({"scorers": ["fuzzy"]}, "unknown scorer 'fuzzy'"),
    ({"scorers": ["exact", "exact"]}, "named 'exact'"),
    ({"executor": "threads"}, "'local', 'ray' or an executor"),
])
def test_usage_errors_are_raised_before_anything_starts(tmp_path, options, message):
    (tmp_path / "notes.txt").write_text("not results")
    models = options.pop("models", ["demo:fast"])
    if "out" in options:
        options["out"] = tmp_path / options["out"]
    with pytest.raises(ValueError, match=message):
        acpnb.sweep("hi", models, progress=False, **options)


# --- the demo agent's models -------------------------------------------------------------------
def test_sweep_over_the_demo_models_confirms_each_model_and_closes_the_agent(tmp_path):
    result = acpnb.sweep(["hello", "what is ACP?"], ["demo:fast", "demo:smart"], repeats=2, cwd=tmp_path,
                         progress=False)
    assert isinstance(result, SweepResult) and len(result) == 8
    assert all(row["status"] == "ok" and row["error"] is None for row in result.rows), result.failed
    assert [(r["sample_index"], r["model"], r["repeat"]) for r in result.rows] == [
        (p, m, k) for p in (0, 1) for m in ("demo:fast", "demo:smart") for k in (0, 1)]
    for row in result.rows:
        assert row["confirmed_model"] == row["model"] == row["model_at_end"]
        assert row["agent"] == "demo" and row["model_value"] == row["model"].split(":", 1)[1]
        assert row["config"]["model"] == row["model_value"] and row["attempts"] == 1
        assert row["text"].startswith(f"[{row['model_value']}]")  # the demo's reply names the model
        assert row["stop_reason"] == "end_turn" and 0 < row["ttft_s"] <= row["duration_s"]
        # The demo reports usage_update (used, cost), not token counts in the prompt response.
        assert row["total_tokens"] == row["context_used"] > 0 and row["input_tokens"] is None
        assert row["cost"] > 0 and row["currency"] == "USD"
        start, end = interval(row)
        assert start <= end
    agents = result.metadata["agents"]
    assert list(agents) == ["demo"] and agents["demo"]["processes"] == 1
    assert agents["demo"]["info"]["name"] == "acp-notebook-demo"
    assert all(wait_gone(pid) for pid in agents["demo"]["pids"])
    meta = result.metadata
    assert meta["models"] == ["demo:fast", "demo:smart"] and meta["repeats"] == 2 and meta["samples"] == 2
    assert meta["versions"]["acp-notebook"] and meta["versions"]["agent-client-protocol"]
    assert meta["planned"] == meta["executed"] == 8 and meta["skipped"] == 0 and meta["created"] <= meta["finished"]


def test_config_is_applied_after_the_model_and_a_bad_option_is_an_error_row(tmp_path):
    result = acpnb.sweep("hello", ["demo:smart", "demo:fast", "demo:turbo"], config={"thought_level": "high"},
                         cwd=tmp_path, progress=False)
    smart, fast, turbo = result.rows
    assert smart["status"] == "ok" and smart["config"]["thought_level"] == "high"
    assert "Thought 3 of 3" in smart["thoughts"]
    # thought_level exists only while smart is picked: the fast trial fails, not retried, and the sweep goes on.
    assert fast["status"] == "error" and "thought_level" in fast["error"] and fast["attempts"] == 1
    assert fast["confirmed_model"] == "demo:fast" and fast["text"] == ""
    assert turbo["status"] == "error" and "'turbo' is not a choice" in turbo["error"]
    assert "fast, smart" in turbo["error"] and turbo["confirmed_model"] is None


def test_boolean_config_values_may_be_given_as_words(tmp_path):
    result = acpnb.sweep("hello", ["demo:fast"], config={"show_thoughts": "on"}, cwd=tmp_path, progress=False)
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


@pytest.mark.slow
def test_an_agent_that_ignores_the_model_pick_produces_error_rows(tmp_path):
    acpnb.register("stubborn", STUBBORN)
    result = acpnb.sweep(["hello", "bye"], ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, progress=False)
    for row in (r for r in result.rows if r["model"] == "stubborn:smart"):
        assert row["status"] == "error" and row["attempts"] == 1
        assert "asked for model 'smart' but the agent reports 'fast'" in row["error"]
        assert row["confirmed_model"] == "stubborn:fast" != row["model"]
        assert row["text"] == "" and row["stop_reason"] is None  # never prompted
    for row in (r for r in result.rows if r["model"] == "stubborn:fast"):
        assert row["status"] == "ok" and row["text"] == f"[fast] ok: {row['prompt']}"
        assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (1, 3, 4)
    summary = {s["model"]: s for s in result.summary()}
    assert summary["stubborn:smart"]["errors"] == 2 and summary["stubborn:smart"]["latency_median_s"] is None
    assert summary["stubborn:fast"]["tokens_median"] == 4


def test_an_agent_that_cannot_start_fails_its_trials_only(tmp_path):
    acpnb.register("broken", [sys.executable, "-c", "import sys; sys.exit('no ACP here')"])
    result = acpnb.sweep("hello", ["broken:x", "demo:fast"], cwd=tmp_path, progress=False)
    broken, demo = result.rows
    assert broken["status"] == "error" and "AgentStartError" in broken["error"] and broken["attempts"] == 1
    assert demo["status"] == "ok"


# --- retries, timeouts, caps and the budget ------------------------------------------------------
@pytest.mark.slow
def test_transient_failures_are_retried_with_backoff(tmp_path):
    acpnb.register("scripted", scripted(tmp_path / "state"))
    prompts = ["ratelimit a 2", "exit b 1", "ratelimit c 5", "hello"]
    result = acpnb.sweep(prompts, ["scripted:fast"], retries=2, backoff=0.01, concurrency=1, cwd=tmp_path,
                         progress=False)
    recovered, restarted, gave_up, plain = result.rows
    assert (recovered["status"], recovered["attempts"]) == ("ok", 3)  # two rate limits, then an answer
    assert (restarted["status"], restarted["attempts"]) == ("ok", 2)  # the agent exited once and was restarted
    assert (gave_up["status"], gave_up["attempts"]) == ("error", 3) and "Rate limit exceeded" in gave_up["error"]
    assert (plain["status"], plain["attempts"]) == ("ok", 1)
    facts = result.metadata["agents"]["scripted"]
    assert facts["processes"] == 2 and all(wait_gone(pid) for pid in facts["pids"])


@pytest.mark.slow
def test_an_agent_that_keeps_crashing_is_an_error_after_the_retries(tmp_path):
    acpnb.register("stubborn", STUBBORN)
    result = acpnb.sweep(["crash", "hello"], ["stubborn:fast"], retries=1, backoff=0, concurrency=1, cwd=tmp_path,
                         progress=False)
    crashed, after = result.rows
    assert crashed["status"] == "error" and crashed["attempts"] == 2 and "AgentExitedError" in crashed["error"]
    assert "crashing on purpose" in crashed["error"]  # the agent's last stderr line
    assert after["status"] == "ok" and after["text"] == "[fast] ok: hello"
    assert result.metadata["agents"]["stubborn"]["processes"] == 3


@pytest.mark.slow
def test_a_slow_turn_is_cancelled_at_the_timeout_retried_and_recorded(tmp_path):
    acpnb.register("slowdemo", demo_with_delay(30))
    result = acpnb.sweep("hello", ["slowdemo:fast", "demo:fast"], timeout=0.5, retries=1, backoff=0, cwd=tmp_path,
                         progress=False)
    slow, quick = result.rows
    assert slow["status"] == "timeout" and slow["timed_out"] is True and slow["attempts"] == 2
    assert slow["stop_reason"] == "cancelled"  # the agent answered our session/cancel
    assert "no answer within 0.5 s" in slow["error"] and 0.5 <= slow["duration_s"] < 30
    assert quick["status"] == "ok"
    assert {s["model"]: s["timeouts"] for s in result.summary()} == {"slowdemo:fast": 1, "demo:fast": 0}


@pytest.mark.parametrize("concurrency", [1, 2])
@pytest.mark.slow
def test_trials_overlap_up_to_the_concurrency_limit(tmp_path, concurrency):
    acpnb.register("slowdemo", demo_with_delay(0.2))
    result = acpnb.sweep("hello", ["slowdemo:fast"], repeats=4, concurrency=concurrency, cwd=tmp_path,
                         progress=False)
    assert all(r["status"] == "ok" for r in result.rows), result.failed
    assert most_at_once(result.rows) == concurrency
    assert len({r["session_id"] for r in result.rows}) == 4  # a session per trial on the one agent process
    assert result.metadata["agents"]["slowdemo"]["processes"] == 1


@pytest.mark.slow
def test_an_agent_cap_limits_one_agent_while_others_overlap(tmp_path):
    acpnb.register("slow1", demo_with_delay(0.2))
    acpnb.register("slow2", demo_with_delay(0.2))
    result = acpnb.sweep("hello", ["slow1:fast", "slow2:fast"], repeats=3, concurrency=4,
                         agent_concurrency={"slow1": 1}, cwd=tmp_path, progress=False)
    assert all(r["status"] == "ok" for r in result.rows), result.failed
    assert most_at_once([r for r in result.rows if r["model"] == "slow1:fast"]) == 1
    assert most_at_once([r for r in result.rows if r["model"] == "slow2:fast"]) == 3
    assert result.metadata["parameters"]["agent_concurrency"] == {"slow1": 1}


@pytest.mark.slow
def test_the_budget_stops_new_trials_and_a_later_call_goes_on(tmp_path):
    acpnb.register("scripted", scripted(tmp_path / "state", cost=0.01))
    out = tmp_path / "run"
    stream = io.StringIO()
    first = acpnb.sweep([f"q{i}" for i in range(6)], ["scripted:fast"], budget=0.025, concurrency=1, cwd=tmp_path,
                        out=out, progress=TextProgress(stream))
    assert len(first) == 3 and first.metadata["stopped"].startswith("the budget of 0.025 is spent")
    assert first.metadata["cost_spent"] == pytest.approx(0.03)
    assert "stopped starting trials: the budget" in stream.getvalue()
    rest = acpnb.sweep([f"q{i}" for i in range(6)], ["scripted:fast"], concurrency=1, cwd=tmp_path, out=out,
                       progress=False)
    assert rest.metadata["skipped"] == 3 and rest.metadata["executed"] == 3 and rest.metadata["stopped"] is None
    assert [r["prompt"] for r in rest.rows] == [f"q{i}" for i in range(6)]


# --- scorers in a sweep ---------------------------------------------------------------------------
@pytest.mark.slow
def test_scores_explanations_and_a_model_graded_scorer(tmp_path):
    from acp_notebook.sweep import model_graded, numeric, scorer

    acpnb.register("scripted", scripted(tmp_path / "state", cost=0.01))

    def broken(row):
        raise RuntimeError("no luck")

    dataset = [{"id": "a", "prompt": "the answer is 4", "target": "4"}, {"id": "b", "prompt": "hello", "target": "5"}]
    result = acpnb.sweep(dataset, ["scripted:fast"], scorers=[numeric(), model_graded("scripted:smart"),
                                                              scorer(broken, name="broken")],
                         agent_concurrency=1, cwd=tmp_path, progress=False)  # the grader shares the trials' cap
    right, wrong = result.rows
    assert (right["score_numeric"], right["score_graded"]) == (1.0, 1.0)
    assert (wrong["score_numeric"], wrong["score_graded"]) == (0.0, 0.0)
    assert "GRADE: C" in right["explanation_graded"] and "GRADE: I" in wrong["explanation_graded"]
    assert right["score_broken"] is None and "RuntimeError: no luck" in right["explanation_broken"]
    assert result.metadata["cost_spent"] == pytest.approx(0.04)  # two trials and two gradings
    assert [s["kind"] for s in result.metadata["scorers"]] == ["Numeric", "ModelGraded", "callable"]


# --- out=, resume, interrupts ------------------------------------------------------------------------
class FileWatcher(Progress):
    """Counts the rows stored under ``out`` each time a trial finishes."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.seen: list[int] = []

    def _draw(self, row):
        if row is not None:
            self.seen.append(len(SweepResult.load(self.path)))


@pytest.mark.parametrize("name", ["run", "results.csv", "results.json", "results.jsonl"])
@pytest.mark.slow
def test_out_is_written_as_trials_finish_and_a_second_call_resumes(tmp_path, name):
    out = tmp_path / name
    watcher = FileWatcher(out)
    first = acpnb.sweep("hello", ["demo:fast"], repeats=2, cwd=tmp_path, out=out, progress=watcher)
    assert watcher.seen == [1, 2] and first.metadata["executed"] == 2

    second = acpnb.sweep("hello", ["demo:fast", "demo:smart"], repeats=2, cwd=tmp_path, out=out, progress=False)
    assert second.metadata["skipped"] == 2 and second.metadata["executed"] == 2 and len(second) == 4
    first_rows = {r["trial_id"]: r for r in first.rows}
    assert all(second_row == first_rows[second_row["trial_id"]] for second_row in second.rows
               if second_row["model"] == "demo:fast")  # not run again: same rows, sessions, timestamps
    stored = acpnb.load_run(out)
    assert sorted(r["trial_id"] for r in stored.rows) == sorted(r["trial_id"] for r in second.rows)
    assert stored.metadata["skipped"] == 2 and stored.metadata["previous"][0]["executed"] == 2

    third = acpnb.sweep("hello", ["demo:fast", "demo:smart"], repeats=2, cwd=tmp_path, out=out, progress=False)
    assert third.metadata["executed"] == 0 and third.rows == second.rows


def test_a_run_directory_has_rows_a_manifest_and_a_trajectory_per_trial(tmp_path):
    out = tmp_path / "runs" / "demo"
    result = acpnb.sweep(["hello", "What is 6 * 7?"], ["demo:smart"], cwd=tmp_path, out=out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "rows.jsonl", "trajectories"]
    manifest = acpnb.load_run(out).metadata
    assert manifest["format"] == "acp-notebook-sweep-run" and manifest["agents"]["demo"]["info"]["version"]
    assert manifest["dataset"]["fingerprint"] and manifest["parameters"]["retries"] == 2
    for row in result.rows:
        # Each trial's session is a recording: initialize and that session's frames only, replayable.
        recording = Recording.load(out / row["trajectory"])
        assert recording.header["agentInfo"]["name"] == "acp-notebook-demo"
        sessions = {f.msg.get("params", {}).get("sessionId") for f in recording.frames if "params" in f.msg}
        assert sessions - {None} == {row["session_id"]}
        kinds = [f.msg["params"]["update"]["sessionUpdate"] for f in recording.frames
                 if f.msg.get("method") == "session/update"]
        assert "agent_thought_chunk" in kinds and "agent_message_chunk" in kinds and kinds[-1] == "usage_update"
        replayed = replay_script(out / row["trajectory"], cwd=tmp_path)
        assert replayed.turns[-1].text == row["text"]


class InterruptAfterFirstTrial(Progress):
    """Calls ``interrupt`` (from the loop thread) once the first trial has finished. With ``taken``, the loop
    then waits there until the interrupt has been taken (the event is set), so no other trial can end first:
    otherwise, on a loaded machine, the trials left could all end before the interrupted thread runs again."""

    def __init__(self, interrupt, taken: threading.Event | None = None) -> None:
        super().__init__()
        self.interrupt = interrupt
        self.taken = taken

    def _draw(self, row):
        if row is not None and self.done == 1:
            self.interrupt()
            if self.taken is not None:
                self.taken.wait(INTERRUPT_WAIT_S)


@contextlib.contextmanager
def sigint_taken():
    """While open, SIGINT raises KeyboardInterrupt in the main thread and sets the event yielded first, as
    Python's default handler would (installed here, so no handler an earlier test left in place decides)."""
    taken = threading.Event()

    def take(_signum, _frame):
        taken.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, take)
    try:
        yield taken
    finally:
        signal.signal(signal.SIGINT, previous)


def check_interrupted(out: Path, planned: int) -> int:
    """The finished rows are stored and every agent the sweep started is gone; returns the row count."""
    stored = acpnb.load_run(out)
    assert 1 <= len(stored) < planned and all(r["status"] == "ok" for r in stored.rows)
    pids = stored.metadata["agents"]["slowdemo"]["pids"]  # written by the cleanup the call waited for
    assert pids and all(wait_gone(pid, timeout=0) for pid in pids)
    return len(stored)


@pytest.mark.slow
def test_an_interrupted_sweep_closes_its_agents_and_the_next_call_finishes_it(tmp_path):
    acpnb.register("slowdemo", demo_with_delay(0.2))
    out = tmp_path / "run"
    main_thread = threading.main_thread().ident

    def sigint() -> None:  # what a kernel interrupt does to the cell blocked in sweep()
        signal.pthread_kill(main_thread, signal.SIGINT)

    with sigint_taken() as taken, pytest.raises(KeyboardInterrupt):
        acpnb.sweep("hello", ["slowdemo:fast"], repeats=6, concurrency=2, cwd=tmp_path, out=out,
                    progress=InterruptAfterFirstTrial(sigint, taken))
    done = check_interrupted(out, 6)
    rest = acpnb.sweep("hello", ["slowdemo:fast"], repeats=6, concurrency=2, cwd=tmp_path, out=out, progress=False)
    assert rest.metadata["skipped"] == done and rest.metadata["executed"] == 6 - done
    assert len(rest) == 6 and all(r["status"] == "ok" for r in rest.rows)


def test_a_cancelled_asweep_closes_its_agents(tmp_path):
    acpnb.register("slowdemo", demo_with_delay(0.2))
    out = tmp_path / "run"

    async def cancel_after_first_trial() -> None:
        loop = asyncio.get_running_loop()
        holder: dict = {}
        progress = InterruptAfterFirstTrial(lambda: loop.call_soon_threadsafe(holder["task"].cancel))
        holder["task"] = asyncio.ensure_future(asweep("hello", ["slowdemo:fast"], repeats=6, concurrency=2,
                                                      cwd=tmp_path, out=out, progress=progress))
        with pytest.raises(asyncio.CancelledError):
            await holder["task"]

    asyncio.run(cancel_after_first_trial())
    check_interrupted(out, 6)


@pytest.mark.slow
def test_resume_keeps_failed_trials_unless_asked_to_retry_them_and_scores_old_rows(tmp_path):
    acpnb.register("stubborn", STUBBORN)
    out = tmp_path / "run"
    first = acpnb.sweep("hello", ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, out=out, progress=False)
    assert [r["status"] for r in first.rows] == ["error", "ok"]
    again = acpnb.sweep("hello", ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, out=out, progress=False)
    assert again.metadata["executed"] == 0
    retried = acpnb.sweep("hello", ["stubborn:smart", "stubborn:fast"], cwd=tmp_path, out=out, retry_failed=True,
                          progress=False)
    assert retried.metadata["executed"] == 1 and retried.rows[0]["started_at"] != first.rows[0]["started_at"]
    assert retried.rows[1] == first.rows[1]
    # A scorer added later scores the finished rows without running them again.
    scored = acpnb.sweep("hello", ["stubborn:smart", "stubborn:fast"], scorers=["includes"], cwd=tmp_path, out=out,
                         progress=False)
    assert scored.metadata["executed"] == 0 and scored.metadata["rescored"] == 1
    assert scored.rows[1]["score_includes"] is None  # no target: nothing to compare, yet the column is there
    assert scored.rows[1]["explanation_includes"] == "the sample has no target"
    assert acpnb.load_run(out).rows[1]["explanation_includes"] == "the sample has no target"


def test_resume_refuses_a_changed_dataset(tmp_path):
    out = tmp_path / "run"
    acpnb.sweep([{"id": "q1", "prompt": "hello"}], ["demo:fast"], cwd=tmp_path, out=out, progress=False)
    with pytest.raises(ValueError, match="sample 'q1' with another prompt or target"):
        acpnb.sweep([{"id": "q1", "prompt": "bye"}], ["demo:fast"], cwd=tmp_path, out=out, progress=False)
    acpnb.sweep("hello", ["demo:fast"], cwd=tmp_path, out=tmp_path / "r.csv", progress=False)
    with pytest.raises(ValueError, match="other columns than this sweep writes"):  # a CSV's header is fixed
        acpnb.sweep("hello", ["demo:fast"], scorers=["exact"], out=tmp_path / "r.csv", progress=False)


# --- agent= (an Agent of our own, a spec, the proxy) ------------------------------------------------
def test_with_an_agent_the_ids_are_its_own_model_values_and_it_stays_open(tmp_path):
    agent = acpnb.start("demo", cwd=tmp_path)
    try:
        result = acpnb.sweep("hello", ["fast", "smart"], agent=agent, progress=False)
        assert [r["confirmed_model"] for r in result.rows] == ["fast", "smart"]
        assert all(r["status"] == "ok" and r["agent"] == "demo" for r in result.rows)
        assert agent.status == "running" and agent.sessions == []  # sessions closed, agent kept
        assert result.metadata["agents"]["demo"]["started_by_sweep"] is False
        with pytest.raises(ValueError, match="each worker starts its own agents"):
            acpnb.sweep("hello", ["fast"], agent=agent, executor="ray", progress=False)
    finally:
        agent.close()


def test_with_an_agent_spec_the_sweep_starts_and_closes_it(tmp_path):
    result = acpnb.sweep("hello", ["fast", "smart"], agent="demo", cwd=tmp_path, progress=False)
    assert all(r["status"] == "ok" for r in result.rows)
    facts = result.metadata["agents"]["demo"]
    assert facts["processes"] == 1 and all(wait_gone(pid) for pid in facts["pids"])


@pytest.mark.slow
def test_sweep_through_the_proxy(tmp_path):
    proxy = acpnb.start_proxy({"a": "demo", "b": "demo"}, cwd=tmp_path)
    try:
        result = acpnb.sweep(["hello", "bye"], ["a:fast", "b:smart", "c:fast"], agent=proxy, concurrency=4,
                             progress=False)
        good = [r for r in result.rows if r["model"] != "c:fast"]
        assert len(result) == 6 and all(r["status"] == "ok" for r in good), result.failed
        for row in good:
            assert row["confirmed_model"] == row["model"] == row["model_at_end"] and row["agent"] == proxy.name
            assert row["text"].startswith(f"[{row['model'].split(':')[1]}]")
        for row in (r for r in result.rows if r["model"] == "c:fast"):  # an id the proxy does not offer
            assert row["status"] == "error" and "'c:fast' is not a choice" in row["error"] and "a:fast" in row["error"]
        assert proxy.status == "running" and proxy.sessions == []
    finally:
        proxy.close()


def test_asweep_runs_from_another_event_loop(tmp_path):
    result = asyncio.run(asweep("hello", ["demo:fast"], scorers=["includes"], cwd=tmp_path, progress=False))
    assert result.rows[0]["status"] == "ok" and "score_includes" in result.rows[0]


# --- progress ------------------------------------------------------------------------------------------
def test_text_progress_on_a_pipe_writes_a_line_per_trial(tmp_path):
    stream = io.StringIO()
    result = acpnb.sweep("hello", ["demo:fast", "demo:turbo"], cwd=tmp_path, progress=TextProgress(stream))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "sweep: 2 trials to do"
    assert len(lines) == 4 and all(line.startswith("sweep [") for line in lines[1:3])
    assert any("demo:turbo" in line and "error" in line for line in lines)
    summary = lines[3]  # one line at the end: counts per model and the time taken
    assert summary.startswith("sweep: 2 of 2 trials in 0:0") and "demo:fast 1 ok" in summary
    assert "demo:turbo 0 ok 1 failed" in summary
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
    assert "elapsed" in text and text.splitlines()[-1].startswith("sweep: 2 of 2 trials in ")


def test_widget_progress_is_updated_from_another_thread():
    bar = WidgetProgress()
    bar.start(3, skipped=1)
    assert (bar.bar.value, bar.bar.max) == (0, 3)
    worker = threading.Thread(target=lambda: (bar.finished({"status": "ok"}), bar.finished({"status": "error"}),
                                              bar.stopped("the budget is spent")))
    worker.start()
    worker.join(10)
    assert bar.bar.value == 2 and bar.bar.bar_style == "warning"
    assert bar.label.value.startswith("2/3 finished, 1 failed (1 already done); stopped: the budget is spent · ")
    assert "? 1 ok 1 failed" in bar.label.value and "elapsed, about 0:0" in bar.label.value  # ETA after a trial
    live = bar._bundle(False, "")
    assert "application/vnd.jupyter.widget-view+json" in live.data and "2/3 finished" in live.data["text/plain"]
    bar.close()
    final = bar._bundle(True, "").data  # what a saved notebook keeps: the summary line, no widget
    assert set(final) == {"text/plain", "text/html"} and final["text/plain"].startswith("sweep: 2 of 3 trials in ")
    assert "(1 not run)" in final["text/plain"] and "stopped: the budget is spent" in final["text/plain"]
