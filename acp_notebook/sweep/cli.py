"""`acp-notebook sweep`: a sweep from the command line, with the summary, comparisons and plots it asks for.

Here: the command line, read without loading the sweep; cli_run.py: the run, once the line is read.
Runs on the main thread; the sweep itself runs on the background loop like ``acpnb.sweep``.
Every usage error names this command's own options (hints.CLI), never Python arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import _term
from .._argtypes import number, whole
from .cli_values import read_prompts

__all__ = ["build_parser", "main", "read_prompts"]

EPILOG = """\
model ids are AGENT:MODEL, AGENT a registered agent (see `acp-notebook agents`) and MODEL a value of
its model option, e.g. demo:fast, claude:opus; with --agent, that agent's own values (a:fast through
the proxy).

a dataset (--dataset) is a .jsonl, .json or .csv file of records: `prompt` (or --template built from
the fields), optional `id` and `target`, any other fields kept as columns. scorers (--scorer):
exact, includes, numeric, numeric=TOLERANCE, regex=PATTERN, json=FIELD, graded=AGENT:MODEL;
--extract REGEX picks the answer (group 1) that exact, includes and numeric compare.

--out DIR keeps a run directory (rows.jsonl, manifest.json, trajectories/); running the same command
again runs only the trials not done yet. --out FILE.jsonl/.csv/.json keeps just the rows.
`acp-notebook sweep show DIR [ROW]` prints one trial: prompt, steps, tool calls, scores and diff.

agentic tasks: --tasks DIR reads Harbor task folders (each trial works in a copy of the task's
environment/ and is graded by its tests/test.sh, locally: no container runtime is used);
--workspace DIR gives every trial a fresh copy of DIR, graded by --check COMMAND (exit code 0 = pass).
--sandbox bwrap runs each agent and check under bubblewrap (add --no-network to cut the network).
--agent oracle runs each task's solution/solve.sh instead of an agent (is every task solvable?);
--task-env venv installs each task Dockerfile's `pip install` packages in a cached virtualenv.

exit status: 0 when the sweep ran (some trials may have failed; see the summary), 1 when every trial
failed, 2 on a usage error, 130 when interrupted.

examples:
  acp-notebook sweep --model demo:fast --model demo:smart --prompt hello \\
      --repeats 3
  acp-notebook sweep --dataset tasks.jsonl --model demo:fast \\
      --model demo:smart --scorer numeric --scorer includes --out runs/arith \\
      --compare demo:smart demo:fast --plot scores.png
  acp-notebook sweep --model a:fast --model b:smart --prompt hello \\
      --agent "acp-notebook proxy --agent a=demo --agent b=demo"
  acp-notebook sweep --tasks notebooks/tasks --model demo:fast \\
      --model demo:smart --out runs/tasks --export-atif runs/tasks-atif \\
      --export-inspect runs/tasks.eval
  acp-notebook sweep --workspace repo/ --prompt "fix the failing test" \\
      --check "pytest -q" --model claude:haiku
"""


# Written out: argparse never breaks a group of exclusive options, so its own usage line for the
# dataset sources ran past an 80-column terminal. The options themselves are listed below it.
USAGE = """%(prog)s --model AGENT:MODEL [--model ...]
                          (--prompt TEXT | --prompts FILE | --dataset FILE |
                           --tasks DIR) [options]"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-notebook sweep", epilog=EPILOG, usage=USAGE, formatter_class=_term.ParagraphHelpFormatter,
        description="Send a dataset's prompts to several agent:model ids, score the replies, and summarise "
                    "accuracy, latency, tokens and cost per model.")
    add = parser.add_argument
    add("--model", "-m", action="append", dest="models", metavar="AGENT:MODEL", default=[],
        help="a model to sweep (repeat the flag for more); required unless --agent oracle")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", "-p", action="append", dest="prompts", metavar="TEXT",
                        help="a prompt (repeat the flag for more)")
    source.add_argument("--prompts", dest="prompts_file", metavar="FILE",
                        help="prompts, one per line (blank and # lines skipped); '-' reads stdin")
    source.add_argument("--dataset", "-d", metavar="FILE", help="a .jsonl, .json or .csv dataset")
    source.add_argument("--tasks", metavar="DIR", help="a folder of task folders in Harbor's layout (instruction.md, "
                                                       "task.toml, tests/test.sh, environment/), graded by their tests")
    add("--on-invalid", choices=("skip", "error"), default="skip",
        help="with --tasks: skip folders that are not tasks (named on stderr), or refuse them (default skip)")
    add("--workspace", "-w", metavar="DIR", help="every trial works in a fresh copy of DIR (a git worktree for a "
                                                  "repository); the session's cwd is that copy")
    add("--setup", metavar="COMMAND", help="a shell command run in each workspace before the turn")
    add("--check", action="append", default=[], metavar="COMMAND",
        help="grade each trial by COMMAND's exit code in its workspace (score column named after the program); "
             "repeatable")
    add("--check-timeout", type=number(zero=False, unit="seconds"), default=120.0, metavar="SECONDS",
        help="a --check running longer is killed and its row is an error (default 120)")
    add("--keep-workspaces", action="store_true", help="keep each trial's workspace (in the run directory)")
    add("--keep-sessions", action="store_true", help="leave the trials' sessions in the agent's session list")
    add("--workspace-limit-mb", type=number(zero=False), default=1024.0, metavar="MB",
        help="refuse a workspace larger than this (default 1024)")
    add("--sandbox", choices=("bwrap", "bwrap-trial", "bwrap-shared"),
        help="run each agent (and the checks) under bubblewrap: the filesystem read-only but for the trial's "
             "workspace, /tmp and the agent's state folders; credential folders hidden (not a VM: see the README); "
             "bwrap: one agent process per concurrency slot, emptied between trials; bwrap-trial: one per trial; "
             "bwrap-shared: one sandboxed agent per agent name, writable in all of the sweep's workspaces")
    add("--no-network", action="store_false", dest="network",
        help="with --sandbox: cut the sandboxed processes off the network")
    add("--task-env", choices=("venv",), help="with --tasks: install the `pip install` packages of each task's "
                                              "Dockerfile in a cached virtualenv for its solve.sh and test.sh")
    add("--export-atif", metavar="DIR", help="write each trial's trajectory in ATIF (Harbor's format) to DIR")
    add("--export-inspect", metavar="PATH", help="write an Inspect AI eval log (.eval), one per model")
    add("--template", "-t", metavar="TEXT", help="the prompt built from each sample's fields, e.g. 'What is {a}+{b}?'")
    add("--scorer", "-s", action="append", dest="scorers", default=[], metavar="SPEC",
        help="score each reply: exact, includes, numeric[=TOL], regex=PATTERN, json=FIELD, graded=AGENT:MODEL")
    add("--extract", metavar="REGEX", help="the part of the reply that exact/includes/numeric compare (group 1)")
    add("--repeats", "-n", type=whole(1), default=1, metavar="N", help="trials per sample and model (default 1)")
    add("--concurrency", "-j", type=whole(1), default=4, metavar="N", help="trials at once (default 4)")
    add("--agent-concurrency", action="append", default=[], metavar="[NAME=]N",
        help="at most N trials at once on agent NAME (or on every agent); repeatable")
    add("--timeout", type=number(zero=False, unit="seconds"), default=300.0, metavar="SECONDS",
        help="per-turn limit; a slower turn is cancelled and recorded as a timeout (default 300)")
    add("--retries", type=whole(0), default=2, metavar="N",
        help="attempts after a transient failure (agent exited, timeout, rate limit; default 2)")
    add("--backoff", type=number(zero=True, unit="seconds"), default=1.0, metavar="SECONDS",
        help="pause before the first retry, doubling each time (default 1)")
    add("--budget", type=number(zero=False), metavar="COST",
        help="start no new trial once the reported cost reaches it")
    add("--config", "-c", action="append", default=[], metavar="ID=VALUE",
        help="another option to set after the model, e.g. thought_level=high (repeatable)")
    add("--out", "-o", metavar="PATH", help="a run directory (or a .jsonl/.csv/.json file); an existing one resumes")
    add("--retry-failed", action="store_true", help="when resuming, run the failed trials again too")
    add("--permission", choices=("deny", "allow"), help="answer to permission requests (default: allow inside a "
                                                        "trial's workspace, deny elsewhere)")
    add("--cwd", metavar="DIR", help="working directory for the agents and sessions")
    add("--agent", metavar="SPEC", help="sweep this one agent (a registered name or a command line, e.g. the "
                                        "proxy); the model ids are then its own model values")
    add("--register", action="append", default=[], metavar="NAME=COMMAND",
        help="register an agent for this sweep, e.g. slow='python -m acp_notebook.demo --delay 1'")
    add("--executor", choices=("local", "ray"), default="local", help="where trials run (default local)")
    add("--ray-address", metavar="ADDRESS", help="with --executor ray: the cluster to connect to (default: local)")
    add("--workers", type=whole(1), metavar="N", help="with --executor ray: how many workers (default: one per CPU)")
    add("--compare", nargs=2, action="append", default=[], metavar=("A", "B"),
        help="after the summary, compare model A with model B on the first scorer (paired test); repeatable")
    add("--plot", metavar="FILE.png", help="save the score plot (latency without scorers); needs matplotlib")
    add("--no-progress", action="store_true", help="do not draw the progress bar on stderr")
    add("--json", action="store_true", dest="as_json", help="print the summary and comparisons as JSON")
    return parser


def _show_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-notebook sweep show", description="Show one trial of a sweep's run directory: the prompt, the "
                                                    "agent's steps and tool calls, the scores and the workspace diff.")
    parser.add_argument("run", metavar="RUN_DIR", help="a sweep's run directory (--out DIR)")
    parser.add_argument("row", metavar="ROW", nargs="?", default="0",
                        help="the row's number (0 is the first) or a trial id (a unique prefix will do); default 0")
    return parser


def show_main(argv: Sequence[str]) -> int:
    """`acp-notebook sweep show RUN_DIR [ROW]`: one trial's conversation, tool calls, scores and diff."""
    parser = _show_parser()
    args = parser.parse_args(list(argv))
    # The sweep's modules (the client, the trials, the results: over a second) load once the line is read.
    from .cli_run import show

    return show(args, parser)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["show"]:
        return show_main(argv[1:])
    parser = build_parser()
    if argv and not argv[0].startswith("-"):
        # A bare first word can only be a prompt typed without its option.
        parser.error(f"unexpected {argv[0]!r}: give the prompt with --prompt TEXT (or --prompts FILE, --dataset FILE, "
                     "--tasks DIR); `acp-notebook sweep show RUN_DIR` shows a trial of a run")
    args = parser.parse_args(argv)
    if not args.models and args.agent != "oracle":
        parser.error("the following arguments are required: --model/-m (unless --agent oracle)")
    # The sweep's machinery (the client, the trials, Ray's executor: over a second) loads only now: `--help` and
    # usage errors answer at once.
    from .cli_run import run

    return run(args, parser)
