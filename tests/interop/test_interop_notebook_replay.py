"""A notebook recorded against claude-agent-acp (through the model server) re-runs from its recording in a
fresh kernel where no agent can be found, and its %%acp cells produce the same outputs.

The notebook's start cell is the only one that changes between the two runs: `%acp start claude ...
--record FILE` in the first, `%acp start --replay FILE` in the second (what an author does before
sharing a notebook)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from agent_setups import home_env
from conftest import MARKER_VAR, require_pinned
from tests.kernels import notebook_client

pytestmark = pytest.mark.interop

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

PROMPTS = ("say hi", "think tides")
DURATION = re.compile(r" · \d+(?:\.\d+)? (?:ms|s)\b")
# claude-agent-acp 0.101.0 names the session after its first prompt in a session_info_update sent right after that
# turn's answer: whether the finished turn's header was drawn before or after it arrived ("say hi (from the first
# prompt)" or "say hi") depends on the render's timing, live and replayed alike; the title is the same text.
TITLE_SOURCE = re.compile(r" \(from the first prompt\)")


def notebook(start_line: str) -> object:
    cells = [nbformat.v4.new_code_cell("%load_ext acp_notebook\n%config AcpMagics.wait = 'always'"),
             nbformat.v4.new_code_cell(start_line),
             nbformat.v4.new_code_cell("%acp set model=haiku"),
             *(nbformat.v4.new_code_cell(f"%%acp\n{prompt}") for prompt in PROMPTS),
             nbformat.v4.new_code_cell("%acp stop --all")]
    return nbformat.v4.new_notebook(cells=cells)


def execute(nb: object, workdir: Path, env: dict[str, str]) -> object:
    client = notebook_client(nb, workdir, timeout=180)
    saved = dict(os.environ)
    os.environ.update(env)  # the kernel inherits the environment of the process that starts it
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb


def turn_outputs(nb: object) -> list[str]:
    """The saved text of each %%acp cell (the static form a reader sees), without the turn's duration: a
    replay runs as fast as it can, which is the one thing that differs."""
    texts = []
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell.source.startswith("%%acp"):
            texts += [TITLE_SOURCE.sub("", DURATION.sub("", o["data"]["text/plain"])) for o in cell.outputs
                      if "text/plain" in o.get("data", {})]
    return texts


def test_a_notebook_recorded_against_claude_reruns_offline_from_its_recording(interop, model_server, tmp_path):
    setup = require_pinned("claude")
    recording = tmp_path / "claude.acp.jsonl"
    env = {**setup.env(model_server), **home_env(interop.new_home("claude")), MARKER_VAR: interop.marker}
    options = " ".join(f"--env {shlex.quote(f'{k}={v}')}" for k, v in env.items())
    live = execute(notebook(f"%acp start claude {options} --record {recording}"), interop.work, {})
    recorded = turn_outputs(live)
    assert len(recorded) == len(PROMPTS) and "Hello from the interop model" in recorded[0]

    # No agent can be found in the second kernel: no cache of installed agents, no npx, no claude on PATH.
    offline = {"ACP_NOTEBOOK_AGENT_CACHE": str(tmp_path / "no-agents"), "PATH": os.path.dirname(os.sys.executable)}
    replayed = execute(notebook(f"%acp start --replay {recording}"), interop.work, offline)
    assert turn_outputs(replayed) == recorded
    assert recording.read_text().count(env["ANTHROPIC_API_KEY"]) == 0  # the key is masked in the recording
