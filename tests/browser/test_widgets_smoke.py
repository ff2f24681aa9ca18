"""Plain ipywidgets in JupyterLab in chromium: rendering and the comm round trip work."""

from __future__ import annotations

from .jupyterlab import Cell, JupyterLabServer, LabPage, screenshot_dir, write_notebook

# The kernel side: a dropdown whose observer rewrites a label. The label can only
# change in the browser if the click travelled browser -> kernel (comm message), the
# observer ran, and the new value travelled kernel -> browser.
WIDGET_CELL = """\
import ipywidgets as widgets

flavour = widgets.Dropdown(options=["vanilla", "pistachio", "mango"], value="vanilla",
                           description="Flavour")
verdict = widgets.HTML(value="kernel says: vanilla")

def on_flavour(change):
    verdict.value = f"kernel says: {change['new']}"

flavour.observe(on_flavour, names="value")
widgets.VBox([flavour, verdict])"""


def test_dropdown_click_reaches_kernel_and_label_updates(
    lab_page: LabPage, jupyterlab_server: JupyterLabServer
) -> None:
    write_notebook(
        jupyterlab_server.root_dir / "widgets_smoke.ipynb",
        [Cell("# ipywidgets smoke test", kind="markdown"), WIDGET_CELL],
    )
    lab_page.open_notebook("widgets_smoke.ipynb")
    lab_page.hide_left_sidebar()
    lab_page.run_all_cells()

    output = lab_page.output(1)
    label = lab_page.wait_for_selector(".widget-html-content", within=output)
    assert label.inner_text() == "kernel says: vanilla"
    assert lab_page.dropdown("Flavour", within=output).input_value() == "vanilla"

    lab_page.select_dropdown_option("Flavour", "pistachio", within=output)

    lab_page.wait_for_text("kernel says: pistachio", exact=True, within=output)
    assert lab_page.dropdown("Flavour", within=output).input_value() == "pistachio"
    lab_page.screenshot(screenshot_dir() / "smoke.png")
    # The throwaway config must keep JupyterLab offline (CI has no internet).
    assert lab_page.external_requests == []
