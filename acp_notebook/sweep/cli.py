"""`acp-notebook sweep`: run prompts across agent:model ids from the command line and print a per-model summary."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main", "read_prompts"]

EPILOG = """\
model ids are AGENT:MODEL, AGENT a registered agent (see `acp-notebook agents`) and MODEL a value of
its model option, e.g. demo:fast, claude:opus, or with --agent the agent's own values (a:fast through
the proxy).

exit status: 0 when the sweep ran (some runs may have failed; see the summary and the error column),
1 when every run failed (nothing was measured), 2 on a usage error, 130 when interrupted.

examples:
  acp-notebook sweep --model demo:fast --model demo:smart --prompt hello --repeats 3 --out r.csv
  acp-notebook sweep --model demo:smart --config thought_level=high --prompts prompts.txt --out r.json
  acp-notebook sweep --agent "acp-notebook proxy --agent a=demo --agent b=demo" --model a:fast --model b:smart \\
      --prompt hello
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-notebook sweep",
        description="Send the same prompts to several agent:model ids and summarise latency, tokens and errors.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", "-m", action="append", dest="models", metavar="AGENT:MODEL", required=True,
                        help="a model to sweep (repeat the flag for more)")
    prompts = parser.add_mutually_exclusive_group(required=True)
    prompts.add_argument("--prompt", "-p", action="append", dest="prompts", metavar="TEXT",
                         help="a prompt (repeat the flag for more)")
    prompts.add_argument("--prompts", dest="prompts_file", metavar="FILE",
                         help="prompts from a file: one per line (blank lines and lines starting with # skipped), "
                              "or a JSON list of strings for .json; '-' reads stdin")
    parser.add_argument("--repeats", "-n", type=_positive_int, default=1, metavar="N",
                        help="runs per prompt and model (default 1)")
    parser.add_argument("--concurrency", "-j", type=_positive_int, default=4, metavar="N",
                        help="runs at once, across agents and sessions (default 4)")
    parser.add_argument("--timeout", type=_positive_float, default=300.0, metavar="SECONDS",
                        help="per-turn limit; a slower turn is cancelled and recorded as a timeout (default 300)")
    parser.add_argument("--config", "-c", action="append", default=[], metavar="ID=VALUE",
                        help="another option to set after the model, e.g. thought_level=high (repeatable)")
    parser.add_argument("--out", "-o", metavar="FILE",
                        help="write rows as runs finish (.csv, .json or .jsonl); an existing file is resumed")
    parser.add_argument("--retry-errors", action="store_true",
                        help="when resuming, run again the runs that failed before")
    parser.add_argument("--permission", choices=("deny", "allow"), default="deny",
                        help="answer to the agents' permission requests (default deny)")
    parser.add_argument("--cwd", metavar="DIR", help="working directory for the agents and sessions")
    parser.add_argument("--agent", metavar="SPEC",
                        help="sweep this one agent (a registered name or a command line, e.g. the proxy); "
                             "the model ids are then its own model values")
    parser.add_argument("--register", action="append", default=[], metavar="NAME=COMMAND",
                        help="register an agent for this sweep, e.g. slow='python -m acp_notebook.demo --delay 1'")
    parser.add_argument("--no-progress", action="store_true", help="do not draw the progress bar on stderr")
    parser.add_argument("--json", action="store_true", dest="as_json",
                        help="print the summary as JSON instead of a table")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def read_prompts(source: str) -> list[str]:
    """Prompts from a file (or '-' for stdin): a JSON list for .json, else one prompt per line."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    if source.lower().endswith(".json"):
        data = json.loads(text)
        if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
            raise ValueError(f"{source}: expected a JSON list of strings")
        return data
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _parse_config(items: Sequence[str]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config wants ID=VALUE, got {item!r}")
        config[key.strip()] = value.strip()
    return config


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))

    from .. import launch
    from ..errors import AcpError
    from .progress import NullProgress, TextProgress
    from .runner import sweep

    try:
        prompts = args.prompts if args.prompts else read_prompts(args.prompts_file)
        if not prompts:
            raise ValueError(f"{args.prompts_file}: no prompts in it")
        config = _parse_config(args.config)
        for item in args.register:
            name, sep, command = item.partition("=")
            if not sep or not command.strip():
                raise ValueError(f"--register wants NAME=COMMAND, got {item!r}")
            launch.register(name.strip(), command)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    progress = NullProgress() if args.no_progress else TextProgress(sys.stderr)
    try:
        result = sweep(prompts, args.models, agent=args.agent, repeats=args.repeats, concurrency=args.concurrency,
                       timeout=args.timeout, config=config, permission=args.permission, cwd=args.cwd, out=args.out,
                       retry_errors=args.retry_errors, progress=progress)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    except AcpError as exc:
        print(f"acp-notebook sweep: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nacp-notebook sweep: interrupted" + (f"; finished runs are in {args.out}, run the same command "
                                                     "again to resume" if args.out else ""), file=sys.stderr)
        return 130
    summary = result.summary()
    if args.as_json:
        print(json.dumps(list(summary), indent=1))
    else:
        print(summary)
        print()
        failed = len(result.failed)
        line = f"{len(result)} runs: {len(result) - failed} ok, {failed} failed"
        if result.metadata.get("skipped"):
            line += f" ({result.metadata['skipped']} resumed from {args.out})"
        if args.out:
            line += f"; results in {args.out}"
        print(line)
        for row in result.failed[:5]:
            print(f"  {row['model']} prompt {row['prompt_index']} repeat {row['repeat']}: {row['error']}")
        if failed > 5:
            print(f"  ... {failed - 5} more (see the error column)")
    return 1 if len(result) and not result.ok else 0
