"""`acp-notebook sweep` once its command line is read (cli.py): the sweep run, its report, plots and exports;
and `sweep show`'s trial. What a run needs is imported here at module level: the client, the trials, Ray's
executor and the results (over a second), which cli.py loads only after parsing, so that `--help` and usage
errors answer at once.

Runs on the main thread; the sweep itself runs on the background loop like ``acpnb.sweep``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from .. import _term, launch
from ..errors import AcpError
from .checks import command as check_command
from .cli_values import agent_caps, pairs, read_prompts
from .hints import CLI
from .progress import NullProgress, TextProgress
from .ray_executor import RayExecutor
from .result import load_run
from .runner import prepare, run_blocking
from .scorers import parse_scorer
from .taskdirs import tasks

__all__ = ["run", "show"]


def _sweep_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep's arguments from the command line; raises ValueError (or OSError) with a usage message."""
    for name, registered in pairs(args.register, "--register", "NAME=COMMAND"):
        if not registered:
            raise ValueError(f"--register wants NAME=COMMAND, got {name}=")
        launch.register(name, registered)
    if args.tasks:
        dataset: Any = tasks(args.tasks, on_invalid=args.on_invalid)
    elif args.dataset:
        dataset = Path(args.dataset)
    else:
        dataset = args.prompts or read_prompts(args.prompts_file)
        if not dataset:
            raise ValueError(f"{args.prompts_file}: no prompts in it")
    if args.executor != "ray" and (args.ray_address or args.workers):
        raise ValueError("--ray-address and --workers go with --executor ray")
    executor: Any = "local"
    if args.executor == "ray":
        try:
            executor = RayExecutor(address=args.ray_address, workers=args.workers)
        except ImportError:
            raise ValueError("--executor ray needs Ray: pip install 'acp-notebook[ray]'") from None
    return {
        "dataset": dataset, "models": args.models, "prompt": args.template,
        "scorers": [parse_scorer(spec, extract=args.extract, syntax=CLI) for spec in args.scorers] + [
            check_command(check, timeout=args.check_timeout) for check in args.check],
        "repeats": args.repeats, "concurrency": args.concurrency,
        "agent_concurrency": agent_caps(args.agent_concurrency), "timeout": args.timeout,
        "retries": args.retries, "backoff": args.backoff, "budget": args.budget,
        "config": dict(pairs(args.config, "--config", "ID=VALUE")), "permission": args.permission,
        "cwd": args.cwd, "out": args.out, "retry_failed": args.retry_failed, "executor": executor,
        "agent": args.agent, "workspace": args.workspace, "setup": args.setup,
        "keep_workspaces": args.keep_workspaces, "keep_sessions": args.keep_sessions,
        "workspace_limit_mb": args.workspace_limit_mb, "sandbox": args.sandbox, "network": args.network,
        "task_env": args.task_env,
    }


def _check_outputs(args: argparse.Namespace) -> None:
    """What is asked of the finished sweep is checked before it starts, not discovered after an hour."""
    for pair in args.compare:
        for model in pair:
            if model not in args.models:
                raise ValueError(f"--compare names {model!r}, which is not one of the --model ids")
    if args.compare and not args.scorers:
        raise ValueError("--compare compares scores: add a --scorer")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise ValueError("--plot needs matplotlib: pip install 'acp-notebook[plot]'")
    for flag, module in (("--export-atif", "atif"), ("--export-inspect", "inspect_ai")):
        if getattr(args, flag[2:].replace("-", "_")) and importlib.util.find_spec(module) is None:
            raise ValueError(f"{flag} needs the {module} package: pip install 'acp-notebook[eval]'")
    if (args.export_atif or args.export_inspect) and not args.out:
        raise ValueError("--export-atif and --export-inspect read the trials' recordings: add --out DIR")


def _report(result: Any, args: argparse.Namespace) -> None:
    summary = result.summary()
    comparisons = [result.compare(a, b) for a, b in args.compare]
    if args.plot:
        result.plot().savefig(args.plot)
    if args.as_json:
        print(json.dumps({"summary": list(summary), "comparisons": [c.to_dict() for c in comparisons],
                          "out": args.out, "stopped": result.metadata.get("stopped")}, indent=1))
        return
    columns = _term.width()
    print(summary.text(columns))
    print()
    for comparison in comparisons:
        print(_term.wrap(str(comparison), columns))
    failed = len(result.failed)
    line = f"{len(result)} trials: {len(result) - failed} ok, {failed} failed"
    if result.metadata.get("skipped"):
        line += f" ({result.metadata['skipped']} resumed from {args.out})"
    if args.out:
        line += f"; results in {args.out}"
    print(_term.wrap(line, columns))
    if result.metadata.get("stopped"):
        print(_term.wrap(f"stopped early: {result.metadata['stopped']}; run the same command with a larger "
                         "--budget to go on", columns))
    for row in result.failed[:5]:
        print(_term.wrap(f"  {row['model']} sample {row['sample_id']} repeat {row['repeat']}: {row['error']}",
                         columns, indent="    "))
    if failed > 5:
        print(f"  ... {failed - 5} more (see the error column)")
    if args.plot:
        print(f"plot saved to {args.plot}")


def _export(result: Any, args: argparse.Namespace) -> None:
    if args.export_atif:
        written = result.export_atif(args.export_atif)
        print(f"ATIF trajectories: {len(written)} file(s) in {args.export_atif}")
    if args.export_inspect:
        written = result.export_inspect(args.export_inspect)
        print(f"Inspect eval logs: {', '.join(str(p) for p in written)}")


def show(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """`acp-notebook sweep show RUN_DIR [ROW]` once its line is read (cli.py): the trial shown, or a usage error."""
    try:
        result = load_run(args.run)
        result.show(int(args.row) if args.row.isdigit() else args.row)
    except (ValueError, KeyError, IndexError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else str(exc)
        if isinstance(exc, IndexError):
            message = f"no row {args.row}: the run has {len(result.rows)} rows (0-{len(result.rows) - 1})"
        parser.error(str(message))
    return 0


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """`acp-notebook sweep` once its line is read (cli.py): the sweep run, reported and exported; the exit code."""
    progress = NullProgress() if args.no_progress else TextProgress(sys.stderr)
    try:
        _check_outputs(args)
        options = _sweep_arguments(args)
        state, bar = prepare(options.pop("dataset"), options.pop("models"), syntax=CLI, progress=progress, **options)
    except (OSError, ValueError, TypeError) as exc:
        parser.error(str(exc))
    except AcpError as exc:  # the sandbox cannot be made here (bwrap missing or refused)
        print(f"acp-notebook sweep: {exc.in_terms_of('cli')}", file=sys.stderr)
        return 1
    try:
        result = run_blocking(state, bar)
    except (AcpError, ImportError, RuntimeError) as exc:  # RuntimeError: a Ray cluster out of reach
        print(f"acp-notebook sweep: {exc.in_terms_of('cli') if isinstance(exc, AcpError) else exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nacp-notebook sweep: interrupted" + (f"; finished trials are in {args.out}, run the same command "
                                                     "again to go on" if args.out else ""), file=sys.stderr)
        return 130
    _report(result, args)
    _export(result, args)
    return 1 if len(result) and not result.ok else 0
