"""The browser tests' screenshots land in a folder git ignores, so a test run leaves the clone clean."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .jupyterlab import DEFAULT_SCREENSHOTS, SCREENSHOTS_ENV, screenshot_dir

REPO = DEFAULT_SCREENSHOTS.parents[2]


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)


def test_screenshots_go_to_an_ignored_untracked_folder_unless_asked(monkeypatch):
    if shutil.which("git") is None or git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    monkeypatch.delenv(SCREENSHOTS_ENV, raising=False)
    assert screenshot_dir() == DEFAULT_SCREENSHOTS
    probe = DEFAULT_SCREENSHOTS / "panel.png"
    assert git("check-ignore", "--quiet", str(probe)).returncode == 0, f"{probe} is not ignored by git"
    assert git("ls-files", "--", str(DEFAULT_SCREENSHOTS)).stdout == "", "screenshots are tracked"
    # `make screenshots` refreshes docs/img/ through the variable.
    monkeypatch.setenv(SCREENSHOTS_ENV, str(REPO / "docs" / "img"))
    assert screenshot_dir() == REPO / "docs" / "img"
