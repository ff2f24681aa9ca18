"""The parts of sweeps that need no agent: datasets, scorers, statistics, result views and the run files."""

from __future__ import annotations

import json
import math
import sys

import pytest

from acp_notebook.sweep import (
    COLUMN_SOURCES,
    Sample,
    SweepResult,
    exact,
    includes,
    json_field,
    load_dataset,
    model_graded,
    numeric,
    percentile,
    regex,
    scorer,
    sign_test,
    trial_id,
    wilson_interval,
)
from acp_notebook.sweep.columns import FIXED_COLUMNS
from acp_notebook.sweep.scorers import as_scorers, parse_grade, parse_scorer, to_score
from acp_notebook.sweep.stats import mean_interval, t_quantile
from acp_notebook.sweep.store import RunStore, read_results


# --- datasets ------------------------------------------------------------------------------
def test_prompts_dicts_and_frames_become_samples_with_stable_ids():
    from_prompts = load_dataset(["hello", "bye"])
    assert [s.prompt for s in from_prompts] == ["hello", "bye"] and [s.index for s in from_prompts] == [0, 1]
    assert load_dataset(["hello", "bye"]) == from_prompts  # derived ids do not change between runs
    assert load_dataset("hello")[0].id == from_prompts[0].id  # a single prompt is a one-sample dataset
    records = [{"id": "q1", "a": 2, "b": 3, "target": "5", "level": "easy"}]
    (sample,) = load_dataset(records, prompt="What is {a} + {b}?")
    assert sample == Sample("q1", "What is 2 + 3?", "5", {"a": 2, "b": 3, "level": "easy"}, 0)
    pd = pytest.importorskip("pandas")
    (from_frame,) = load_dataset(pd.DataFrame(records), prompt="What is {a} + {b}?")
    assert from_frame == sample and type(from_frame.metadata["a"]) is int  # numpy ints become Python ints


def test_identical_samples_get_distinct_derived_ids_and_given_ids_must_be_unique():
    first, second, other = load_dataset(["same", "same", "other"])
    assert second.id == f"{first.id}-2" and other.id not in (first.id, second.id)
    with pytest.raises(ValueError, match="'a' appear more than once"):
        load_dataset([{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}])


def test_files_csv_json_and_jsonl(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"id": "a", "prompt": "one", "target": 1}\n\n{"prompt": "two"}\n')
    (tmp_path / "t.csv").write_text("sample_id,input,target,topic\nx,one,,maths\n")
    (tmp_path / "t.json").write_text(json.dumps(["one", {"prompt": "two", "target": "2"}]))
    jsonl = load_dataset(tmp_path / "t.jsonl")
    assert [(s.id, s.prompt, s.target) for s in jsonl][0] == ("a", "one", 1) and jsonl[1].target is None
    (csv_sample,) = load_dataset(str(tmp_path / "t.csv"))
    assert (csv_sample.id, csv_sample.prompt, csv_sample.target, dict(csv_sample.metadata)) == (
        "x", "one", None, {"topic": "maths"})
    assert [s.prompt for s in load_dataset(tmp_path / "t.json")] == ["one", "two"]
    # A string with spaces that names no file is a prompt, not a path.
    assert load_dataset("what is in notes.json")[0].prompt == "what is in notes.json"


@pytest.mark.parametrize("source, options, message", [
    ("missing.jsonl", {}, "does not exist"),
    ([], {}, "empty"),
    ([{"a": 1}], {}, "no prompt: its fields are a"),
    ([{"a": 1}], {"prompt": "{b}"}, r"names \{b\} but sample 0 has no such field"),
    ([{"prompt": "x", "status": "new"}], {}, "'status' would overwrite result columns"),
    ([{"id": " ", "prompt": "x"}], {}, "empty id"),
    ([3], {}, "items are prompts"),
])
def test_bad_datasets_say_what_to_do(source, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        load_dataset(source, **options)


def test_a_bad_jsonl_line_is_named(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a"}\n{oops\n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not JSON"):
        load_dataset(tmp_path / "bad.jsonl")


# --- scorers ---------------------------------------------------------------------------------
ANSWER = r"Answer:\s*(\S+)"


def score(scorer_, text, target=None):
    return to_score(scorer_.score({"text": text, "target": target}), scorer_.name)


def test_built_in_scorers():
    reply = "Working it out: 6 * 7 = 42.\nAnswer: 42"
    assert score(exact(extract=ANSWER), reply, "42").value == 1.0
    assert score(exact(), "  Paris ", "paris").value == 1.0
    assert score(exact(ignore_case=False), "Paris", "paris").value == 0.0
    miss = score(exact(extract=ANSWER), "no answer here", "42")
    assert miss.value == 0.0 and "no answer found" in miss.explanation
    assert score(includes(), reply, "42").value == 1.0 and score(includes(), reply, "43").value == 0.0
    assert score(regex(r"^Answer: {target}$"), reply, "42").value == 1.0
    assert score(regex(r"^Answer: {target}$"), reply, "4.").value == 0.0  # the target is escaped
    assert score(numeric(), reply, 42).value == 1.0 and score(numeric(), "= 1,000.5", "1000.5").value == 1.0
    assert score(numeric(tolerance=0.01, relative=True), "Answer: 100.5", "100").value == 1.0
    assert score(numeric(), "Answer: 43", "42").explanation == "43 != 42"
    unscored = score(numeric(), "Answer: 42", "undefined")
    assert unscored.value is None and "not a number" in unscored.explanation
    assert score(numeric(), "no digits", None).value is None  # no target: not scored


def test_json_field_finds_json_in_the_reply():
    fenced = 'Here you go:\n```json\n{"result": {"items": [1, 2, 3]}, "name": "x"}\n```'
    assert score(json_field("result.items.1"), fenced, 2).value == 1.0
    assert score(json_field("name", "x"), fenced).value == 1.0
    assert score(json_field("name"), 'prefix {"name": "x"} suffix', "x").value == 1.0
    missing = score(json_field("result.other"), fenced, 1)
    assert missing.value == 0.0 and "missing 'other'" in missing.explanation
    assert score(json_field("a"), "not json", 1).explanation == "no JSON in the reply"
    assert json_field("result.items").name == "json_result_items"


def test_callables_and_what_they_may_return():
    def long_enough(row):
        return len(row["text"]) > 3, f"{len(row['text'])} characters"

    wrapped = as_scorers([long_enough, scorer(lambda row: 0.25, name="quarter"), "exact"])
    assert [s.name for s in wrapped] == ["long_enough", "quarter", "exact"]
    assert to_score(wrapped[0].score({"text": "hello"}), "x").explanation == "5 characters"
    assert to_score(True, "x").value == 1.0 and to_score(None, "x").value is None
    with pytest.raises(TypeError, match="return a bool, a number"):
        to_score("yes", "x")
    with pytest.raises(ValueError, match="lambda has no usable name"):
        as_scorers([lambda row: 1])
    with pytest.raises(ValueError, match="named 'exact'.*different names"):
        as_scorers(["exact", exact()])
    with pytest.raises(ValueError, match="letters, digits and _"):
        exact(name="my score")


def test_scorer_specs_for_the_command_line():
    assert parse_scorer("numeric=0.5").tolerance == 0.5
    assert parse_scorer("graded=demo:smart").grader == "demo:smart"
    assert parse_scorer("json=answer").field == "answer"
    assert parse_scorer("exact", extract=ANSWER).extract == ANSWER
    with pytest.raises(ValueError, match="unknown scorer 'fuzzy'"):
        parse_scorer("fuzzy")


def test_grades_are_read_from_the_last_grade_line():
    assert parse_grade("GRADE: I\nOn reflection...\nGRADE: C") == 1.0
    assert parse_grade("grade: p") == 0.5 and parse_grade("GRADE: 0.75") == 0.75
    assert parse_grade("looks right to me") is None
    prompt = model_graded("demo:smart", rubric="be strict").prompt_for(
        {"prompt": "What is 1 + 1?", "target": "2", "text": "Answer: 2", "topic": "x"})
    assert "[Task]\nWhat is 1 + 1?" in prompt and "[Reference answer]\n2" in prompt and "be strict" in prompt


# --- statistics ------------------------------------------------------------------------------
def test_intervals_and_tests_match_known_values():
    half = wilson_interval(20, 40)
    assert (half.low, half.high) == pytest.approx((0.35200, 0.64800), abs=1e-5)
    full = wilson_interval(40, 40)
    assert full.high == 1.0 and full.low == pytest.approx(0.91238, abs=1e-5)
    assert t_quantile(0.975, 10) == pytest.approx(2.228139, abs=1e-6)
    assert t_quantile(0.975, 1) == pytest.approx(12.706205, abs=1e-5)
    spread = mean_interval([1, 2, 3, 4, 5])
    assert (spread.low, spread.high) == pytest.approx((1.036757, 4.963243), abs=1e-6)
    assert sign_test(0, 20) == pytest.approx(2 * 0.5 ** 20)
    assert sign_test(3, 10) == pytest.approx(0.092285, abs=1e-6) and sign_test(0, 0) == 1.0
    assert percentile([4, 1, 3, 2], 90) == pytest.approx(3.7) and percentile([], 50) is None


# --- results from rows -----------------------------------------------------------------------
def row(model, sample, score_value, *, repeat=0, status="ok", cost=0.01, **extra):
    base = dict.fromkeys(FIXED_COLUMNS)
    base.update(trial_id=trial_id(model, sample, repeat), model=model, sample_id=sample, repeat=repeat,
                status=status, score_exact=score_value if status == "ok" else None, duration_s=0.5, ttft_s=0.1,
                cost=cost, currency="USD", text="t", prompt="p", attempts=1,
                started_at="2026-01-01T10:00:00+00:00", ended_at="2026-01-01T10:00:01+00:00", **extra)
    return base


@pytest.fixture()
def synthetic():
    rows = [row("a:x", f"s{i}", 1.0, topic="t") for i in range(10)]
    rows += [row("b:y", f"s{i}", 1.0 if i < 4 else 0.0, topic="t") for i in range(10)]
    rows.append(row("b:y", "s10", None, status="error", error="boom", topic="t"))
    return SweepResult(rows, {"models": ["a:x", "b:y"], "scorers": [{"name": "exact"}]})


def test_summary_intervals_errors_and_comparison(synthetic):
    a, b = synthetic.summary()
    assert (a["score_exact"], a["score_exact_n"]) == (1.0, 10)
    assert (b["trials"], b["errors"], b["score_exact"]) == (11, 1, 0.4)
    assert (b["score_exact_low"], b["score_exact_high"]) == pytest.approx(
        (wilson_interval(4, 10).low, wilson_interval(4, 10).high))
    assert synthetic.summary(errors_as_zero=True)[1]["score_exact"] == pytest.approx(4 / 11)
    assert "0.400 [0.168, 0.687] n=10" in str(synthetic.summary())
    comparison = synthetic.compare("a:x", "b:y")
    assert (comparison.samples, comparison.a_better, comparison.b_better, comparison.ties) == (10, 6, 0, 4)
    assert comparison.test == "exact McNemar" and comparison.p_value == pytest.approx(sign_test(6, 0))
    assert comparison.difference == pytest.approx(0.6) and comparison.low < 0.6 < comparison.high
    assert "a:x better on 6" in str(comparison)
    with pytest.raises(ValueError, match="no rows for model 'c:z'"):
        synthetic.compare("a:x", "c:z")
    with pytest.raises(ValueError, match="no scorer 'f1'"):
        synthetic.compare("a:x", "b:y", scorer="f1")


def test_repeats_are_averaged_per_sample_before_the_interval():
    rows = [row("a:x", f"s{i}", float(k == 0), repeat=k) for i in range(4) for k in range(2)]
    (entry,) = SweepResult(rows, {"models": ["a:x"]}).summary()
    assert entry["score_exact"] == 0.5 and entry["score_exact_n"] == 4  # four samples, each at 0.5
    assert entry["score_exact_low"] == entry["score_exact_high"] == 0.5  # no spread between samples


def test_to_pandas_puts_what_matters_first(synthetic):
    pytest.importorskip("pandas")
    frame = synthetic.to_pandas()
    assert list(frame.columns[:9]) == ["model", "sample_id", "repeat", "status", "score_exact", "duration_s",
                                       "ttft_s", "cost", "text"]
    assert "input_tokens" not in frame.columns  # no trial filled it
    assert list(frame.columns).count("model") == 1 and "confirmed_model" not in frame.columns
    assert list(frame.columns).index("topic") > list(frame.columns).index("error")
    assert str(frame["started_at"].dtype).startswith("datetime64") and frame["started_at"].dt.tz is not None
    full = synthetic.to_pandas(full=True)
    assert {"trial_id", "confirmed_model", "explanation_exact", "config"} <= set(full.columns)


def test_to_pandas_without_pandas_says_how_to_install_it(synthetic, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"acp-notebook\[pandas\]"):
        synthetic.to_pandas()


def test_plots(synthetic):
    pytest.importorskip("matplotlib")
    scores = synthetic.plot()
    (ax,) = scores.axes
    assert ax.get_title() == "Score per model" and [t.get_text() for t in ax.get_xticklabels()] == [
        "a:x\n10/10 ok", "b:y\n10/11 ok"]
    cost = synthetic.plot("cost")
    assert cost.axes[0].get_title() == "Score against cost"
    assert [t.get_text() for t in cost.axes[0].texts] == ["a:x", "b:y"]
    assert synthetic.plot("latency").axes[0].get_title() == "Turn latency per model"
    with pytest.raises(ValueError, match="plot kind"):
        synthetic.plot("pie")


def test_every_column_says_where_it_comes_from():
    documented = {c.replace("<name>", "x") for c in COLUMN_SOURCES}
    assert set(FIXED_COLUMNS) <= documented | {"score_x", "explanation_x"}


# --- the run files ---------------------------------------------------------------------------------
def test_a_half_written_last_row_is_dropped_and_later_rows_replace_earlier_ones(tmp_path):
    run = tmp_path / "run"
    store = RunStore(run, ["model"])
    first, second = row("a:x", "s0", 0.0, status="error"), row("a:x", "s1", 1.0)
    store.append(first, {})
    store.append(second, {})
    store.append({**first, "status": "ok", "score_exact": 1.0}, {})  # a retry of s0
    (run / "rows.jsonl").open("a").write('{"model": "a:x", "sample_id": "s2", "rep')  # killed mid-write
    rows, _ = read_results(run)
    assert [(r["sample_id"], r["status"]) for r in rows] == [("s1", "ok"), ("s0", "ok")]
    RunStore(run, ["model"]).append(row("a:x", "s2", 1.0), {})  # reopening cuts the partial line
    assert [r["sample_id"] for r in read_results(run)[0]] == ["s1", "s0", "s2"]


def test_results_files_and_mistaken_paths(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="is a file but not a results file"):
        RunStore(tmp_path / "notes.txt", ["model"])
    with pytest.raises(ValueError, match="not a sweep run directory"):
        read_results(tmp_path)
    (tmp_path / "old.jsonl").write_text(json.dumps({"model": "a:x", "prompt": "p", "repeat": 0}) + "\n")
    with pytest.raises(ValueError, match="without a trial_id"):
        read_results(tmp_path / "old.jsonl")
    assert math.isclose(SweepResult([row("a:x", "s0", 1.0)]).summary()[0]["cost_total"], 0.01)
