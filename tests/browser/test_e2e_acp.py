"""The notebook experience end to end: JupyterLab in chromium, the demo agent, real clicks.

A person loads the extension, starts the demo agent, picks "smart" in the model dropdown
by clicking, sees the thought-level dropdown appear, runs a %%acp cell and sees the reply
stream in under a header with the session title; then answers a permission request with
a button while the cell is still running, and opens the protocol inspector: a table whose
rows pair each request with its answer and round-trip time and unfold into what the frame
means (with its spec link), the config options it changed and its JSON; a later `%acp set`
reaches the open inspector live, and a hand-made bad frame is marked as breaking the schema.
Screenshots of each step go to tests/browser/screenshots/ (docs/img/ with `make screenshots`).
"""

from __future__ import annotations

import re

from .jupyterlab import Cell, JupyterLabServer, LabPage, screenshot_dir, write_notebook

NOTEBOOK = "acp_e2e.ipynb"
CELLS = [
    Cell("# Talking to an ACP agent", kind="markdown"),
    "%env ACP_DEMO_DELAY=0.15",  # the demo agent pauses between chunks: the reply visibly streams
    "%load_ext acp_notebook\n%acp start demo",
    "%%acp\nExplain the agent client protocol in one line",
    "%%acp\nread notes.txt",
    "%acp log --method session/set_config_option",
    "%acp set tone=pirate",
    # A deliberately bad exchange, given to the inspector by hand: set_config_option without its value.
    "from acp_notebook.widgets.inspector import ProtocolInspector\n"
    "ProtocolInspector.of_frames([\n"
    "    {'dir': 'send', 't': 0.0, 'msg': {'jsonrpc': '2.0', 'id': 7, 'method': 'session/set_config_option',\n"
    "                                     'params': {'sessionId': 's1', 'configId': 'model'}}},\n"
    "    {'dir': 'recv', 't': 0.004, 'msg': {'jsonrpc': '2.0', 'id': 7, 'result': {'configOptions': []}}},\n"
    "], name='a hand-made exchange')",
]
PACE, START, CHAT, PERMISSION, LOG, SET, BAD = 1, 2, 3, 4, 5, 6, 7
SPEC = "https://agentclientprotocol.com/protocol/session-config-options#setting-a-config-option"


def run_without_waiting(lab_page: LabPage, index: int) -> None:
    """Select a cell and run it with Ctrl+Enter, returning while it still runs (LabPage.run_cell waits)."""
    lab_page.cell(index).locator(".jp-InputPrompt").click()
    lab_page.page.keyboard.press("Control+Enter")


def test_pick_a_model_by_clicking_then_chat(lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    root = jupyterlab_server.root_dir
    (root / "notes.txt").write_text("first line\nsecond line\n")
    write_notebook(root / NOTEBOOK, CELLS)
    lab_page.open_notebook(NOTEBOOK)
    lab_page.run_cell(PACE)

    # %acp start demo: the panel shows the agent's name until the first title arrives.
    lab_page.run_cell(START)
    panel = lab_page.output(START)
    lab_page.wait_for_selector(".acpnb-panel .acpnb-title", within=panel)
    assert lab_page.wait_for_selector(".acpnb-title", within=panel).inner_text() == "Demo agent"
    assert lab_page.dropdown("Model", within=panel).input_value() == "Everyday / Fast"
    assert lab_page.dropdown("Thought level", within=panel).count() == 0

    # ipywidgets' <select> options carry the labels: grouped choices read "Group / Choice".
    # A click on the dropdown sends set_config_option; the agent's answer adds the thought level.
    lab_page.select_dropdown_option("Model", "Deep thinking / Smart", within=panel)
    thought_level = lab_page.dropdown("Thought level", within=panel)
    thought_level.wait_for(state="visible")
    assert thought_level.input_value() == "Medium"
    assert lab_page.dropdown("Model", within=panel).input_value() == "Deep thinking / Smart"
    lab_page.wait_for_text("model: Smart", within=panel)
    lab_page.screenshot(screenshot_dir() / "panel.png", of=panel)

    # A %%acp cell: the reply streams in under the header, which takes the session's title.
    run_without_waiting(lab_page, CHAT)
    chat = lab_page.output(CHAT)
    lab_page.wait_for_selector(".acpnb-status-working", within=chat)
    reply = lab_page.wait_for_selector(".acpnb-reply", within=chat)
    partial = lab_page.wait_for_text(re.compile(r"^\[smart\] I thought"), within=reply).inner_text()
    lab_page.screenshot(screenshot_dir() / "streaming.png", of=lab_page.cell(CHAT))
    lab_page.wait_for_text("the same way every time.", within=reply)
    assert len(partial) < len(reply.inner_text()), "the reply arrived in one piece, not streamed"
    title = lab_page.wait_for_selector(".acpnb-title", within=chat)
    assert title.inner_text() == "Explain the agent client protocol…"
    lab_page.wait_for_text("Thoughts", within=chat)
    lab_page.wait_for_selector(".acpnb-status-done", within=chat)
    # The panel follows the live session: the title arrived there too.
    lab_page.wait_for_text("Explain the agent client protocol…", within=panel)
    lab_page.screenshot(screenshot_dir() / "chat.png", of=lab_page.cell(CHAT))
    lab_page.cell(0).scroll_into_view_if_needed()
    lab_page.screenshot(screenshot_dir() / "notebook.png")

    # A permission request while the cell runs: the buttons must reach the busy kernel.
    run_without_waiting(lab_page, PERMISSION)
    permission = lab_page.output(PERMISSION)
    allow = lab_page.wait_for_selector(".acpnb-permission-option >> text=Allow once", within=permission)
    lab_page.wait_for_selector(".acpnb-cancel", within=permission)  # the view is laid out to its end
    lab_page.screenshot(screenshot_dir() / "permission.png", of=lab_page.cell(PERMISSION))
    # While it waits, the turn's clock and the waiting call's tick in the browser (the kernel sends nothing for them).
    for clock in (".acpnb-extra", ".acpnb-tool-time"):
        permission.locator(clock).filter(has_text=re.compile(r"^[1-9]\d* s$")).first.wait_for(state="visible")
    allow.click()
    lab_page.wait_for_text("Read notes.txt: 2 lines.", within=permission)
    lab_page.wait_for_text("You chose: Allow once.", within=permission)
    lab_page.wait_for_selector(".acpnb-status-done", within=permission)

    check_the_inspector(lab_page)


def frame_row(lab_page: LabPage, inspector, index: int):
    """The table row of frame #index, unfolded (a click on its summary line)."""
    row = inspector.locator(f'details.acpnb-frame[data-index="{index}"]')
    if row.get_attribute("open") is None:
        row.locator(":scope > summary").click()
    lab_page.wait_for_selector(".acpnb-explain", within=row)
    return row


def check_the_inspector(lab_page: LabPage) -> None:
    """%acp log filtered to set_config_option: the one change made by clicking, explained."""
    lab_page.run_cell(LOG)
    inspector = lab_page.output(LOG)
    head = lab_page.wait_for_selector(".acpnb-frames-head", within=inspector)
    assert head.inner_text().split() == ["#", "time", "direction", "method", "/", "update", "session",
                                         "round", "trip", "summary"]
    lab_page.wait_for_text("2 of", within=inspector)
    rows = inspector.locator("details.acpnb-frame")
    assert rows.count() == 2
    request, answer = (int(rows.nth(i).get_attribute("data-index")) for i in range(2))
    # The request and its answer point at each other, with the time the round trip took.
    assert re.fullmatch(rf"\u21aa #{answer} \u00b7 \d+ ms", rows.nth(0).locator(":scope > summary > span").nth(5).inner_text())
    assert re.fullmatch(rf"\u21a9 #{request} \u00b7 \d+ ms", rows.nth(1).locator(":scope > summary > span").nth(5).inner_text())
    opened = frame_row(lab_page, inspector, answer)
    explain = opened.locator(".acpnb-explain")
    assert "COMPLETE list of settings" in explain.inner_text()
    assert explain.locator("a").get_attribute("href") == SPEC
    assert re.match(rf"answers #{request} after \d+ ms", opened.locator(".acpnb-pair").inner_text())
    diff = opened.locator(".acpnb-config-diff").inner_text()
    assert "model: 'fast' \u2192 'smart'" in diff and "+ thought_level (Thought level) = 'medium'" in diff
    lab_page.wait_for_text('"currentValue": "smart"', within=opened)
    lab_page.screenshot(screenshot_dir() / "inspector.png", of=inspector)

    # A change made after the inspector opened reaches it live.
    lab_page.run_cell(SET)
    lab_page.wait_for_text("4 of", within=inspector)
    lab_page.wait_for_text("tone plain\u2192pirate", within=inspector)
    assert inspector.locator(".acpnb-inspector").count() == 1

    # A frame that breaks the schema is marked, and unfolds into what is wrong.
    lab_page.run_cell(BAD)
    bad = lab_page.output(BAD)
    lab_page.wait_for_text("1 breaking the schema", within=bad)
    marked = bad.locator("details.acpnb-invalid")
    assert marked.count() == 1 and marked.locator(".acpnb-schema-error").inner_text() == "schema \u2717"
    issue = frame_row(lab_page, bad, 0).locator(".acpnb-issue-violation").inner_text()
    assert "breaks the schema at params: 'value' is a required property" in issue
    lab_page.screenshot(screenshot_dir() / "inspector-schema.png", of=bad)
