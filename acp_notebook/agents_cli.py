"""`acp-notebook agents`: the registry as a table (name, installed, how it runs, env vars it reads)."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from .launch import agents


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="acp-notebook agents", description=__doc__)
    parser.parse_args(argv)
    table = agents()
    rows = [("name", "installed", "runs via", "command", "reads env")]
    for status in table.values():
        rows.append((status.name, "yes" if status.installed else "no", status.how, shlex.join(status.command),
                     ", ".join(status.spec.env_vars) or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(row)), file=sys.stdout)
    return 0
