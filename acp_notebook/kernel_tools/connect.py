"""Whether an agent connected to the ``kernel`` MCP server its session offered, and the notice when it never did.

An agent can take the ``kernel`` entry of session/new and never start it: gemini-cli in a folder it does not
trust starts no MCP server and says nothing (tests/interop/FINDINGS.md, section 10), so the user sees an agent
that never uses the kernel and no reason why. The kernel's side knows: ``KernelTools.connected`` is set when an
MCP ``initialize`` reaches the server from a bridge (server.py).

Which turn decides. An agent whose adapter connects to its MCP servers as the session opens
(``AgentSpec.mcp_connect == "start"``: gemini-cli and opencode; claude-agent-acp 0.101.0 and codex-acp 2.6.0 may
connect after a first turn has ended and are "lazy") could have used the
tools in any turn, so the session's first turn that ends with the agent's answer (not cancelled) decides, once
per session (``KernelTools.connection_judged``); when a bridge of its came (its token was accepted) but no MCP
``initialize`` yet, the next answered turn decides instead, so an initialize still on its way is not called
missing. An agent that connects only when a prompt needs the kernel (the
demo: "lazy") or whose habit is not known (a command line, an agent object, the proxy) is never judged: a turn
that did not need the tools says nothing about whether it could reach them.

What it says: one warning notice (``state.Notice``, the notices machinery of widgets/notices.py), put on the
deciding turn, so its cell shows it and saves it, and on the session's notices, so the panel shows it once the
turn has ended; with the agent's own remedy where the registry knows one (``AgentSpec.mcp_remedy``: for Gemini
CLI, trusting the folder, or ``%acp start gemini --trust-workspace``). ``note_answer`` runs before the turn is
marked finished, so the turn's views and saved forms already hold the notice when they are made.

Layering: unlike the rest of kernel_tools/ (layer 0 only), this is the client's side of the tools, beside
kernel_link (layer 2): it reads the session, its turn and state (``state.Notice``). session.py calls it from its
answer handler today; it belongs with kernel_link's session hook when that lands (docs/DEVELOPING.md).

Threads: the background loop (called from the session's answer handler, in wire order).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from .._visible import visible
from ..launch import AgentSpec, spec_for_agent_info
from ..state import NOTICES_KEPT, Notice

__all__ = ["NOTICE_META", "connect_facts", "note_answer", "unconnected_notice"]

log = logging.getLogger(__name__)
# The notice's _meta: it is the client's own, not the agent's.
NOTICE_META = {"acp-notebook/kernel-tools": "not-connected"}


def connect_facts(agent: Any) -> AgentSpec | None:
    """The registry's facts about ``agent``: the spec it was started from, else the registered spec of the name
    it gave in initialize (started by a command line), else None."""
    spec = getattr(getattr(agent, "connection", None), "spec", None)
    if isinstance(spec, AgentSpec) and spec.mcp_connect:
        return spec
    info = getattr(agent, "info", None)
    known = spec_for_agent_info(info.get("name") if isinstance(info, Mapping) else None)
    return known or (spec if isinstance(spec, AgentSpec) else None)


def unconnected_notice(agent_name: str, spec: AgentSpec | None, tools: Any, cwd: str) -> Notice:
    """The warning for an agent that never connected to ``tools`` (a KernelTools) in the session at ``cwd``."""
    name = visible(agent_name)
    lines = [f"The session offered {name} the MCP server `kernel` (this notebook's variables, run_code), and no "
             "MCP connection from it had reached the kernel by the end of this turn: it cannot use this kernel."]
    problem = str(getattr(tools, "problem", "") or "")
    if problem:
        lines.append(f"The kernel tools could not start: {problem}")
    elif getattr(tools, "bridges", 0):
        lines.append("Its bridge to the kernel started, but no MCP initialize came through it.")
    if not problem and not getattr(tools, "bridges", 0) and spec is not None and spec.mcp_remedy:
        # The agent's own reason for starting no server at all (gemini-cli: a folder it does not trust).
        lines.append(spec.mcp_remedy.replace("{cwd}", visible(cwd)))
    elif not problem:
        lines.append(f"{name} starts its MCP servers when a session opens; what it wrote on stderr may say why "
                     "(agent.stderr_tail()).")
    return Notice(severity="warning", title=f"{name} did not connect to the kernel tools",
                  description="\n".join(lines), time=time.time(), meta=dict(NOTICE_META))


def note_answer(session: Any, turn: Any, result: Mapping[str, Any]) -> Notice | None:
    """Judge, once per session, whether the agent connected to its kernel tools, when ``turn`` is answered with
    ``result`` (before the turn is marked finished); the notice put on the turn and the session when it did not.
    Never raises: the turn must end whatever happens here."""
    try:
        return _judge(session, turn, result)
    except Exception:  # noqa: BLE001 - a failure to judge must not keep the turn from ending
        log.exception("could not judge whether the agent connected to its kernel tools")
        return None


def _judge(session: Any, turn: Any, result: Mapping[str, Any]) -> Notice | None:
    link = getattr(session, "kernel_tools", None)
    tools = getattr(link, "tools", None)
    if tools is None or tools.connection_judged or getattr(link, "closed", False) or link.policy == "off":
        return None
    if result.get("stopReason") == "cancelled":  # it may have been stopped before it could connect
        return None
    spec = connect_facts(session.agent)
    if spec is None or spec.mcp_connect != "start":
        return None  # a lazy or unknown agent: a turn that did not need the tools proves nothing
    if tools.connected.is_set():
        tools.connection_judged = True
        return None
    if tools.bridges and not tools.problem and not tools.connection_deferred:
        # Its bridge reached the kernel: the agent did start the server, and its initialize may still be on the
        # way (a turn answered in a moment, the kernel importing the SDK). The next answered turn decides.
        tools.connection_deferred = True
        return None
    tools.connection_judged = True
    notice = unconnected_notice(str(session.agent.name), spec, tools, str(session.cwd))
    turn.notices.append(notice)  # read by the turn's views when it ends, which comes right after this
    state = session.state
    state.notices = [*state.notices[-(NOTICES_KEPT - 1):], notice]  # a whole new list: readers see one or the other
    state.emit("notice", notice)
    return notice
