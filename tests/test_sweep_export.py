"""A workspace sweep's trials read back: `res.show(row)` and `acp-notebook sweep show`, the ATIF export (validated
by the `atif` package's models) and the Inspect AI eval log (read back by `inspect_ai.log.read_eval_log`)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.sweep import main, tasks

TASKS = Path(__file__).parent.parent / "notebooks" / "tasks"
atif = pytest.importorskip("atif")


@pytest.fixture(scope="module")
def inspect_log():
    """inspect_ai's log reader, imported by the tests that read a log back: importing inspect_ai takes about a
    second, which every xdist worker would pay at collection."""
    return pytest.importorskip("inspect_ai.log")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "run"
    return acpnb.sweep(tasks(TASKS), ["demo:fast", "demo:smart"], out=out, progress=False)


def smart_fix(result) -> int:
    return next(i for i, r in enumerate(result.rows) if r["sample_id"] == "fix-add" and r["model"] == "demo:smart")


@pytest.mark.slow
def test_show_prints_the_prompt_the_tool_calls_the_scores_and_the_diff(run):
    shown = io.StringIO()
    run.show(smart_fix(run), file=shown)
    text = shown.getvalue()
    assert text.startswith("trial demo_smart--fix-add--r0-") and "status ok" in text
    assert "In calc.py, replace `return a - b` with `return a + b`." in text
    assert "tool call call-1 [read] Read calc.py: completed" in text and "[edit] Write calc.py: completed" in text
    assert "tests: 1.0" in text and "add works" in text
    assert text.rstrip().endswith("-    return a - b\n+    return a + b")
    trial_id = run.rows[smart_fix(run)]["trial_id"]
    assert run.trial(trial_id[:24]) == run.rows[smart_fix(run)]
    with pytest.raises(KeyError, match="trial ids start with 'demo_'"):
        run.trial("demo_")


def test_the_cli_shows_a_trial_by_number_or_id(run, capsys):
    assert main(["show", str(run.path), str(smart_fix(run))]) == 0
    by_number = capsys.readouterr().out
    assert main(["show", str(run.path), run.rows[smart_fix(run)]["trial_id"]]) == 0
    assert capsys.readouterr().out == by_number and "+    return a + b" in by_number
    with pytest.raises(SystemExit):
        main(["show", str(run.path), "99"])
    assert "no row 99: the run has 6 rows (0-5)" in capsys.readouterr().err


def test_the_atif_export_validates_with_the_atif_models(run, tmp_path):
    written = run.export_atif(tmp_path / "atif")
    assert sorted(p.name for p in written) == sorted(f"{r['trial_id']}.json" for r in run.rows)
    trajectory = atif.Trajectory.model_validate(json.loads((tmp_path / "atif" / written[smart_fix(run)].name)
                                                           .read_text()))
    assert trajectory.schema_version == "ATIF-v1.8" and trajectory.agent.name == "acp-notebook-demo"
    assert trajectory.agent.model_name == "demo:smart" and trajectory.steps[0].source == "user"
    calls = [c.function_name for s in trajectory.steps for c in (s.tool_calls or [])]
    assert calls == ["read", "edit"] and trajectory.extra["scores"] == {"tests": 1.0}
    assert "+    return a + b" in trajectory.extra["diff"]


@pytest.mark.slow
def test_the_inspect_log_is_read_back_by_inspect_ai(run, inspect_log, tmp_path):
    written = run.export_inspect(tmp_path / "run.eval")
    assert [p.name for p in written] == ["run-demo_fast.eval", "run-demo_smart.eval"]
    logs = {str(p.name): inspect_log.read_eval_log(str(p)) for p in written}
    smart = logs["run-demo_smart.eval"]
    assert smart.status == "success" and smart.eval.model == "demo:smart" and len(smart.samples) == 3
    assert smart.results.scores[0].metrics["mean"].value == 1.0
    assert logs["run-demo_fast.eval"].results.scores[0].metrics["mean"].value == pytest.approx(1 / 3)
    sample = next(s for s in smart.samples if s.id == "fix-add")
    assert sample.scores["tests"].value == 1.0 and [m.role for m in sample.messages][:3] == ["user", "assistant",
                                                                                              "tool"]
    one = acpnb.SweepResult([r for r in run.rows if r["model"] == "demo:smart"], run.metadata, path=run.path)
    assert one.export_inspect(tmp_path / "one.eval") == [tmp_path / "one.eval"]


def test_a_missing_package_gets_a_one_line_install_hint(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "atif", None)
    hint = r"^export_atif\(\) needs atif, which is not installed: pip install 'acp-notebook\[eval\]'$"
    with pytest.raises(ImportError, match=hint):
        run.export_atif(tmp_path / "atif")
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(ImportError, match=r"needs inspect_ai, which is not installed: "
                                          r"pip install 'acp-notebook\[eval\]'$"):
        run.export_inspect(tmp_path / "x.eval")


def test_the_cli_exports_both_logs(inspect_log, tmp_path, capsys):
    assert main(["--tasks", str(TASKS), "-m", "demo:smart", "--out", str(tmp_path / "run"), "--no-progress",
                 "--export-atif", str(tmp_path / "atif"), "--export-inspect", str(tmp_path / "run.eval")]) == 0
    out = capsys.readouterr().out
    assert "ATIF trajectories: 3 file(s)" in out and f"Inspect eval logs: {tmp_path / 'run.eval'}" in out
    assert inspect_log.read_eval_log(str(tmp_path / "run.eval")).eval.model == "demo:smart"
    with pytest.raises(SystemExit):
        main(["--tasks", str(TASKS), "-m", "demo:smart", "--export-atif", str(tmp_path / "a")])
    assert "--export-atif and --export-inspect read the trials' recordings: add --out DIR" in capsys.readouterr().err


def test_without_a_run_directory_show_and_the_exports_use_what_the_sweep_kept(tmp_path):
    res = acpnb.sweep(tasks(TASKS), ["demo:smart"], progress=False)
    fix = next(i for i, r in enumerate(res.rows) if r["sample_id"] == "fix-add")
    shown = io.StringIO()
    res.show(fix, file=shown)
    assert "tool call call-1 [read] Read calc.py: completed" in shown.getvalue()
    assert "+    return a + b" in shown.getvalue() and res.rows[fix]["diff"] is None
    (written,) = [p for p in res.export_atif(tmp_path / "atif") if "fix-add" in p.name]
    trajectory = atif.Trajectory.model_validate(json.loads(written.read_text()))
    assert [c.function_name for s in trajectory.steps for c in (s.tool_calls or [])] == ["read", "edit"]
