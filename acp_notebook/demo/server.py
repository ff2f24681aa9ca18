"""Command line and stdio serving for the demo agent: `main(argv)` and `serve(agent)`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._argtypes import number
from .._sdk import defer_sdk_package
from .._stdio import StdioError, brief_bad_lines, open_stdio
from .store import STATE_ENV, default_state_dir

if TYPE_CHECKING:
    from .agent import DemoAgent

__all__ = ["build_parser", "main", "serve"]

DELAY_ENV = "ACP_DEMO_DELAY"


_delay = number(zero=True, unit="seconds")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-notebook demo-agent",
        description="The built-in demo ACP agent on stdio: offline, deterministic, no API keys.",
    )
    parser.add_argument(
        "--delay",
        type=_delay,
        default=None,
        metavar="SECONDS",
        help=f"pause between streamed chunks (default: ${DELAY_ENV} or 0)",
    )
    parser.add_argument(
        "--legacy",
        action="store_true",
        help="behave like an old agent: `modes`/`models` on session setup, no configOptions",
    )
    parser.add_argument(
        "--require-auth",
        action="store_true",
        help="advertise the auth method 'demo-token' and refuse sessions until it is used",
    )
    parser.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help=f"where sessions are kept, one JSON file each (default: ${STATE_ENV} or {_shown_default()})",
    )
    return parser


def _shown_default() -> str:
    home = str(Path.home())
    shown = str(default_state_dir())
    return "~" + shown[len(home):] if shown.startswith(home + os.sep) else shown


async def serve(agent: DemoAgent) -> None:
    """Speak ACP on this process's stdin/stdout until the client closes stdin."""
    defer_sdk_package()
    from ..agent_side import serve as serve_agent  # the acp SDK's Connection: after the line above (see main)

    reader, writer = await open_stdio("the demo agent", "such as acpnb.start('demo') or Zed", screen=True)
    # The protocol owns the stdout pipe now; anything printed by accident goes to stderr.
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        await serve_agent(agent, writer, reader)
    finally:
        sys.stdout = real_stdout


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `acp-notebook demo-agent` and `python -m acp_notebook.demo`."""
    parser = build_parser()
    args = parser.parse_args(argv)
    delay = args.delay
    if delay is None:
        try:
            delay = _delay(os.environ.get(DELAY_ENV, "0") or "0")
        except argparse.ArgumentTypeError as exc:
            parser.error(f"${DELAY_ENV}: {exc}")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="acp-notebook-demo: %(levelname)s %(message)s")
    brief_bad_lines()
    # The demo's process starts: the SDK's package is set up without its schema models (_sdk.py) before
    # the agent's modules import the SDK.
    defer_sdk_package()
    from .agent import DemoAgent  # the demo agent and the acp SDK: after the line above

    agent = DemoAgent(delay=delay, legacy=args.legacy, require_auth=args.require_auth, state_dir=args.state_dir)
    try:
        asyncio.run(serve(agent))
    except KeyboardInterrupt:
        return 130
    except StdioError as exc:
        print(f"acp-notebook demo agent: {exc}", file=sys.stderr)
        return 2
    return 0
