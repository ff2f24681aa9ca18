"""What a person sees in JupyterLab (issue 28, point 10), in headless chromium at 1280 px.

- the protocol inspector opens at the top (initialize in view), keeps the reader's place while
  frames arrive, and follows them once the reader has scrolled to its end, also after JupyterLab
  rebuilds the view;
- its direction and round-trip labels stay on one line; an opened row turns its marker down;
- a form waiting in a turn has two cancel buttons that say which is which;
- a rejected write keeps the change it proposed in the cell's final view.
"""

from __future__ import annotations

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from .jupyterlab import LabPage, JupyterLabServer, write_notebook

NOTEBOOK = "acp_messages.ipynb"
CELLS = [
    "%load_ext acp_notebook\n%config AcpMagics.permission = 'deny'\n%acp start demo",
    "%%acp\nTell me about tide pools",
    "%%acp\nTell me about lighthouses",
    "%acp log",
    "%%acp\nTell me about volcanoes",
    "%%acp\nwrite hello to out.txt",
    "%%acp\nask me about tea",
]
START, FIRST, SECOND, LOG, MORE, WRITE, ASK = range(7)

AT_TOP = "box => box.scrollTop === 0 && box.scrollHeight > box.clientHeight"
AT_END = "box => box.scrollHeight > box.clientHeight && box.scrollTop + box.clientHeight >= box.scrollHeight - 4"


def _rows(inspector) -> int:
    return inspector.locator("details.acpnb-frame").count()


def _more_frames(lab_page: LabPage, inspector, cell: int) -> None:
    before = _rows(inspector)
    lab_page.run_cell(cell)
    lab_page.page.wait_for_function(
        "([el, n]) => el.querySelectorAll('details.acpnb-frame').length > n",
        arg=[inspector.element_handle(), before])


def test_the_inspector_forms_and_a_rejected_write_as_a_person_sees_them(
        lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    write_notebook(jupyterlab_server.root_dir / NOTEBOOK, CELLS)
    lab_page.open_notebook(NOTEBOOK)
    for cell in (START, FIRST, SECOND, LOG):
        lab_page.run_cell(cell)
    inspector = lab_page.output(LOG)
    box = lab_page.wait_for_selector(".acpnb-frames-scroll", within=inspector)
    lab_page.wait_for_selector("details.acpnb-frame", within=inspector)

    # Opened at the top: the session from its first frame, initialize in view.
    assert box.evaluate("box => box.scrollHeight > box.clientHeight")  # enough frames to scroll
    assert box.evaluate(AT_TOP)
    first = inspector.locator("details.acpnb-frame").first
    assert "initialize" in first.inner_text()
    assert first.evaluate("(row, box) => row.getBoundingClientRect().top < box.getBoundingClientRect().bottom",
                          box.element_handle())

    # Labels on one line, within their columns, at 1280 px.
    for column in (1, 2, 5):  # time, direction, round trip
        cells = inspector.locator(f"details.acpnb-frame > summary > span:nth-child({column + 1})")
        assert cells.count() > 10
        assert cells.evaluate_all("cells => cells.every(c => c.scrollWidth <= c.clientWidth + 1 && "
                                  "c.getBoundingClientRect().height < 1.6 * parseFloat(getComputedStyle(c).lineHeight))")

    # An opened row turns its marker.
    marker = first.locator(".acpnb-marker")
    assert marker.evaluate("m => getComputedStyle(m).transform") == "none"
    first.locator(":scope > summary").click()
    lab_page.wait_for_selector(".acpnb-explain", within=first)
    assert marker.evaluate("m => getComputedStyle(m).transform") != "none"
    first.locator(":scope > summary").click()

    # New frames while the reader is at the top: they join the table, the view stays there.
    _more_frames(lab_page, inspector, MORE)
    assert box.evaluate(AT_TOP)

    # Scrolled to the end by the reader (the wheel), the table follows what arrives, measured as the rows
    # come in; and once the saved form's refresh has made JupyterLab build the view anew, it is at the end.
    # The box is looked up afresh each time: the refresh may replace it before or after the wheel turns, and a
    # wheel that went to the box it replaced is lost, so the reader turns it again (as a person would).
    for attempt in range(3):
        inspector.locator(".acpnb-frames-scroll").hover()
        lab_page.page.mouse.wheel(0, 100000)
        try:
            lab_page.page.wait_for_function(
                f"el => {{ const box = el.querySelector('.acpnb-frames-scroll'); return !!box && ({AT_END})(box); }}",
                arg=inspector.element_handle(), timeout=15_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    rows = _rows(inspector)
    lab_page.run_cell(WRITE)
    lab_page.page.wait_for_function(
        f"([el, n]) => {{ const box = el.querySelector('.acpnb-frames-scroll'); "
        f"return box && box.querySelectorAll('details.acpnb-frame').length > n && ({AT_END})(box); }}",
        arg=[inspector.element_handle(), rows])

    # The rejected write: the final (static) view still shows the change it proposed.
    write = lab_page.output(WRITE)
    lab_page.wait_for_selector(".acpnb-turn.acpnb-static", within=write)
    proposed = lab_page.wait_for_selector(".acpnb-proposed-diff", within=write)
    assert "not applied" in proposed.inner_text()
    assert "+hello" in write.locator(".acpnb-diff").inner_text()

    # A form waiting in the turn: two cancel buttons, each saying what it cancels.
    lab_page.cell(ASK).locator(".jp-InputPrompt").click()
    lab_page.page.keyboard.press("Control+Enter")
    ask = lab_page.output(ASK)
    form = lab_page.wait_for_selector(".acpnb-form", within=ask)
    form_cancel = form.locator(".acpnb-form-cancel")
    turn_cancel = ask.locator(".acpnb-cancel")
    assert form_cancel.inner_text().strip() == "Cancel form" and turn_cancel.inner_text().strip() == "Cancel turn"
    assert "the turn goes on" in form_cancel.get_attribute("title")
    assert "session/cancel" in turn_cancel.get_attribute("title")
    form_cancel.click()
    lab_page.wait_for_selector(".acpnb-turn.acpnb-static", within=ask)
