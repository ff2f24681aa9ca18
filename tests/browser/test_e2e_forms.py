"""The agent's form end to end: JupyterLab in chromium, the demo agent, a person typing and clicking.

A %%acp cell whose prompt starts with "ask me" makes the demo agent send a form (elicitation/create).
While the cell runs, the form is drawn in it from the schema, under a header that shows the title
taken from the first prompt (in italics, with a tooltip) because the agent has not named the
session yet. The person types a number out of range and clicks Submit: the field says why and
nothing is sent. Then a name (key by key), a colour from the dropdown and a corrected number,
Submit: the reply uses the answers (every change reached the kernel while the cell ran), the saved form says what was asked and answered, the agent's title replaces the
prompt's, and the context meter shows in the turn and in the session panel.
"""

from __future__ import annotations

from .jupyterlab import Cell, JupyterLabServer, LabPage, screenshot_dir, write_notebook

NOTEBOOK = "acp_forms.ipynb"
CELLS = [
    Cell("# The agent asks", kind="markdown"),
    "%load_ext acp_notebook\n%acp start demo",
    "%%acp\nask me about tea",
]
START, ASK = 1, 2


def test_a_form_is_filled_in_and_submitted_by_clicks(lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    write_notebook(jupyterlab_server.root_dir / NOTEBOOK, CELLS)
    lab_page.open_notebook(NOTEBOOK)
    lab_page.run_cell(START)
    panel = lab_page.output(START)
    lab_page.wait_for_selector(".acpnb-panel .acpnb-title", within=panel)

    # Run the cell without waiting for it: it waits for the form's answer.
    lab_page.cell(ASK).locator(".jp-InputPrompt").click()
    lab_page.page.keyboard.press("Control+Enter")
    cell = lab_page.output(ASK)
    form = lab_page.wait_for_selector(".acpnb-form", within=cell)
    lab_page.wait_for_text("A few questions from the demo agent", within=form)
    title = lab_page.wait_for_selector('.acpnb-title[data-title-source="prompt"]', within=cell)
    assert title.inner_text() == "ask me about tea"
    assert title.get_attribute("title") == "from the first prompt; the agent has not titled this session"
    lab_page.wait_for_selector(".acpnb-status-waiting", within=cell)
    colour = form.locator(".acpnb-form-field-colour select")
    assert colour.input_value() == "green"  # the schema's default
    cups = form.locator(".acpnb-form-field-cups input")
    assert cups.input_value() == "2" and cups.get_attribute("placeholder") == "a number from 0 to 20"

    # Out of range, and no name: each field says why, and the agent hears nothing.
    cups.fill("25")
    form.locator(".acpnb-form-submit").click()
    lab_page.wait_for_text("out of range (maximum 20)", within=form.locator(".acpnb-form-field-cups"))
    lab_page.wait_for_text("required", within=form.locator(".acpnb-form-field-name"))
    lab_page.wait_for_text("2 fields to fix; nothing was sent", within=form)
    lab_page.screenshot(screenshot_dir() / "form.png", of=lab_page.cell(ASK))

    # Typed key by key, and a field corrected: every change must reach the kernel while the cell runs.
    form.locator(".acpnb-form-field-name input").press_sequentially("Ada")
    colour.focus()
    colour.select_option(label="blue")
    cups.fill("")
    cups.press_sequentially("3")
    form.locator(".acpnb-form-submit").click()

    # The reply uses the answers; the cell's saved form says what was asked and answered.
    lab_page.wait_for_text("Thank you, Ada! Favourite colour: blue. 3 cups of tea a day.", within=cell)
    lab_page.wait_for_selector(".acpnb-status-done", within=cell)
    saved = lab_page.wait_for_selector(".acpnb-form.acpnb-static", within=cell)
    assert "The agent asked: A few questions from the demo agent" in saved.inner_text()
    outcome = saved.locator(".acpnb-form-outcome").inner_text()
    assert outcome == ("You answered: Your name: Ada; Favourite colour: blue; Cups of tea a day: 3; "
                       "Do you like notebooks?: yes.")
    # The agent named the session at the end of the turn: its title, no longer marked as the prompt's.
    assert lab_page.wait_for_selector(".acpnb-title", within=cell).inner_text() == "Ask me about tea"
    assert cell.locator('[data-title-source="prompt"]').count() == 0
    meter = lab_page.wait_for_selector(".acpnb-usage .acpnb-context", within=cell)
    assert "context" in meter.inner_text() and "of 128,000 tokens" in meter.inner_text()
    lab_page.wait_for_text("Ask me about tea", within=panel)
    lab_page.wait_for_selector(".acpnb-context-bar", within=panel)
    lab_page.screenshot(screenshot_dir() / "form-answered.png", of=lab_page.cell(ASK))
