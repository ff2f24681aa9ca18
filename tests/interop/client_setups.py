"""The pinned third-party ACP clients of the interop tests (acpx, the Python SDK's examples), where
scripts/install-clients.sh put them, and checks of the frames our side exchanged with them.

The pins repeat those of scripts/install-clients.sh. A client missing from the cache fails its tests under
CI=true and skips them otherwise, naming the command that installs it (as the agents' tests do).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from agent_setups import agent_cache

from tests.proxy_agents.harness import validate_trace
from tests.schema_check import FrameLog

ACPX_VERSION = "0.19.1"
NODE_VERSION = "22.23.3"  # acpx 0.19.1 asks for node >= 22.13
# The SDK's examples for each line of the SDK the tests may run on (0.12.x by default, 1.x with `make test-sdk1`'s
# PYTHONPATH): the 0.12.1 examples use helpers (acp.text_block...) that 1.0 no longer has.
SDK_EXAMPLES = {"0.12": "0.12.1", "1": "1.0.0rc3"}

HERE = Path(__file__).resolve().parent
TAP = HERE / "stdio_tap.py"


def _missing(what: str, install: str) -> None:
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"{what}; CI must run {install} before the tests (`make test` does)", pytrace=False)
    pytest.skip(f"{what}; run {install} to include it")


def _npm_version(prefix: Path, package: str) -> str | None:
    manifest = prefix / "node_modules" / package / "package.json"
    return json.loads(manifest.read_text()).get("version") if manifest.is_file() else None


def require_acpx() -> Path:
    """The directory holding the pinned `acpx` and the `node` it runs on (put it first on PATH)."""
    prefix = agent_cache() / "acpx"
    found = _npm_version(prefix, "acpx")
    bin_dir = prefix / "node_modules" / ".bin"
    if found != ACPX_VERSION or not os.access(bin_dir / "acpx", os.X_OK) or not os.access(bin_dir / "node", os.X_OK):
        _missing(f"acpx@{ACPX_VERSION} is not installed in {prefix}" + (f" (found {found})" if found else ""),
                 "scripts/install-agents.sh acpx")
    return bin_dir


def sdk_version() -> str:
    """The version of the SDK this interpreter imports (make test-sdk1 shadows 0.12 with 1.x on PYTHONPATH)."""
    return importlib.metadata.version("agent-client-protocol")


def require_sdk_examples() -> Path:
    """The examples/ directory of the pinned sdist of the SDK line this interpreter runs."""
    running = sdk_version()
    line = next((prefix for prefix in SDK_EXAMPLES if running == prefix or running.startswith(prefix + ".")), None)
    if line is None:
        pytest.fail(f"no SDK examples are pinned for agent-client-protocol {running} (pinned: {SDK_EXAMPLES})")
    examples = agent_cache() / "sdk-examples" / SDK_EXAMPLES[line] / "examples"
    if not (examples / "client.py").is_file():
        _missing(f"the examples of agent-client-protocol {SDK_EXAMPLES[line]} are not in {examples}",
                 "scripts/install-agents.sh sdk-examples")
    return examples


def tapped(trace_dir: Path, command: list[str]) -> list[str]:
    """`command` behind stdio_tap.py, which traces its frames into `trace_dir` (one file per process)."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    return [sys.executable, str(TAP), str(trace_dir), *command]


def command_line(argv: list[str]) -> str:
    """An argv as one command line, for clients that take the agent as a string (acpx --agent)."""
    return shlex.join(argv)


def tap_frames(path: Path) -> list[tuple[str, dict]]:
    """(sender, message) for each frame in a tap's trace file; a line that was not JSON fails the test."""
    frames = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        assert "raw" not in entry, f"{path.name}: the {entry['from']} wrote a line that is not JSON: {entry['raw']!r}"
        frames.append((entry["from"], entry["msg"]))
    return frames


def check_traces(trace_dir: Path) -> dict[str, FrameLog]:
    """Every frame in every trace file of `trace_dir` checked against the ACP schema, per process and pipe:
    the taps' files (client <-> our agent) and the proxy's own (client <-> proxy <-> each agent).
    Returns the taps' logs by file name."""
    logs: dict[str, FrameLog] = {}
    for path in sorted(trace_dir.glob("*.jsonl")):
        if path.name.endswith(".proxy.jsonl"):
            validate_trace(path)
            continue
        log = FrameLog(local="agent")
        for sender, message in tap_frames(path):
            log.record(sender, message)
        log.check()
        logs[path.name] = log
    assert logs, f"no frames were traced in {trace_dir}"
    return logs
