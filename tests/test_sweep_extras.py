"""What the shipped notebooks import is installed by the `[all]` extra; a missing optional library is named in
one line with the extra that adds it; the sweep summary shows few columns, each interval one figure."""

from __future__ import annotations

import ast
import json
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from acp_notebook.sweep import SweepResult
from acp_notebook.sweep.columns import FIXED_COLUMNS
from acp_notebook.sweep.extras import MissingExtra
from acp_notebook.sweep.trial import trial_id

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _unguarded_imports(source: str) -> set[str]:
    """Top-level modules a cell imports outside an ``if`` or ``try`` (a guarded import is the cell's own choice)."""
    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    guarded = {id(n) for node in ast.walk(tree) if isinstance(node, (ast.If, ast.Try))
               for n in ast.walk(node) if n is not node}
    found = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_all_extra_installs_what_every_shipped_notebook_imports():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    provided = {_name(r) for r in [*project["dependencies"], *project["optional-dependencies"]["all"]]}
    provided.add("acp-notebook")
    distributions = packages_distributions()
    missing = {}
    for notebook in NOTEBOOKS:
        cells = json.loads(notebook.read_text())["cells"]
        modules = set().union(*(_unguarded_imports("".join(c["source"])) for c in cells if c["cell_type"] == "code"))
        for module in sorted(modules - set(sys.stdlib_module_names) - {"acp_notebook"}):
            names = {_name(d) for d in distributions.get(module, [module])}
            if not names & provided:
                missing.setdefault(notebook.name, []).append(module)
    assert not missing, f"imported by the notebooks but not in [all]: {missing}"
    assert {"atif", "inspect-ai"} <= provided  # agentic-evals.ipynb's exports


def test_binder_installs_the_all_extra():
    assert '".[all]"' in (ROOT / "binder" / "postBuild").read_text()


def _hide(monkeypatch, package):
    """As if ``package`` were not installed: it and any of its modules an earlier test of this worker imported."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")] or [package]:
        monkeypatch.setitem(sys.modules, name, None)


def test_a_missing_extra_is_one_line_naming_the_pip_command(monkeypatch, tmp_path):
    rows = [_row("a:x", "s0", 1.0)]
    result = SweepResult(rows, {"models": ["a:x"], "scorers": [{"name": "exact"}]})
    _hide(monkeypatch, "inspect_ai")
    with pytest.raises(MissingExtra) as caught:
        result.export_inspect(tmp_path / "x.eval")
    error = caught.value
    assert isinstance(error, ImportError) and error.extra == "eval"
    # What IPython shows instead of a traceback: one line, the command to run in it.
    assert error._render_traceback_() == [
        "MissingExtra: export_inspect() needs inspect_ai, which is not installed: pip install 'acp-notebook[eval]'"]
    _hide(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtra, match=r"pip install 'acp-notebook\[plot\]'$"):
        result.plot()


def test_a_missing_extra_in_a_notebook_cell_shows_one_line():
    """Through IPython's own error display, as a notebook cell shows it."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    code = ("import sys; sys.modules['atif'] = None\n"
            "from acp_notebook.sweep import SweepResult\n"
            "SweepResult([], {}).export_atif('unused')")
    try:
        with capture_output() as shown:
            shell.run_cell(code)
    finally:
        sys.modules.pop("atif", None)
    text = re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout + shown.stderr).strip()
    assert text == "MissingExtra: export_atif() needs atif, which is not installed: pip install 'acp-notebook[eval]'"


def _row(model, sample, value, **extra):
    base = dict.fromkeys(FIXED_COLUMNS)
    base.update(trial_id=trial_id(model, sample, 0), model=model, sample_id=sample, repeat=0, status="ok",
                score_exact=value, score_tests=value, score_style=0.5, duration_s=12.5, ttft_s=1.5,
                total_tokens=123456, input_tokens=100000, output_tokens=23456, cost=0.0123, currency="USD",
                text="t", prompt="p", attempts=1, **extra)
    return base


def wide_result() -> SweepResult:
    """Three scorers, tokens and cost: everything a summary can hold."""
    rows = [_row(model, f"s{i}", float(i % 2)) for model in ("claude:sonnet-4.5", "codex:gpt-5-codex")
            for i in range(7)]
    return SweepResult(rows, {"models": ["claude:sonnet-4.5", "codex:gpt-5-codex"],
                              "scorers": [{"name": "exact"}, {"name": "tests"}, {"name": "style"}]})


def test_the_summary_shows_few_columns_and_keeps_the_rest_in_pandas():
    summary = wide_result().summary()
    header, cells = summary._table()
    assert header == ["model", "trials", "ok", "errors", "exact [95% CI]", "tests [95% CI]", "style [95% CI]",
                      "median_s", "median_tokens", "cost/trial"]
    assert cells[0][-1] == "0.0123 USD"
    assert re.fullmatch(r"0\.429 \[0\.\d{3}, 0\.\d{3}\] n=7", cells[0][4])
    html = summary._repr_html_()
    assert "white-space: nowrap" in html and "ttft" not in html and "p90" not in html
    frame = summary.to_pandas()
    assert {"latency_p90_s", "ttft_median_s", "tokens_total", "cost_total", "score_exact_low"} <= set(frame.columns)


def test_timeouts_are_a_column_only_when_there_were_some():
    result = wide_result()
    assert "timeouts" not in result.summary()._table()[0]
    result.rows[0].update(status="timeout", timed_out=True)
    assert "timeouts" in result.summary()._table()[0]
