"""Fixtures for end-to-end tests: a throwaway JupyterLab and headless Debian chromium."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .jupyterlab import (
    CHROMIUM_PATH,
    VIEWPORT,
    JupyterLabServer,
    LabPage,
    launch_chromium,
    start_jupyterlab,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

BROWSER_TESTS_DIR = Path(__file__).parent


def _running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def _browser_unavailable(reason: str) -> None:
    """Skip locally; in CI a missing browser is a broken setup and must fail."""
    if _running_in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test in this directory drives the browser and JupyterLab's kernels: mark it so
    # `-m "not browser"` (or "not kernel") deselects the lot.
    for item in items:
        if BROWSER_TESTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.kernel)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # While the failure report is being made the page still shows what went wrong:
    # save it, and put the browser's and server's view of things into the report.
    lab = getattr(item, "funcargs", {}).get("lab_page")
    if report.when == "call" and report.failed and isinstance(lab, LabPage):
        file_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name) + ".png"
        try:
            screenshot = str(lab.screenshot(lab.server.failures_dir / file_name, full_page=True))
        except Exception as error:  # a crashed page must not hide the test's own failure
            screenshot = f"(screenshot failed: {error})"
        try:  # CI keeps the report, not the screenshot: what the notebook showed, as text
            shown = lab.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").inner_text(timeout=5000)
        except Exception as error:
            shown = f"(could not read the notebook: {error})"
        report.sections.append(
            (
                "browser",
                f"screenshot: {screenshot}\n"
                f"console errors (last 10): {lab.console_errors[-10:]}\n"
                f"requests to other hosts: {lab.external_requests}\n"
                f"timings: {lab.timings}\n"
                f"the notebook's text (last 4000 characters):\n{shown[-4000:]}\n"
                f"JupyterLab log tail:\n{lab.server.log_tail()}",
            )
        )
    return report


# Package scope, not session: Playwright's sync API runs an asyncio loop in the main thread while it
# is open, and tests outside this package call asyncio.run, which refuses to start inside one.
@pytest.fixture(scope="package")
def chromium() -> Iterator[Browser]:
    """Debian's chromium, headless, driven by Playwright; shared by the browser tests."""
    if not CHROMIUM_PATH.exists():
        _browser_unavailable(
            f"{CHROMIUM_PATH} not found: "
            "run scripts/install-test-deps.sh (it installs Debian's chromium)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _browser_unavailable("playwright is not installed: pip install -e '.[dev]'")
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="package")
def jupyterlab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLabServer]:
    """A JupyterLab on 127.0.0.1 with a throwaway config, answering; shared by the browser tests.

    Write notebooks into `jupyterlab_server.root_dir`.
    """
    with start_jupyterlab(tmp_path_factory.mktemp("jupyterlab")) as server:
        yield server


class _SharedTab:
    """One browser context and JupyterLab page kept for the browser tests: a test opens its notebook in the
    loaded app (about 1 s of CPU) instead of loading JupyterLab again (about 4 s). After a test the page is put
    back as a fresh load shows it; a page that cannot be (a crash, a hung dialog) is replaced."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.context: BrowserContext | None = None

    def page(self) -> Page:
        if self.context is None:
            self.context = self.browser.new_context(viewport=VIEWPORT)
            self.context.new_page()
        return self.context.pages[0]

    def reset(self, lab: LabPage) -> None:
        lab.detach()
        if self.context is None:
            return
        try:
            if lab.app_loaded():
                lab.close_documents()
        except Exception as error:  # whatever the test left, the next one gets a new page (said: it costs a load)
            warnings.warn(f"the JupyterLab page could not be reset for the next test, which gets a new one: {error}",
                          stacklevel=1)
            self.close()

    def close(self) -> None:
        if self.context is not None:
            context, self.context = self.context, None
            context.close()


@pytest.fixture(scope="package")
def _shared_tab(chromium: Browser) -> Iterator[_SharedTab]:
    tab = _SharedTab(chromium)
    try:
        yield tab
    finally:
        tab.close()


@pytest.fixture
def lab_page(_shared_tab: _SharedTab, jupyterlab_server: JupyterLabServer) -> Iterator[LabPage]:
    """The JupyterLab tab, with no document open; its kernels are stopped after.

    When the test fails, the report gets a "browser" section: where its full-page
    screenshot was saved, the browser's console errors, timings and the tail of the
    JupyterLab log.
    """
    lab = LabPage(_shared_tab.page(), jupyterlab_server)
    try:
        yield lab
    finally:
        _shared_tab.reset(lab)
        jupyterlab_server.shutdown_all_kernels()
