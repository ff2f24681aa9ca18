"""Benchmark 9: the browser stays responsive with long turns (issue 36, item 3), in JupyterLab in Debian's chromium
driven by Playwright (the browser tests' harness, tests/browser/jupyterlab.py: a throwaway JupyterLab on
127.0.0.1).

1. Keystrokes while a reply streams. A notebook starts the benchmark agent (bench/agent.py); one ``%%acp`` cell asks
   for a 200 kB reply streamed over 20 s (4,000 chunks of 50 characters) and, while it streams, keys are typed into
   another cell's editor, one every ``--key-gap`` seconds. Each key's latency is measured in the page: from the
   keydown event's time stamp (when the browser took the input, so time spent waiting for a busy page counts) to
   the first task after the frame that shows the editor changed. The same typing with nothing streaming is the
   floor. Reported: median, p90 and max; the target is p90 < 50 ms while the reply streams.
2. Reopening a long notebook. ``--turns`` ``%%acp`` turns of ``--turn-chars`` characters each (200 x 10 kB: 2 MB
   of replies) are run in a kernel (nbclient) and the notebook is saved through JupyterLab's contents API (so it
   is signed, as a notebook saved in JupyterLab is, and our pre-save hook runs), without the widget state
   nbclient collects (JupyterLab saves none by default). Each round opens it in a fresh
   browser context and times, from the navigation's start: the notebook shown, the first turn's output shown, and
   the last cell shown after a jump to the end of the notebook (for the long notebook, its last turn's output).
   Target: under 3 s. Opened in the same rounds (the order rotating), what JupyterLab takes without us: an empty
   notebook (one empty cell), the same long notebook with its outputs cleared (its 202 cells, none of our output),
   and a notebook of one turn. What is ours is the long notebook's time less that of the same cells without their
   outputs (and, beside it, less the empty notebook's). Both with JupyterLab's default windowing
   ("contentVisibility": off-screen cells are attached but skipped by the browser) and with every cell drawn
   ("none", what the browser tests use). ``--only-reopen`` skips the typing part.

Usage: python bench/browser.py [--keys 150] [--key-gap 0.1] [--turns 200] [--turn-chars 10000] [--rounds 3]
       [--only-reopen] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import LoadMeter, bench_agent, emit  # noqa: E402

from tests.browser.jupyterlab import (  # noqa: E402 - the browser tests' harness, reused
    CHROMIUM_PATH,
    VIEWPORT,
    LabPage,
    launch_chromium,
    start_jupyterlab,
    write_notebook,
)

STREAM_NOTEBOOK = "typing.ipynb"
LONG_NOTEBOOK = "long.ipynb"
SHORT_NOTEBOOK = "short.ipynb"
EMPTY_NOTEBOOK = "empty.ipynb"
BARE_NOTEBOOK = "bare.ipynb"  # the long notebook's cells without their outputs
# label -> notebook, in the order of the results
OPENED = {"long": LONG_NOTEBOOK, "bare": BARE_NOTEBOOK, "empty": EMPTY_NOTEBOOK, "floor": SHORT_NOTEBOOK}
WINDOWING = ("contentVisibility", "none")
STREAM_PROMPT = "%%acp\nchunks=4000 size=50 reply=20"
START, STREAM, TYPE_HERE = 0, 1, 2
# Installed on the editor: each keydown's latency, to the first task after the frame that shows the change.
WATCH_KEYS_JS = """(editor) => {
  window.__acpnbLatencies = [];
  if (editor.__acpnbWatched) return;
  editor.__acpnbWatched = true;
  editor.addEventListener("keydown", (event) => {
    const started = event.timeStamp;
    const observer = new MutationObserver(() => {
      observer.disconnect();
      requestAnimationFrame(() => setTimeout(() => window.__acpnbLatencies.push(performance.now() - started), 0));
    });
    observer.observe(editor, { childList: true, subtree: true, characterData: true });
  }, true);
}"""


def _summary(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {"n": len(values), "median_ms": statistics.median(values), "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
            "max_ms": ordered[-1]}


def _type_keys(lab: LabPage, count: int, gap: float, until: Any = None) -> list[float]:
    """Type ``count`` keys into the typing cell (or until ``until()`` holds); each key's latency in ms."""
    editor = lab.cell(TYPE_HERE).locator(".cm-content")
    editor.click()
    editor.evaluate(WATCH_KEYS_JS)
    pressed = 0
    for index in range(count):
        if until is not None and until():
            break
        lab.page.keyboard.press("abcdefghij"[index % 10])
        pressed += 1
        time.sleep(gap)  # the typist's pace, not a wait for the page
    lab.page.wait_for_function("(n) => window.__acpnbLatencies.length >= n", arg=pressed, timeout=30_000)
    return list(lab.page.evaluate("() => window.__acpnbLatencies"))


def keystrokes(lab: LabPage, root: Path, keys: int, gap: float) -> dict[str, Any]:
    """Keys typed into one cell, idle and while another cell's 200 kB reply streams."""
    write_notebook(root / STREAM_NOTEBOOK, [
        "%load_ext acp_notebook\n%acp start --name bench -- " + shlex.join(bench_agent()),
        STREAM_PROMPT,
        "typed = ''",
    ])
    lab.open_notebook(STREAM_NOTEBOOK)
    lab.run_cell(START)
    idle = _type_keys(lab, max(20, keys // 3), gap)
    lab.cell(STREAM).locator(".jp-InputPrompt").click()
    lab.page.keyboard.press("Control+Enter")  # runs the cell and returns while it streams
    output = lab.output(STREAM)
    lab.wait_for_text("lorem ipsum", within=output, timeout=60)
    static = output.locator(".acpnb-turn.acpnb-static")
    started = time.monotonic()
    streaming = _type_keys(lab, keys, gap, until=lambda: static.count() > 0)
    typed_for = time.monotonic() - started
    lab.wait_for_kernel_idle()
    return {"idle": _summary(idle), "streaming": _summary(streaming), "typed_for_s": typed_for,
            "reply": "200 kB over 20 s (4,000 chunks of 50 characters)", "key_gap_s": gap}


def _long_notebook(server: Any, turns: int, turn_chars: int, name: str = LONG_NOTEBOOK) -> dict[str, Any]:
    """Run ``turns`` turns in a kernel and save the notebook through the server (signed; the pre-save hook runs)."""
    import nbclient
    import nbformat

    chunks = max(1, turn_chars // 50)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                       "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell("%load_ext acp_notebook\n%acp start --name bench -- "
                                                + shlex.join(bench_agent()))]
    notebook.cells += [nbformat.v4.new_code_cell(f"%%acp\nchunks={chunks} size=50") for _ in range(turns)]
    notebook.cells.append(nbformat.v4.new_code_cell("%acp stop"))
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as cwd:
        nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": cwd}}).execute()
    ran_s = time.monotonic() - started
    # nbclient keeps every widget model it saw in the notebook's metadata (hundreds of kB for a few turns); JupyterLab
    # saves none unless told to, and a notebook saved there is what is reopened.
    notebook.metadata.pop("widgets", None)
    size = _save(server, notebook, name)
    outputs = sum(len(json.dumps(cell.get("outputs", []))) for cell in notebook.cells)
    return {"turns": turns, "reply_chars_per_turn": chunks * 50, "file_bytes": size, "output_bytes": outputs,
            "ran_s": ran_s, "notebook": notebook}


def _save(server: Any, notebook: Any, name: str) -> int:
    """Save ``notebook`` through the server's contents API (signed, the pre-save hook run); its size on disk."""
    import nbformat

    content = json.loads(nbformat.writes(notebook))
    server.api("PUT", f"contents/{name}", {"type": "notebook", "format": "json", "content": content}, timeout=120)
    return (server.root_dir / name).stat().st_size


def _baselines(server: Any, long: Any) -> dict[str, int]:
    """The notebooks JupyterLab opens without us: an empty one, and the long one with its outputs cleared."""
    import copy

    import nbformat

    empty = nbformat.v4.new_notebook()
    empty.metadata["kernelspec"] = dict(long.metadata["kernelspec"])
    empty.cells = [nbformat.v4.new_code_cell("")]
    bare = copy.deepcopy(long)
    for cell in bare.cells:
        cell.outputs, cell.execution_count = [], None
    return {"empty_file_bytes": _save(server, empty, EMPTY_NOTEBOOK),
            "bare_file_bytes": _save(server, bare, BARE_NOTEBOOK)}


def _open_once(chromium: Any, server: Any, name: str) -> dict[str, float]:
    """Open ``name`` in a fresh context: seconds to the notebook shown, to its first turn's output (the first cell, for
    a notebook without turns), and to its last cell after a jump there (its last turn's output, where it has one)."""
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        lab = LabPage(context.new_page(), server)
        started = time.monotonic()
        lab.open_notebook(name, wait_for_kernel=False)
        shown = time.monotonic() - started
        cells = lab.notebook.locator(".jp-Notebook-cell")
        turns = name in (LONG_NOTEBOOK, SHORT_NOTEBOOK)
        first_cell = 1 if turns else 0
        if turns:
            lab.wait_for_selector(".acpnb-turn", within=lab.output(1), timeout=60)
        else:
            lab.cell(0).locator(".jp-InputArea").first.wait_for(state="visible", timeout=60_000)
        first = time.monotonic() - started
        lab.cell(first_cell).locator(".jp-InputPrompt").click()  # select a cell (command mode) ...
        lab.page.keyboard.press("Control+End")  # ... and jump to the last one, scrolled into view
        count = cells.count()
        if turns:
            lab.cell(count - 2).locator(".acpnb-turn").first.wait_for(state="visible", timeout=60_000)
        else:
            lab.cell(count - 1).locator(".jp-InputArea").first.wait_for(state="visible", timeout=60_000)
        return {"shown_s": shown, "first_output_s": first, "last_output_s": time.monotonic() - started}
    finally:
        context.close()
        _shutdown_kernels(server)


def _shutdown_kernels(server: Any, tries: int = 3) -> None:
    """The kernels the opened notebook started, shut down; a server busy ending one (an error 500 on a loaded
    machine) is asked again."""
    import urllib.error

    for attempt in range(tries):
        try:
            server.shutdown_all_kernels()
            return
        except urllib.error.HTTPError:
            if attempt == tries - 1:
                raise


def _set_windowing(server: Any, mode: str) -> None:
    """The notebook's windowing mode, as the person's own setting (JupyterLab's settings API)."""
    import urllib.request

    body = json.dumps({"raw": json.dumps({"windowingMode": mode, "autoStartDefaultKernel": True})}).encode()
    request = urllib.request.Request(f"{server.base_url}lab/api/settings/@jupyterlab/notebook-extension:tracker",
                                     data=body, method="PUT",
                                     headers={"Authorization": f"token {server.token}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10):
        pass


def reopen(chromium: Any, server: Any, rounds: int) -> dict[str, Any]:
    """The long notebook and the notebooks without us, the order rotating, ``rounds`` times each, per windowing
    mode; what is ours (see the module docstring)."""
    found: dict[str, Any] = {}
    names = list(OPENED.values())
    for mode in WINDOWING:
        _set_windowing(server, mode)
        _open_once(chromium, server, EMPTY_NOTEBOOK)  # warm-up: the server's and the browser's caches
        times: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for index in range(rounds):
            for name in names[index % len(names):] + names[:index % len(names)]:
                times[name].append(_open_once(chromium, server, name))
        found[mode] = {label: {"rounds": times[name],
                               **{f"{key}_median_s": statistics.median(t[f"{key}_s"] for t in times[name])
                                  for key in ("shown", "first_output", "last_output")}}
                       for label, name in OPENED.items()}
        last = {label: found[mode][label]["last_output_median_s"] for label in OPENED}
        found[mode]["ours_s"] = last["long"] - last["bare"]  # the outputs: what the same cells cost with them
        found[mode]["beyond_empty_s"] = last["long"] - last["empty"]
    return found


def run(keys: int, gap: float, turns: int, turn_chars: int, rounds: int, only_reopen: bool = False) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM_PATH.exists():
        raise SystemExit(f"{CHROMIUM_PATH} not found: run scripts/install-test-deps.sh")
    meter = LoadMeter()
    with tempfile.TemporaryDirectory(prefix="acpnb-bench-browser-") as base, \
            start_jupyterlab(Path(base)) as server, sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            typing = None
            if not only_reopen:
                context = chromium.new_context(viewport=VIEWPORT)
                try:
                    typing = keystrokes(LabPage(context.new_page(), server), server.root_dir, keys, gap)
                finally:
                    context.close()
                    server.shutdown_all_kernels()
            made = _long_notebook(server, turns, turn_chars)
            baselines = _baselines(server, made.pop("notebook"))
            floor = _long_notebook(server, 1, turn_chars, SHORT_NOTEBOOK)
            floor.pop("notebook")
            opened = reopen(chromium, server, rounds)
        finally:
            chromium.close()
    return {"keystrokes": typing, "long_notebook": {**made, **baselines}, "floor_notebook": floor, "reopen": opened,
            "load": meter.done()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=150, help="keys typed while the reply streams")
    parser.add_argument("--key-gap", type=float, default=0.1, help="seconds between two keys")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--turn-chars", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="times the long notebook is opened")
    parser.add_argument("--only-reopen", action="store_true", help="skip the keys typed while a reply streams")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    emit(run(args.keys, args.key_gap, args.turns, args.turn_chars, args.rounds, args.only_reopen), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
