"""Values typed on `acp-notebook sweep`'s command line: a prompts file, NAME=VALUE pairs, concurrency caps.

Pure functions (each raises ValueError with the option's own words); read by cli.py and cli_run.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["agent_caps", "pairs", "read_prompts"]


def read_prompts(source: str) -> list[str]:
    """Prompts from a file (or '-' for stdin): a JSON list for .json, else one prompt per line."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    if source.lower().endswith(".json"):
        data = json.loads(text)
        if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
            raise ValueError(f"{source}: expected a JSON list of strings")
        return data
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def pairs(items: Sequence[str], option: str, form: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} wants {form}, got {item!r}")
        out.append((key.strip(), value.strip()))
    return out


def agent_caps(items: Sequence[str]) -> int | dict[str, int] | None:
    caps: dict[str, int] = {}
    for item in items:
        name, sep, number = item.rpartition("=")
        if not number.strip().isdigit() or int(number) < 1 or (sep and not name.strip()):
            raise ValueError(f"--agent-concurrency wants N or NAME=N with N >= 1, got {item!r}")
        if not sep:
            return int(number)
        caps[name.strip()] = int(number)
    return caps or None
