"""The `acp-notebook` command: dispatches each subcommand to the module that owns it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from . import _term

# subcommand -> (module, function taking the remaining argv and returning an exit code, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "demo-agent": ("acp_notebook.demo", "main", "run the built-in demo agent on stdio"),
    "proxy": ("acp_notebook.proxy", "main", "run the multi-agent proxy on stdio (--agent NAME=SPEC ...)"),
    "sweep": ("acp_notebook.sweep", "main", "run prompts across agent:model ids and summarise the results"),
    "agents": ("acp_notebook.agents_cli", "main", "list the registered agents and whether each can start here"),
    "replay": ("acp_notebook.record.cli", "main", "serve a recorded session on stdio, as the agent that was recorded"),
    "tour": ("acp_notebook.tour", "main", "a guided run of the demo agent: options, a model switch, a turn"),
}


def _usage() -> str:
    rows = [["", name, help_] for name, (_, _, help_) in SUBCOMMANDS.items()]
    table = _term.table(["", "", ""], rows, _term.width(), wrapped={2}).split("\n", 1)[1]  # no header line
    return "\n".join(["usage: acp-notebook COMMAND [ARGS...]", "", "commands:", table, "",
                      "`acp-notebook COMMAND --help` shows a command's options."])


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        # The reader stopped early (`| head`): nothing is wrong, so no traceback. Python would also
        # complain when it flushes stdout at exit, hence stdout pointed at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE


def _run(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"acp-notebook: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function_name, _ = SUBCOMMANDS[name]
    runner: Callable[[list[str]], int | None] = getattr(import_module(module_name), function_name)
    return int(runner(rest) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
