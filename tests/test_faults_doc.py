"""docs/reliability.md, the README's Reliability section, generated from the suites that check it.

The faults come from ``tests/test_faults.FAULTS`` (the table those tests run), the limits from
the constants the code uses, and every other row names the test that checks it: a test here
fails when the file differs from what this module renders, and when a row names a test that
does not exist. To write the file again after a change:

    .venv/bin/python -m tests.test_faults_doc
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

from acp_notebook import client
from acp_notebook._process import STDERR_LINES_KEPT
from acp_notebook.connection import files, transport
from acp_notebook.proxy import backend, server, session
from tests.test_faults import FAULTS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"


def _size(size: int) -> str:
    return f"{size / 2**20:g} MiB" if size % 2**20 == 0 else f"{size:,} bytes"


def limits() -> list[tuple[str, str]]:
    start_timeout = inspect.signature(client._start).parameters["timeout"].default
    return [
        ("One frame (line) from an agent", f"{_size(transport.FRAME_LIMIT)}; a longer line is skipped as it "
         "streams in and noted (see the 64 MiB fault)"),
        ("A file read, or content written, on an agent's behalf", _size(files.FILE_LIMIT)),
        ("Request deadline", f"`timeout=` of `acpnb.start` (default {start_timeout:g} s), also the start "
         "deadline; prompts have none (`prompt(timeout=)` cancels the turn)"),
        ("Grace for a cancelled turn to end", f"{client.CANCEL_GRACE_S:g} s, then it is marked `cancelled`"),
        ("Permission decision", "`permission_timeout=` of `acpnb.start` (default: no limit), then `cancelled`"),
        ("Frames kept in `agent.log`", f"{client.LOG_LIMIT:,} frames and {client.LOG_LIMIT_BYTES // 2**20} MiB of "
                                       "their estimated size; the oldest tenth goes when either is reached"),
        ("Agent stderr lines kept for errors", f"the last {STDERR_LINES_KEPT}"),
        ("Updates held for a session still being opened", f"{client.EARLY_UPDATES_KEPT} per session, "
         f"{client.EARLY_SESSIONS_KEPT} sessions"),
        ("Excerpt of a bad frame in `agent.log`", f"{transport.EXCERPT_CHARS} characters"),
        ("Proxy: `session/new` waits for its agents",
         f"`--probe-timeout` (default {server.DEFAULT_PROBE_TIMEOUT:g} s)"),
        ("Proxy: an agent's start", f"`--start-timeout` (default {server.DEFAULT_START_TIMEOUT:g} s)"),
        ("Proxy: every other request to an agent", f"{backend.DEFAULT_REQUEST_TIMEOUT:g} s (prompts: none)"),
        ("Proxy: updates held for sessions not yet bound or known", f"{session.HELD_UPDATES_KEPT} per session, "
         f"{backend.ORPHAN_UPDATES_KEPT} per unknown session id"),
    ]


# (what, behaviour, the test that checks it)
BAD_INPUT = [
    ("Any mix of schema-shaped and malformed frames, during a turn or between turns",
     "Nothing raises on the loop thread, the connection keeps answering, state keeps its types (options, "
     "title, meta, transcript), every bad frame is noted in `agent.log`; behind the proxy each is named in the "
     "proxy's log and none is forwarded.",
     "test_properties.py::test_the_client_survives_any_frames, "
     "test_properties.py::test_the_proxy_survives_any_frames_from_its_agent"),
    ("An update of a known kind with fields of the wrong type; a malformed option list",
     "Noted in `agent.log` and not applied: a session's state is never half-changed.",
     "test_faults.py::test_fault[unknown-updates-client]"),
    ("An agent request naming a session id that is not a string, or a malformed `toolCall`",
     "Answered (unknown session, or asked without merging the tool call); nothing raises.",
     "test_properties.py::test_the_client_survives_any_frames"),
]

FILES = [
    ("Paths", "Absolute, with no NUL byte, encodable, at most 4,095 bytes and 255 per name; resolved through every "
     "symlink (a loop is refused), and inside the session's cwd or additional directories. The file is reached "
     "from its root one folder at a time without following a link (missing folders made in their parent), so a "
     "folder or file swapped for a symlink after the check is refused, never followed.",
     "test_fs_confinement.py::test_relative_dotdot_absolute_and_symlink_escapes_are_refused, "
     "hostile/test_files.py::test_paths_no_file_can_have_are_refused_as_invalid_params, "
     "hostile/test_files.py::test_a_folder_flipping_between_folder_and_symlink_never_lets_anything_out"),
    ("Kinds of file", "Regular files only: FIFOs, devices, sockets and directories are refused, without "
     "blocking.", "test_fs_confinement.py::test_fifos_devices_and_directories_are_refused_without_blocking"),
    ("Size", f"Files and contents over {_size(files.FILE_LIMIT)} are refused.",
     "test_fs_confinement.py::test_files_and_contents_over_the_size_limit_are_refused"),
    ("Notebooks", "Writes to `*.ipynb` are refused unless the agent was started with `notebook_writes=True` "
     "(the kernel cannot know which notebooks a front end has open, and a write under an open one is lost or "
     "clobbers the user's edits); the notebook the kernel runs (`JPY_SESSION_NAME`, `__session__`) is refused "
     "even then.",
     "test_fs_confinement.py::test_notebooks_are_never_written_unless_allowed_and_the_kernels_own_never"),
    ("Hard links", "A file with other hard links is neither read nor written unless all its names are in its "
     "folder (another may be outside the roots).",
     "test_fs_confinement.py::test_a_file_with_other_hard_links_is_never_written"),
    ("A refusal", "Answered as an error naming the rule; the agent fails its tool call and the turn goes on, "
     "directly and behind the proxy.",
     "test_fs_confinement.py::test_a_refused_fs_request_or_failed_permission_fails_the_tool_call_not_the_turn"),
]

SECRETS = [
    ("Values of secret-named environment variables (`*_KEY`, `*TOKEN*`, `*SECRET*`, ...; 8 characters or more), "
     "secret-named JSON keys (`apiKey`, `token`, `authorization`, ...)",
     "Masked (`***NAME***`, `***`) in `agent.log` and so the inspector, recordings, error messages, stderr "
     "lines and their views, the transcript (replies, thoughts, titles, tool call output) and saved notebooks; "
     "the agent still receives what was sent.",
     "test_secrets.py::test_a_planted_key_is_masked_everywhere, "
     "test_secrets.py::test_a_saved_notebook_never_holds_the_key"),
]

CLEANUP = [
    ("`close()`, 50 cycles each of a subprocess agent, an in-memory agent and the proxy with its agent",
     "No thread, file descriptor or process of any agent's process group is left.",
     "test_leaks.py::test_fifty_cycles_of_an_agent_a_memory_agent_and_the_proxy_leave_nothing"),
    ("Interpreter exit with a proxy and an agent (with a grandchild) still running",
     "All of them end.", "test_leaks.py::test_fifty_cycles_of_an_agent_a_memory_agent_and_the_proxy_leave_nothing"),
    ("`%acp stop`, kernel shutdown", "The proxy and its agents end.",
     "test_leaks.py::test_acp_stop_and_kernel_shutdown_end_the_proxy_and_its_agents"),
]


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines + [""]


def _checked(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [(what, behaviour, " ".join(f"`{name.strip()}`" for name in test.split(","))) for what, behaviour, test
            in rows]


def render() -> str:
    lines = [
        "# Reliability",
        "",
        "<!-- Generated by tests/test_faults_doc.py from the fault suite's table (tests/test_faults.py), the "
        "code's limits and the tests named below. Do not edit: run `.venv/bin/python -m tests.test_faults_doc`. -->",
        "",
        "An agent must never hang the kernel, lose a session's state or reach outside what the user allowed. "
        "Each row below is checked by a test; every fault test has a deadline that fails it if anything hangs, "
        "and checks that the error names the cause, that the session's earlier state and transcript are intact "
        "and that a new session works.",
        "",
        "## Faults",
        "",
        "A test agent (`tests/agents/fault_agent.py`) misbehaves on purpose, against the client and behind the "
        "multi-agent proxy (`tests/test_faults.py`).",
        "",
    ]
    lines += _table(("Fault", "In the client", "Behind the proxy"),
                    [(fault.title, fault.client, fault.proxy) for fault in FAULTS])
    lines += ["## Bad input", ""] + _table(("Input", "Behaviour", "Checked by"), _checked(BAD_INPUT))
    lines += ["## Files an agent asks for", "",
              "`fs/read_text_file` and `fs/write_text_file` (`acp_notebook/connection/files.py`):", ""]
    lines += _table(("Rule", "Behaviour", "Checked by"), _checked(FILES))
    lines += ["## Secrets", ""] + _table(("What", "Behaviour", "Checked by"), _checked(SECRETS))
    lines += ["## Cleanup", ""] + _table(("After", "Behaviour", "Checked by"), _checked(CLEANUP))
    lines += ["## Limits", ""] + _table(("What", "Limit"), limits())
    return "\n".join(lines).rstrip("\n") + "\n"


def _test_names(module: str) -> set[str]:
    tree = ast.parse((ROOT / "tests" / module).read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_row_names_a_test_that_exists() -> None:
    for _, _, tests in BAD_INPUT + FILES + SECRETS + CLEANUP:
        for name in tests.split(","):
            module, _, function = name.strip().partition("::")
            assert function.split("[")[0] in _test_names(module), f"{name} does not exist"


def test_the_reliability_doc_is_current() -> None:
    assert DOC.exists() and DOC.read_text(encoding="utf-8") == render(), (
        "docs/reliability.md differs from the fault suite's table: run `.venv/bin/python -m tests.test_faults_doc`")


if __name__ == "__main__":
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
