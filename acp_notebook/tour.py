"""`acp-notebook tour`: a guided terminal run of an agent (the demo by default) through the public API.

The tour's demo agent keeps its sessions in the tour's temporary directory, deleted at the end, so a
tour never adds to the user's own list of demo sessions (``acp-notebook demo-agent --help`` says
where those are kept).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._argtypes import number
from .client import start
from .errors import AcpError, ConfigOptionError
from .state import ConfigOptions, StateEvent


def _options_table(options: ConfigOptions) -> str:
    lines = []
    for option in options:
        if option.type == "boolean":
            choices = "on/off"
        else:
            choices = ", ".join(f"[{c.value}]" if c.value == option.value else c.value for c in option.choices)
        category = f" ({option.category})" if option.category else ""
        lines.append(f"  {option.id:<14} {option.name}{category}: {choices}")
    return "\n".join(lines)


def _shown_command(name: str, command: Sequence[str]) -> str:
    if name == "demo":
        return ("`acp-notebook demo-agent`, keeping its sessions in this tour's temporary directory "
                "(deleted at the end)")
    return f"`{shlex.join(command)}`"


def _stream_to(out: Any):
    def on_event(event: StateEvent) -> None:
        if event.kind != "update":
            return
        update = event.data["update"]
        if update.get("sessionUpdate") == "agent_message_chunk":
            out.write((update.get("content") or {}).get("text", ""))
            out.flush()

    return on_event


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="acp-notebook tour", description=__doc__)
    parser.add_argument("--agent", default="demo", help="registered agent name or command (default: demo)")
    parser.add_argument("--delay", type=number(zero=True, unit="seconds"), default=0.02,
                        help="demo agent: seconds between streamed chunks")
    args = parser.parse_args(argv)
    out = sys.stdout
    spec: Any = args.agent
    with tempfile.TemporaryDirectory(prefix="acp-tour-") as workdir:
        if args.agent == "demo":
            spec = [sys.executable, "-m", "acp_notebook.demo", "--delay", str(args.delay),
                    "--state-dir", str(Path(workdir, "demo-sessions"))]
        Path(workdir, "notes.txt").write_text("tide pools\nlighthouses\nvolcanoes\n")
        try:
            with start(spec, cwd=workdir, permission="allow", name=args.agent) as agent:
                info = agent.info
                print(f"1. Started {info.get('title') or info.get('name')} {info.get('version', '')} "
                      f"(ACP v{agent.protocol_version}) as {_shown_command(args.agent, agent.command)}", file=out)
                session = agent.new_session()
                print(f"2. New session {session.id}; the agent's config options, in its order:", file=out)
                print(_options_table(session.config), file=out)
                model = session.model_option
                if model is not None and len(model.values) > 1:
                    target = str(model.values[-1])
                    before = set(session.config.ids())
                    session.set(model.id, target)
                    added = [i for i in session.config.ids() if i not in before]
                    print(f"3. set {model.id}={target}: the agent answered with the complete list"
                          + (f"; new option(s): {', '.join(added)}" if added else ""), file=out)
                    try:
                        session.set(model.id, "no-such-model")
                    except ConfigOptionError as exc:
                        print(f"   a bad value is refused before any round trip: {exc.message}", file=out)
                print("4. A prompt, streamed as it arrives:\n   ", end="", file=out)
                stop = session.state.observe(_stream_to(out))
                turn = session.prompt("Tell me about tide pools")
                stop()
                print(f"\n   stop reason {turn.stop_reason}, {turn.duration_s:.2f} s, "
                      f"first chunk after {turn.ttft_s or 0:.2f} s, model {turn.model}", file=out)
                print(f"5. The session's title, from session_info_update: {session.title!r}", file=out)
                turn = session.prompt("read notes.txt")
                calls = ", ".join(f"{c.kind}:{c.status}" for c in turn.tool_calls) or "none"
                print(f"6. 'read notes.txt': tool calls {calls}; permission answered with "
                      f"{[p.chosen for p in turn.permissions]}; reply: {turn.text.strip()[:100]}", file=out)
                print(f"7. {len(agent.log)} protocol frames were exchanged; agent.log has each one.", file=out)
        except AcpError as exc:
            print(f"tour failed: {exc.in_terms_of('cli')}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
