"""`acp-notebook proxy --agent NAME=SPEC ...`: argument parsing, agent spec decoding, serving on stdio.

The agents' environments (their keys) come in the proxy's own environment, never on its command line:
``$ACPNB_PROXY_AGENT_ENV`` (``encode_agent_env``) maps agent names to variables. ``main`` removes it
from the environment before anything starts, so no agent inherits another agent's keys. A user who
types ``--agent NAME={"command": ..., "env": {...}}`` still may: that line is theirs to give."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from acp.connection import Connection, StreamDirection, StreamEvent

from .._argtypes import number
from .._loop import run_main
from .._redact import Redactor, secret_values
from .._stdio import StdioError, open_stdio
from ..errors import AcpError
from ..launch import did_you_mean, known_names, registered, resolve_spec
from .backend import BackendConfig
from .client_link import ClientLink
from .server import DEFAULT_PROBE_TIMEOUT, DEFAULT_START_TIMEOUT, ProxyServer
from .specs import AGENT_ENV_VARIABLE, decode_spec, encode_agent_env, encode_spec, take_agent_env  # also importable from here

__all__ = ["AGENT_ENV_VARIABLE", "build_parser", "decode_spec", "encode_agent_env", "encode_spec", "main",
           "parse_agent", "serve", "take_agent_env"]

def parse_agent(text: str) -> BackendConfig:
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep:
        raise argparse.ArgumentTypeError(f"expected NAME=SPEC (e.g. a=demo), got {text!r}")
    if not name or any(c.isspace() for c in name) or ":" in name or "/" in name:
        raise argparse.ArgumentTypeError(f"agent names are single words without ':' or '/' (got {name!r})")
    try:
        decoded, env = decode_spec(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return BackendConfig(name=name, spec=decoded, env=env)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-notebook proxy",
        description="An ACP agent on stdio that puts several agents behind one endpoint; their models "
                    "appear as agent:model in one grouped model option.",
    )
    parser.add_argument("--agent", dest="agents", action="append", type=parse_agent, required=True,
                        metavar="NAME=SPEC",
                        help="an agent behind the proxy: a registered name (demo, claude...), a command line, "
                             "or a JSON argv list; repeat for each agent")
    parser.add_argument("--probe-timeout", type=number(zero=True, unit="seconds"), default=DEFAULT_PROBE_TIMEOUT,
                        metavar="SECONDS",
                        help=f"how long initialize and session/new wait for the agents; slower agents join "
                             f"the session's model list later (default {DEFAULT_PROBE_TIMEOUT:g})")
    parser.add_argument("--start-timeout", type=number(zero=False, unit="seconds"), default=DEFAULT_START_TIMEOUT,
                        metavar="SECONDS",
                        help=f"how long an agent may take to start and open a session before it is left out "
                             f"(default {DEFAULT_START_TIMEOUT:g})")
    parser.add_argument("--trace", metavar="FILE",
                        help="append every frame on every pipe to FILE as JSON lines ({link, dir, t, msg})")
    parser.add_argument("--cwd", default=None, help="where the agents run (default: the current directory)")
    parser.add_argument("--state-dir", default=None, metavar="DIR",
                        help="where the bindings of sessions are kept so that a later proxy can reopen them "
                             "(default: $ACP_NOTEBOOK_PROXY_STATE, else $XDG_STATE_HOME/acp-notebook/proxy)")
    return parser


def _program_found(program: str, cwd: str, env: Mapping[str, str]) -> bool:
    if os.sep in program:  # a path: the agent starts in cwd, so a relative one is relative to it
        path = os.path.join(cwd, program)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    return shutil.which(program, path=env.get("PATH")) is not None


def missing_agents(agents: Sequence[BackendConfig], cwd: str) -> list[str]:
    """One line per agent whose program cannot be found here (the proxy serves the others)."""
    lines = []
    for config in agents:
        try:
            _label, argv, env = resolve_spec(config.spec, config.env)
        except AcpError as exc:
            spec = config.spec if isinstance(config.spec, str) else None
            if spec is not None and registered(spec.strip()) is None:
                lines.append(f"--agent {config.name}={spec}: no agent is registered as {spec!r}{did_you_mean(spec)} "
                             f"and no such command is on PATH (registered: {', '.join(sorted(known_names()))})")
            else:
                hint = exc.hint_for("cli")
                lines.append(f"--agent {config.name}: {exc.message}" + (f" ({hint})" if hint else ""))
            continue
        if not _program_found(argv[0], cwd, {**os.environ, **env}):
            lines.append(f"--agent {config.name}: {argv[0]!r} is not on PATH")
    return lines


class FrameTrace:
    """Writes each frame the proxy sends or receives as one JSON line: link is "client" or an agent name,
    dir is "in" (received by the proxy) or "out" (sent by it)."""

    def __init__(self, stream: IO[str], secrets: Sequence[tuple[str, str]] = ()) -> None:
        self.stream = stream
        # What the agents are given (keys in the proxy's environment, their own env) must not land in the file.
        self.redactor = Redactor([*secret_values(os.environ), *secrets])

    def __call__(self, link: str, direction: str, message: dict[str, Any]) -> None:
        record = {"link": link, "dir": direction, "t": time.time(), "msg": message}
        self.stream.write(self.redactor.json_line(record) + "\n")

    def client_observer(self, event: StreamEvent) -> None:
        self("client", "in" if event.direction == StreamDirection.INCOMING else "out", event.message)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stream.close()


async def serve(agents: Sequence[BackendConfig], *, probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
                start_timeout: float = DEFAULT_START_TIMEOUT, trace: str | None = None, cwd: str | None = None,
                state_dir: str | None = None) -> None:
    """Speak ACP on stdin/stdout until the client closes stdin (or SIGTERM), then end every agent."""
    secrets = [pair for config in agents for pair in secret_values(config.env)]
    tracer = FrameTrace(open(trace, "a", encoding="utf-8"), secrets) if trace else None  # noqa: SIM115 - closed below
    server = ProxyServer(agents, cwd=cwd or os.getcwd(), probe_timeout=probe_timeout, start_timeout=start_timeout,
                         tracer=tracer, state_dir=Path(state_dir) if state_dir else None)
    reader, writer = await open_stdio("the proxy", "such as acpnb.start_proxy or Zed")
    # stdout belongs to the protocol now; a stray print goes to stderr instead of corrupting it.
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    observers = [tracer.client_observer] if tracer is not None else []
    connection = Connection(server.handle_client, ClientLink(reader, writer), observers=observers, listening=False)
    server.attach(connection)
    loop = asyncio.get_running_loop()
    listening = asyncio.ensure_future(connection.main_loop())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({listening, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if stop.is_set():
            for backend in server.backends.values():  # told to stop: no grace for the agents either
                backend.kill(signal.SIGKILL)
        await server.shutdown()
        listening.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(connection.close(), 1.0)
        if tracer is not None:
            tracer.close()
        sys.stdout = real_stdout


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `acp-notebook proxy` and `python -m acp_notebook.proxy`."""
    try:  # taken out of the environment before anything starts, whatever happens next
        agent_env = take_agent_env(os.environ)
    except ValueError as exc:
        print(f"acp-notebook proxy: {exc}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    args.agents = [replace(config, env={**config.env, **agent_env.get(config.name, {})}) for config in args.agents]
    names = [config.name for config in args.agents]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        build_parser().error(f"agent names must be unique: {', '.join(duplicates)}")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="acp-notebook-proxy: %(levelname)s %(message)s")
    # Said at start: otherwise nothing tells the user until a client opens a session.
    for line in missing_agents(args.agents, args.cwd or os.getcwd()):
        print(f"acp-notebook proxy: cannot find {line}; serving without it", file=sys.stderr)
    try:
        run_main(serve(args.agents, probe_timeout=args.probe_timeout, start_timeout=args.start_timeout,
                       trace=args.trace, cwd=args.cwd, state_dir=args.state_dir))
    except KeyboardInterrupt:
        return 130
    except StdioError as exc:
        print(f"acp-notebook proxy: {exc}", file=sys.stderr)
        return 2
    return 0
