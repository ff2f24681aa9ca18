"""Fixtures for end-to-end tests: a throwaway JupyterLab and headless Debian chromium."""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .jupyterlab import (
    CHROMIUM_PATH,
    JupyterLabServer,
    LabPage,
    launch_chromium,
    start_jupyterlab,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

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


@pytest.fixture
def lab_page(chromium: Browser, jupyterlab_server: JupyterLabServer) -> Iterator[LabPage]:
    """A fresh browser context with one JupyterLab tab; its kernels are stopped after.

    When the test fails, the report gets a "browser" section: where its full-page
    screenshot was saved, the browser's console errors, timings and the tail of the
    JupyterLab log.
    """
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield LabPage(context.new_page(), jupyterlab_server)
    finally:
        context.close()
        jupyterlab_server.shutdown_all_kernels()
