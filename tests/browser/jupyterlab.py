"""Drives a throwaway JupyterLab server and a headless Debian chromium for browser tests."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import nbformat

if TYPE_CHECKING:
    # Only for annotations: importing this module must work without Playwright, so
    # that the suite can skip (or, in CI, fail) with a clear message instead.
    from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, Playwright, Request

CHROMIUM_PATH = Path("/usr/bin/chromium")

# The browser window every test page has (the README's screenshots are taken at this width).
VIEWPORT = {"width": 1280, "height": 800}

# Where the tests save the screenshots of each step. A test run must not change tracked files,
# so by default they go to a folder git ignores; `make screenshots` points this variable at
# docs/img/ to refresh the README's pictures on purpose.
SCREENSHOTS_ENV = "ACPNB_SCREENSHOTS"
DEFAULT_SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"


def screenshot_dir() -> Path:
    """The folder for step screenshots: $ACPNB_SCREENSHOTS if set, else tests/browser/screenshots/."""
    configured = os.environ.get(SCREENSHOTS_ENV, "").strip()
    return Path(configured).resolve() if configured else DEFAULT_SCREENSHOTS

# Headless chromium that never talks to anything but the local JupyterLab: no GPU in CI,
# no sandbox when running as root in a container, and none of the background services
# (sync, component updates, QUIC probing) that would try to reach the internet.
CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Debian's launcher only adds this when it can measure /dev/shm; small container
    # /dev/shm mounts crash the renderer without it.
    "--disable-dev-shm-usage",
)

# JupyterLab frontend settings applied as defaults for the throwaway server. They keep
# the UI deterministic and offline: no "fetch news?" toast, no update check, every cell
# attached to the DOM (the default "full" windowing detaches cells outside the viewport,
# which would hide widgets from selectors), a notebook without kernel metadata starts
# the default kernel instead of asking, and no autosave rewrites the test notebooks.
LAB_SETTING_OVERRIDES: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension:tracker": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
    "@jupyterlab/extensionmanager-extension:plugin": {"enabled": False},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
}


@dataclass(frozen=True)
class JupyterLabServer:
    """A running JupyterLab: where it listens, how to authenticate, where its files are."""

    base_url: str
    token: str
    root_dir: Path
    runtime_dir: Path  # the kernels' connection files
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)
    startup_seconds: float

    @property
    def failures_dir(self) -> Path:
        """Where screenshots of failed tests go (next to the server's own files)."""
        return self.root_dir.parent / "failures"

    def url(self, path: str = "lab") -> str:
        """An absolute URL under the server, carrying the token so the browser logs in."""
        separator = "&" if "?" in path else "?"
        return f"{self.base_url}{path.lstrip('/')}{separator}token={self.token}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """Call the Jupyter REST API and return the decoded JSON (None for empty bodies)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base_url}api/{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def shutdown_all_kernels(self) -> None:
        """Stop every kernel, so tests do not pile up kernels on a small machine."""
        for kernel in self.api("GET", "kernels"):
            self.api("DELETE", f"kernels/{kernel['id']}")

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's combined stdout/stderr, for failure messages."""
        return _log_tail(self.log_path, lines)


def _write_json(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2))


def _prepare_throwaway_jupyter(base_dir: Path, runtime_dir: Path, token: str, python: str) -> dict[str, str]:
    """Lay out config and data dirs under base_dir; return the server's environment."""
    config_dir = base_dir / "config"
    data_dir = base_dir / "data"
    root_dir = base_dir / "notebooks"
    for directory in (config_dir, data_dir, root_dir, base_dir / "ipython"):
        directory.mkdir(parents=True, exist_ok=True)

    _write_json(
        config_dir / "jupyter_server_config.json",
        {
            "ServerApp": {
                "ip": "127.0.0.1",
                # Port 0: the OS picks a free port; the server records it in its
                # runtime info file, which is how start_jupyterlab learns it.
                "port": 0,
                "port_retries": 0,
                "open_browser": False,
                # CI containers run as root; the server refuses to start as root otherwise.
                "allow_root": True,
                "root_dir": str(root_dir),
                "terminals_enabled": False,
                # What the package's etc/jupyter config enables where it is installed (an editable
                # install of a worktree does not put it there): saving with static forms.
                "jpserver_extensions": {"acp_notebook.saving": True},
            },
            "IdentityProvider": {"token": token},
            # Kernels over ipc, their sockets beside their connection files (see start_jupyterlab): a TCP kernel's
            # ports are picked before it binds them, and another process can take one in between.
            "KernelManager": {"transport": "ipc"},
            "LabApp": {
                # window.jupyterapp: the browser tests open notebooks through the loaded app's commands instead
                # of loading the page again for each (about 4 s of CPU per load on a 2-core machine).
                "expose_app_in_browser": True,
                "news_url": None,
                "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate",
                "extension_manager": "readonly",
            },
        },
    )
    # Read by jupyterlab_server from <config dir>/labconfig: defaults under user settings.
    _write_json(config_dir / "labconfig" / "default_setting_overrides.json", LAB_SETTING_OVERRIDES)
    # No build check: at every page load it asks the server whether extensions need a rebuild, and the server
    # runs node (yarn config) to find out; nothing here installs source extensions.
    _write_json(config_dir / "labconfig" / "page_config.json", {"buildCheck": False, "buildAvailable": False})
    # The notebooks name the "python3" kernel; this spec pins it to the interpreter
    # running the tests and, with JUPYTER_PREFER_ENV_PATH=0 below, shadows any other.
    _write_json(
        data_dir / "kernels" / "python3" / "kernel.json",
        {
            "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "metadata": {"debugger": False},
        },
    )

    env = {
        key: value
        for key, value in os.environ.items()
        # Inherited extra search paths would let the developer's own setup leak in.
        if key not in {"JUPYTER_PATH", "JUPYTER_CONFIG_PATH"}
    }
    env.update(
        # Inside a virtualenv jupyter_core otherwise searches the env's share/ before
        # JUPYTER_DATA_DIR, and the env's python3 spec (argv "python") would win.
        JUPYTER_PREFER_ENV_PATH="0",
        JUPYTER_CONFIG_DIR=str(config_dir),
        JUPYTER_DATA_DIR=str(data_dir),
        JUPYTER_RUNTIME_DIR=str(runtime_dir),
        JUPYTERLAB_SETTINGS_DIR=str(config_dir / "lab" / "user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(config_dir / "lab" / "workspaces"),
        IPYTHONDIR=str(base_dir / "ipython"),
        PATH=os.pathsep.join([str(Path(python).parent), env.get("PATH", "")]),
        PYTHONUNBUFFERED="1",
    )
    return env


def _read_server_info(runtime_dir: Path, pid: int) -> dict[str, Any] | None:
    info_file = runtime_dir / f"jpserver-{pid}.json"
    try:
        return json.loads(info_file.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        # Not written yet, or caught mid-write.
        return None


def _stop_process(process: subprocess.Popen[bytes], grace_seconds: float = 10.0) -> None:
    if process.poll() is not None:
        return
    # SIGTERM makes jupyter_server shut its kernels down and exit; if it hangs, kill
    # its whole process group (it was started as a session leader), kernels included.
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_seconds)


def _log_tail(log_path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no server log)"


def _answers(base_url: str, token: str) -> str | None:
    """None when the API and the lab page both answer, else why not."""
    try:
        with urllib.request.urlopen(f"{base_url}api/status?token={token}", timeout=2.0):
            pass
        # The lab page is what the browser loads; it is served by another extension
        # than the API, so check it too.
        with urllib.request.urlopen(f"{base_url}lab?token={token}", timeout=5.0):
            pass
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        return f"{type(error).__name__}: {error}"
    return None


@contextmanager
def start_jupyterlab(
    base_dir: Path, *, python: str = sys.executable, timeout: float = 90.0
) -> Iterator[JupyterLabServer]:
    """Run JupyterLab with a throwaway config under base_dir until the block exits.

    Polls until the REST API and the lab page answer (deadline: `timeout` seconds)
    before yielding. Notebooks go in `server.root_dir`; the server log is in
    `server.log_path`. On exit the server and its kernels are stopped.
    """
    token = secrets.token_hex(16)
    # The runtime directory holds the kernels' connection files and their ipc sockets, named after them: short
    # (a unix socket's path holds at most 107 bytes, a pytest base_dir is long), so outside base_dir.
    runtime_dir = Path(tempfile.mkdtemp(prefix="acpnb-lab-"))
    env = _prepare_throwaway_jupyter(base_dir, runtime_dir, token, python)
    log_path = base_dir / "jupyterlab.log"
    started = time.monotonic()
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [python, "-m", "jupyterlab", "--no-browser"],
            cwd=base_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            # Its own process group, so a stuck server and its kernels can be killed
            # together without touching the test runner.
            start_new_session=True,
        )
    try:
        deadline = started + timeout
        why_not = "server info file not written yet"
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with code {process.returncode}:\n{_log_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"JupyterLab did not answer within {timeout}s ({why_not}):\n"
                    f"{_log_tail(log_path)}"
                )
            info = _read_server_info(runtime_dir, process.pid)
            if info is not None:
                why_not = _answers(info["url"], token)
                if why_not is None:
                    break
            # Poll interval of the readiness check above (bounded by the deadline).
            time.sleep(0.1)
        yield JupyterLabServer(
            base_url=info["url"],
            token=token,
            root_dir=base_dir / "notebooks",
            runtime_dir=runtime_dir,
            log_path=log_path,
            process=process,
            startup_seconds=time.monotonic() - started,
        )
    finally:
        _stop_process(process)
        shutil.rmtree(runtime_dir, ignore_errors=True)


@dataclass(frozen=True)
class Cell:
    """A notebook cell to write: its source and kind."""

    source: str
    kind: Literal["code", "markdown"] = "code"


def write_notebook(path: Path, cells: Sequence[str | Cell]) -> Path:
    """Write a notebook (plain strings are code cells) that names the python3 kernel.

    Naming the kernel in the metadata is what keeps JupyterLab from asking which
    kernel to use when the notebook opens.
    """
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    notebook.metadata["language_info"] = {"name": "python"}
    for cell in cells:
        cell = Cell(cell) if isinstance(cell, str) else cell
        if cell.kind == "code":
            notebook.cells.append(nbformat.v4.new_code_cell(cell.source))
        else:
            notebook.cells.append(nbformat.v4.new_markdown_cell(cell.source))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def launch_chromium(playwright: Playwright, *, executable: Path = CHROMIUM_PATH) -> Browser:
    """Launch Debian's chromium headless through Playwright (no downloaded browser).

    Every launch gets a fresh, temporary user-data dir from Playwright, removed when
    the browser closes, so no profile state carries over between runs.
    """
    return playwright.chromium.launch(
        executable_path=str(executable), headless=True, args=list(CHROMIUM_ARGS)
    )


# Reads the input prompts of the notebook's code cells and says whether a run that
# started after execution count `previousMax` has settled:
#   null                  -> still running (or not started yet)
#   {done: true}          -> every targeted cell has a new execution count
#   {done: false, ...}    -> the run stopped early (a cell raised; later ones aborted)
_RUN_STATE_JS = """
([panelSelector, targets, previousMax]) => {
  const cells = [...document.querySelectorAll(`${panelSelector} .jp-Notebook-cell`)];
  const prompts = cells.map((cell) => {
    if (!cell.classList.contains('jp-CodeCell')) return null;
    return cell.querySelector('.jp-InputPrompt').textContent.trim();
  });
  const indices = targets === null
    ? prompts.flatMap((prompt, index) => (prompt === null ? [] : [index]))
    : targets;
  const fresh = (index) => {
    const match = /^\\[(\\d+)\\]:$/.exec(prompts[index] ?? '');
    return match !== null && Number(match[1]) > previousMax;
  };
  if (indices.some((index) => prompts[index] === '[*]:')) return null;
  const finished = indices.filter(fresh);
  if (finished.length === indices.length) return { done: true };
  if (finished.length === 0) return null;
  const last = finished[finished.length - 1];
  const output = cells[last].querySelector('.jp-Cell-outputArea');
  return { done: false, lastCell: last, output: output ? output.innerText : '' };
}
"""

_MAX_EXECUTION_COUNT_JS = """
(panelSelector) => Math.max(0, ...[...document.querySelectorAll(
  `${panelSelector} .jp-CodeCell .jp-InputPrompt`)].map((prompt) => {
    const match = /^\\[(\\d+)\\]:$/.exec(prompt.textContent.trim());
    return match ? Number(match[1]) : 0;
  }))
"""

# Truthy once the notebook's kernel is attached and idle, or once a modal dialog (such
# as "Select Kernel") blocks the page: then it returns the dialog's text.
_KERNEL_IDLE_OR_DIALOG_JS = """
(panelSelector) => {
  const dialog = document.querySelector('.jp-Dialog');
  if (dialog) return { dialog: dialog.innerText };
  const panel = document.querySelector(panelSelector);
  if (!panel) return false;
  const name = panel.querySelector('[data-jp-item-name=kernelName]');
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  // The indicator says "idle" before any kernel is attached, so also require a kernel.
  return name !== null && status !== null
    && name.textContent.trim() !== 'No Kernel' && status.dataset.status === 'idle'
    && { dialog: null };
}
"""


# Whether this page has JupyterLab loaded (a fresh page is about:blank).
_APP_LOADED_JS = "() => window.jupyterapp !== undefined"

# Opens a notebook in the loaded app, as the file browser does: the notebook's own kernelspec, started.
_OPEN_IN_APP_JS = """
async (path) => {
  const app = window.jupyterapp;
  await app.restored;
  await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
}
"""

# Back to how a freshly loaded page looks, for the next test: every document closed without a "save changes?"
# question (the tests never save by closing), the left sidebar open.
_CLOSE_DOCUMENTS_JS = """
async () => {
  const app = window.jupyterapp;
  const widgets = Array.from(app.shell.widgets('main')).filter((widget) => widget.context !== undefined);
  for (const widget of widgets) widget.context.model.dirty = false;
  await Promise.all(widgets.map((widget) => widget.close()));
  if (app.shell.leftCollapsed) app.shell.expandLeft();
}
"""

# JupyterLab puts a launcher in the main area once the last document closes: that one may stay.
_NO_DOCUMENT_OPEN_JS = """
() => document.querySelector('.jp-Dialog') === null
  && Array.from(window.jupyterapp.shell.widgets('main')).every((widget) => widget.context === undefined)
"""


class LabPage:
    """A JupyterLab tab in the browser, with the actions a notebook user takes.

    Actions go through the UI (menu clicks, real clicks on widgets); waits are on
    DOM conditions with timeouts, never fixed sleeps. One notebook is open at a time.
    Timeouts are in seconds; None means the page default (`timeout`, 30 s) for
    selectors and text, and at least 90 s for anything that waits on the kernel.

    A page that already shows JupyterLab opens the next notebook through the app (the
    `lab_page` fixture keeps one such page for the browser tests and closes every
    document between them); a fresh page loads JupyterLab with the notebook.
    """

    # The notebook that is showing; JupyterLab hides other documents' panels.
    PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"

    def __init__(self, page: Page, server: JupyterLabServer, *, timeout: float = 30.0) -> None:
        self.page = page
        self.server = server
        self.timeout_ms = timeout * 1000
        # Kernel start gets more room: it is the slowest step on a loaded 2-core machine.
        self.kernel_timeout_ms = max(self.timeout_ms, 90_000)
        # JupyterLab saves the open documents of a workspace on the server and reopens
        # them on the next visit, kernels included; a workspace of its own per page
        # keeps earlier tests' notebooks out of this one.
        self.workspace = f"test-{secrets.token_hex(4)}"
        self.console_errors: list[str] = []
        self.timings: dict[str, float] = {}
        # Requests the page made to anything but this server: CI has no internet, so
        # any entry here is a fetch that would hang or fail there.
        self.external_requests: list[str] = []
        page.set_default_timeout(self.timeout_ms)
        page.on("request", self._record_if_external)
        page.on("console", self._record_console_error)

    def detach(self) -> None:
        """Stop recording the page's requests and console errors (the page lives on for the next test)."""
        self.page.remove_listener("request", self._record_if_external)
        self.page.remove_listener("console", self._record_console_error)

    def app_loaded(self) -> bool:
        """Whether this page shows JupyterLab (a fresh page is blank)."""
        return bool(self.page.evaluate(_APP_LOADED_JS))

    def close_documents(self) -> None:
        """Close every open document without saving and reopen the left sidebar: the page as a fresh load
        shows it, for the next test. Dismisses a dialog left open first."""
        for _ in range(5):
            if self.page.locator(".jp-Dialog").count() == 0:
                break
            self.page.keyboard.press("Escape")
        self.page.evaluate(_CLOSE_DOCUMENTS_JS)
        self.page.wait_for_function(_NO_DOCUMENT_OPEN_JS, timeout=self.timeout_ms)

    def _record_console_error(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)

    def _record_if_external(self, request: Request) -> None:
        url = request.url
        if not url.startswith(self.server.base_url) and not url.startswith(("data:", "blob:")):
            self.external_requests.append(url)

    @property
    def notebook(self) -> Locator:
        """The visible notebook panel (toolbar + cells)."""
        return self.page.locator(self.PANEL)

    def open_notebook(self, path: str, *, wait_for_kernel: bool = True) -> None:
        """Open a notebook (path relative to the server root) and wait for its kernel."""
        started = time.monotonic()
        if self.app_loaded():
            self.page.evaluate(_OPEN_IN_APP_JS, path)
        else:
            self.page.goto(self.server.url(f"lab/workspaces/{self.workspace}/tree/{path}"))
        self.notebook.locator(".jp-Notebook").wait_for(state="visible")
        self.timings["notebook_shown_s"] = time.monotonic() - started
        if wait_for_kernel:
            self.wait_for_kernel_idle()
            self.timings["kernel_idle_s"] = time.monotonic() - started

    def hide_left_sidebar(self) -> None:
        """Collapse the left sidebar (file browser) by clicking its active tab, so the
        notebook gets the whole width (nicer screenshots). No-op when it is collapsed."""
        active_tab = self.page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if active_tab.count():
            active_tab.click()
            self.page.locator("#jp-left-stack").wait_for(state="hidden")

    def wait_for_kernel_idle(self, timeout: float | None = None) -> None:
        """Wait until the notebook has a kernel attached and that kernel is idle.

        Raises AssertionError at once if a dialog opens instead (it would block every
        click that follows).
        """
        state = self.page.wait_for_function(
            _KERNEL_IDLE_OR_DIALOG_JS,
            arg=self.PANEL,
            timeout=self.kernel_timeout_ms if timeout is None else timeout * 1000,
        ).json_value()
        if state["dialog"] is not None:
            raise AssertionError(f"JupyterLab opened a dialog: {state['dialog']!r}")

    def cell(self, index: int) -> Locator:
        """The index-th cell (0-based, code and markdown alike)."""
        return self.notebook.locator(".jp-Notebook-cell").nth(index)

    def output(self, index: int) -> Locator:
        """The output area of the index-th cell."""
        return self.cell(index).locator(".jp-Cell-outputArea")

    def _click_run_menu_item(self, command: str) -> None:
        self.page.locator("#jp-MainMenu .lm-MenuBar-item", has_text="Run").click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def _wait_for_run(
        self, targets: list[int] | None, previous_max: int, timeout: float | None
    ) -> None:
        state = self.page.wait_for_function(
            _RUN_STATE_JS,
            arg=[self.PANEL, targets, previous_max],
            timeout=self.kernel_timeout_ms if timeout is None else timeout * 1000,
        ).json_value()
        if not state["done"]:
            raise AssertionError(
                f"cell {state['lastCell']} failed, later cells did not run:\n{state['output']}"
            )

    def run_all_cells(self, timeout: float | None = None) -> None:
        """Run > Run All Cells, then wait until every code cell has run.

        Raises AssertionError with the failing cell's output if a cell raises. Empty
        code cells are never executed by JupyterLab: do not put any in test notebooks.
        """
        previous_max = self.page.evaluate(_MAX_EXECUTION_COUNT_JS, self.PANEL)
        started = time.monotonic()
        self._click_run_menu_item("runmenu:run-all")
        self._wait_for_run(None, previous_max, timeout)
        self.timings["run_all_s"] = time.monotonic() - started

    def run_cell(self, index: int, timeout: float | None = None) -> None:
        """Select the index-th cell by clicking its prompt, run it without advancing,
        and wait until it has run (AssertionError with its output if it raised)."""
        previous_max = self.page.evaluate(_MAX_EXECUTION_COUNT_JS, self.PANEL)
        self.cell(index).locator(".jp-InputPrompt").click()
        self._click_run_menu_item("notebook:run-cell")
        self._wait_for_run([index], previous_max, timeout)

    def wait_for_selector(
        self, selector: str, *, timeout: float | None = None, within: Locator | None = None
    ) -> Locator:
        """Wait until an element matching selector is visible (in `within`, default the
        notebook) and return a locator for the first match."""
        locator = (within or self.notebook).locator(selector).first
        locator.wait_for(state="visible", timeout=None if timeout is None else timeout * 1000)
        return locator

    def wait_for_text(
        self,
        text: str | re.Pattern[str],
        *,
        exact: bool = False,
        timeout: float | None = None,
        within: Locator | None = None,
    ) -> Locator:
        """Wait until text is visible (in `within`, default the notebook); return it."""
        locator = (within or self.notebook).get_by_text(text, exact=exact).first
        locator.wait_for(state="visible", timeout=None if timeout is None else timeout * 1000)
        return locator

    def dropdown(self, description: str, *, within: Locator | None = None) -> Locator:
        """The <select> of the ipywidgets Dropdown whose description label is exactly
        `description` (in `within`, default the notebook)."""
        label = self.page.locator("label.widget-label").filter(
            has_text=re.compile(rf"^\s*{re.escape(description)}\s*$")
        )
        dropdowns = (within or self.notebook).locator(".widget-dropdown")
        return dropdowns.filter(has=label).locator("select")

    def select_dropdown_option(
        self, description: str, option_label: str, *, within: Locator | None = None
    ) -> None:
        """Pick an option of a Dropdown by its visible label, as the browser does it
        for a user: the <select> gets focus, its value changes, input and change events
        fire (ipywidgets listens to change). Waits until the option exists and the
        widget is enabled (an in-flight change disables it).

        No click on the <select> first: in headless chromium that opens the native
        option popup, which then stays open over the page (and in screenshots).
        """
        select = self.dropdown(description, within=within)
        select.focus()
        select.select_option(label=option_label)

    def screenshot(self, path: Path, *, full_page: bool = False, of: Locator | None = None) -> Path:
        """Save a PNG of the page (or of one element) to path; returns path."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if of is not None:
            of.screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path), full_page=full_page)
        return path
