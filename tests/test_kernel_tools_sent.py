"""What a person sees of what was sent and read (issue 35, point 5): ``{name}`` substitutions and attachments
listed in the cell with their text (capped); list_variables on numpy scalars and 0-d arrays; the demo agent's
proposed plot, made for the frame it inspected.
"""

from __future__ import annotations

import html
import sys

import pytest

import acp_notebook as acpnb
from acp_notebook.kernel_tools.namespace import list_variables
from acp_notebook.widgets.static import SENT_SHOWN, sent_label

TIMEOUT = 30.0


def test_list_variables_shows_numpy_scalars_and_0d_arrays_by_their_value():
    np = pytest.importorskip("numpy")
    text = list_variables({"total": np.float64(1491.5), "count": np.array(3), "flag": np.bool_(True),
                           "api_key": np.int64(5), "grid": np.zeros((2, 3)), "label": np.str_("north")}).content[0]["text"]
    assert "- total: numpy.float64, scalar 1491.5, 8 B" in text
    assert "- count: numpy.ndarray, 0-d array 3, 8 B" in text and "- flag: numpy.bool, scalar True" in text.replace("bool_", "bool")
    assert "- api_key: numpy.int64, scalar, 8 B" in text  # a secret-named one shows no value
    assert "- grid: numpy.ndarray, shape 2x3, 48 B" in text and "- label: numpy.str_, scalar," in text
    assert "shape ," not in text


def test_a_sent_label_shows_the_start_of_the_text_on_one_line():
    assert sent_label("{n}", "[3, 1, 4]") == "{n}: \u201c[3, 1, 4]\u201d"
    long = sent_label("{df}", "a\nb " + "x" * 1000)
    assert long.startswith("{df}: \u201ca b xxx") and "(1,004 characters)" in long and len(long) < SENT_SHOWN + 60
    assert sent_label("{s}", "\u202eevil") == "{s}: \u201c\\u202eevil\u201d"  # hidden characters spelled out
    assert sent_label("df (table, 1 kB)", "") == "df (table, 1 kB)"


def test_the_cell_lists_each_name_filled_in_and_each_attachment_as_sent(tmp_path, monkeypatch):
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("load_ext", "acp_notebook")
    ip.user_ns.update(sent_numbers=[3, 1, 4], sent_note="ship it on Monday")
    try:
        ip.run_line_magic("config", "AcpMagics.kernel_tools = 'off'")
        ip.run_line_magic("acp", "start demo")
        result = ip.run_cell("%%acp --attach sent_note\nhello, the numbers are {sent_numbers}")
        assert result.error_in_exec is None
        view = ip.magics_manager.registry["AcpMagics"].last_view
        view.finished.result(TIMEOUT)
        shown = html.unescape(view.attached.value)
        assert "{sent_numbers}: \u201c[3, 1, 4]\u201d" in shown
        assert "sent_note (text" in shown and "\u201cship it on Monday\u201d" in shown
        assert "{sent_numbers}" in view.saved_snapshot().attachments[-1]
    finally:
        ip.run_line_magic("unload_ext", "acp_notebook")
        ip.config.pop("AcpMagics", None)
        for name in ("sent_numbers", "sent_note"):
            ip.user_ns.pop(name, None)


def test_the_demo_proposes_a_bar_chart_of_a_numeric_column_by_a_text_column(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    from acp_notebook.demo.agent import DemoAgent

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # the tools serve a shell's namespace, if any
    monkeypatch.setitem(shell.user_ns if shell is not None else vars(sys.modules["__main__"]), "sales",
                        pd.DataFrame({"region": ["north", "south"], "units": [3, 5], "price": [1.5, 2.0]}))
    with acpnb.start(DemoAgent(), kernel_tools="read-only", timeout=TIMEOUT, cwd=tmp_path) as agent:
        turn = agent.new_session().prompt("plot sales", timeout=TIMEOUT)
    looked, proposed = turn.kernel_calls
    assert looked.tool == "inspect_variable" and proposed.tool == "propose_cell"
    assert proposed.code == "sales.plot.bar(x='region', y='units')"
    assert "bar chart of units by region" in proposed.explanation
