"""Notices and a compaction from the demo agent in a real kernel (nbclient): they show in their ``%%acp`` cells
and the saved notebook holds them (static HTML, Markdown and text, no kernel needed); a notice that came while no
turn ran shows in the session's panel and its saved form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WAIT_FOR_THE_LATER_NOTICE = """\
import threading
import acp_notebook as acpnb
_session, _seen = acpnb.current(), threading.Event()
_session.state.observe(lambda event: event.kind == "notice" and _seen.set())
assert _session.state.notices or _seen.wait(60), "the later notice never came"
"""
CELLS = [
    "%load_ext acp_notebook",
    "%acp start demo",
    "%%acp\nhello there",
    "%%acp\nnotices",
    "%%acp\ncompact our conversation",
    "%%acp\nnotice later warning: Disk almost full",
    WAIT_FOR_THE_LATER_NOTICE,
    "%acp",
    "%acp stop",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Any:
    path: Path = tmp_path_factory.mktemp("notices") / "notices.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    notebook_client(notebook, path.parent, timeout=120).execute()
    nbformat.write(notebook, path)
    return nbformat.read(path, as_version=4)


def forms_of(notebook: Any, source: str) -> dict[str, str]:
    """The turn or panel the cell whose source is ``source`` shows: its saved forms, checked static (a ``%%acp``
    cell also shows its branch line)."""
    (cell,) = [c for c in notebook.cells if c.source == source]
    (output,) = [o for o in cell.outputs if "acp_notebook" in o.get("metadata", {})
                 and ("acpnb-turn" in o["data"].get("text/html", "") or "acpnb-panel" in o["data"].get("text/html", ""))]
    assert WIDGET_MIME not in output["data"]  # final: readable with no kernel
    return output["data"]


def test_the_notices_cell_shows_them_by_severity(saved):
    forms = forms_of(saved, "%%acp\nnotices")
    html = forms["text/html"]
    assert html.index("Using the cached index") < html.index("Rate limited") < html.index("The search tool failed")
    assert "acpnb-notice-info" in html and "acpnb-notice-warning" in html and "acpnb-notice-error" in html
    assert "\u26a0 warning: Rate limited" in forms["text/plain"]
    assert "**\u2716 error: The search tool failed**" in forms["text/markdown"]


def test_the_compaction_cell_holds_the_folded_block_with_its_summary(saved):
    forms = forms_of(saved, "%%acp\ncompact our conversation")
    html = forms["text/html"]
    block = html[html.index('<details class="acpnb-compaction"'):]
    assert block.startswith('<details class="acpnb-compaction" data-status="completed" style=')  # folded
    assert "\u27f2 context compacted" in block and "You first said: &quot;hello there&quot;" in block
    assert "acpnb-context-compacted" in html  # the meter followed it
    assert "\u27f2 context compacted" in forms["text/plain"] and "> 2 earlier exchanges" in forms["text/markdown"]


def test_a_notice_between_turns_shows_in_the_panel_not_in_a_turn(saved):
    later = forms_of(saved, "%%acp\nnotice later warning: Disk almost full")
    assert "Disk almost full" not in later["text/html"].split("acpnb-reply")[0]  # came after the turn's answer
    panel = forms_of(saved, "%acp")
    assert "acpnb-notice-warning" in panel["text/html"] and "Disk almost full" in panel["text/html"]
    assert "\u26a0 warning: Disk almost full" in panel["text/plain"]
