"""`acp-notebook proxy --agent NAME=SPEC ...`: argument parsing, agent spec decoding, serving on stdio.

The agents' environments (their keys) come in the proxy's own environment, never on its command line:
``$ACPNB_PROXY_AGENT_ENV`` (``encode_agent_env``) maps agent names to variables. ``main`` removes it
from the environment before anything starts, so no agent inherits another agent's keys. A user who
types ``--agent NAME={"command": ..., "env": {...}}`` still may: that line is theirs to give."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import IO, Any

from acp.connection import Connection, StreamDirection, StreamEvent

from .._argtypes import number
from .._loop import run_main
from .._redact import Redactor, secret_values
from .._stdio import StdioError, open_stdio
from ..errors import AcpError
from ..launch import AgentSpec, did_you_mean, known_names, registered, resolve_spec
from .backend import BackendConfig
from .client_link import ClientLink
from .server import DEFAULT_PROBE_TIMEOUT, DEFAULT_START_TIMEOUT, ProxyServer

__all__ = ["AGENT_ENV_VARIABLE", "build_parser", "decode_spec", "encode_agent_env", "encode_spec", "main",
           "parse_agent", "serve", "take_agent_env"]

# The proxy's environment variable that carries its agents' environments: {"agent name": {"VAR": "value"}}.
AGENT_ENV_VARIABLE = "ACPNB_PROXY_AGENT_ENV"


def encode_agent_env(envs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The proxy's environment entry for its agents' environments (``take_agent_env`` reads it back)."""
    return {AGENT_ENV_VARIABLE: json.dumps({name: dict(env) for name, env in envs.items()})}


def take_agent_env(environ: MutableMapping[str, str]) -> dict[str, dict[str, str]]:
    """The agents' environments from ``environ``, removed from it (so the agents, which inherit it, never
    see each other's keys); ValueError when it is malformed (naming no value: they are keys)."""
    text = environ.pop(AGENT_ENV_VARIABLE, None)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"${AGENT_ENV_VARIABLE} is not valid JSON") from None
    valid = isinstance(data, dict) and all(
        isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        for env in data.values())
    if not valid:
        raise ValueError(f"${AGENT_ENV_VARIABLE} must map agent names to objects of string values")
    return data


def encode_spec(spec: str | Sequence[str] | AgentSpec | Mapping[str, Any]) -> str:
    """A SPEC for `--agent NAME=SPEC`: strings stay as they are (a registry name or a command
    line); argv lists and AgentSpecs become JSON, so no quoting can change them."""
    if isinstance(spec, str):
        if spec.lstrip().startswith(("[", "{")):
            return json.dumps({"command": spec})  # a command line that looks like JSON stays a command line
        return spec
    if isinstance(spec, AgentSpec):
        data = {f.name: getattr(spec, f.name) for f in fields(AgentSpec)}
        data["env"] = dict(spec.env)
        return json.dumps({"agentSpec": data})
    if isinstance(spec, Mapping):
        return json.dumps(dict(spec))
    return json.dumps([str(part) for part in spec])


def decode_spec(text: str) -> tuple[str | list[str] | AgentSpec, dict[str, str]]:
    """The inverse of `encode_spec`: (spec for resolve_spec, extra environment)."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the agent's SPEC is empty")
    if stripped[0] not in "[{":
        return stripped, {}
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ValueError(f"SPEC {text!r} starts like JSON but is not valid JSON: {exc}") from None
    if isinstance(data, list):
        if not data or not all(isinstance(part, str) for part in data):
            raise ValueError(f"a JSON SPEC list must be a non-empty argv of strings, got {text!r}")
        return data, {}
    if not isinstance(data, dict):
        raise ValueError(f"a JSON SPEC must be a list (argv) or an object, got {text!r}")
    env = {str(k): str(v) for k, v in (data.get("env") or {}).items()}
    if "agentSpec" in data:
        raw = dict(data["agentSpec"])
        known = {f.name for f in fields(AgentSpec)}
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in raw.items() if k in known}
        return AgentSpec(**kwargs), env
    command = data.get("command")
    if isinstance(command, str) and command.strip():
        return command, env
    if isinstance(command, list) and command and all(isinstance(p, str) for p in command):
        return command, env
    raise ValueError(f"a JSON SPEC object needs \"command\" (a string or an argv list), got {text!r}")


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
