"""`start_proxy`: run the multi-agent proxy as a subprocess and connect to it as an ordinary Agent."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Union

from ..client import Agent, astart, start
from ..launch import AgentSpec, SpecLike, registered
from .cli import encode_spec

__all__ = ["astart_proxy", "proxy_command", "start_proxy"]

AgentsLike = Union[Mapping[str, SpecLike], Sequence[tuple[str, SpecLike]]]


def proxy_command(agents: AgentsLike, *, probe_timeout: float | None = None,
                  trace: str | os.PathLike[str] | None = None) -> list[str]:
    """The argv that runs the proxy in front of `agents` ({"name": spec}, in order)."""
    pairs = list(agents.items()) if isinstance(agents, Mapping) else [tuple(p) for p in agents]
    if not pairs:
        raise ValueError("start_proxy needs at least one agent, e.g. {'demo': 'demo'}")
    argv = [sys.executable, "-m", "acp_notebook.proxy"]
    seen: set[str] = set()
    for name, spec in pairs:
        if not isinstance(name, str) or not name or ":" in name or "/" in name or any(c.isspace() for c in name):
            raise ValueError(f"agent names are single words without ':' or '/' (got {name!r})")
        if name in seen:
            raise ValueError(f"agent name {name!r} is given twice")
        seen.add(name)
        argv += ["--agent", f"{name}={encode_spec(_portable(spec))}"]
    if probe_timeout is not None:
        argv += ["--probe-timeout", f"{float(probe_timeout):g}"]
    if trace is not None:
        argv += ["--trace", os.fspath(trace)]
    return argv


def _portable(spec: SpecLike) -> SpecLike:
    """Registry names resolve here, in the caller's process: agents registered in this kernel
    (acpnb.register) are unknown to the proxy's own process."""
    if isinstance(spec, str) and not any(c.isspace() for c in spec.strip()):
        found = registered(spec.strip())
        if isinstance(found, AgentSpec):
            return found
    return spec


def start_proxy(agents: AgentsLike, *, probe_timeout: float | None = None,
                trace: str | os.PathLike[str] | None = None, **start_kwargs: Any) -> Agent:
    """Start the proxy in front of `agents` (``{"demo": "demo", "claude": "claude"}``) and return it as an
    Agent: its sessions offer every agent's models as ``agent:model``. ``start_kwargs`` go to
    ``acpnb.start`` (cwd, env, timeout, permission...)."""
    start_kwargs.setdefault("name", "proxy")
    return start(proxy_command(agents, probe_timeout=probe_timeout, trace=trace), **start_kwargs)


async def astart_proxy(agents: AgentsLike, *, probe_timeout: float | None = None,
                       trace: str | os.PathLike[str] | None = None, **start_kwargs: Any) -> Agent:
    start_kwargs.setdefault("name", "proxy")
    return await astart(proxy_command(agents, probe_timeout=probe_timeout, trace=trace), **start_kwargs)
