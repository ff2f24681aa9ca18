"""`start_proxy`: run the multi-agent proxy as a subprocess and connect to it as an ordinary Agent.

The agents' own environments (an AgentSpec's ``env``: API keys) never go on the proxy's command line,
where any local user reads them (``ps``, /proc/PID/cmdline): ``proxy_command`` leaves them out and
``proxy_environment`` carries them in one variable of the proxy's own environment, which only the user
(and root) can read and which the proxy removes before it starts any agent (cli.py)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Union

from .._facade import twins
from .._redact import secret_values
from ..client import Agent
from ..kernel_link import KernelToolsExtension
from ..launch import AgentSpec, SpecLike, registered, unknown_agent
from .specs import encode_agent_env, encode_spec

__all__ = ["agents_left_out", "astart_proxy", "proxy_command", "proxy_environment", "start_proxy"]

AgentsLike = Union[Mapping[str, SpecLike], Sequence[tuple[str, SpecLike]]]


def _agent_pairs(agents: AgentsLike) -> list[tuple[str, SpecLike]]:
    """``(name, spec)`` in order, names checked, registry names resolved here (see ``_portable``)."""
    pairs = list(agents.items()) if isinstance(agents, Mapping) else [tuple(p) for p in agents]
    if not pairs:
        raise ValueError("start_proxy needs at least one agent, e.g. {'demo': 'demo'}")
    seen: set[str] = set()
    checked = []
    for name, spec in pairs:
        if not isinstance(name, str) or not name or ":" in name or "/" in name or any(c.isspace() for c in name):
            raise ValueError(f"agent names are single words without ':' or '/' (got {name!r})")
        if name in seen:
            raise ValueError(f"agent name {name!r} is given twice")
        seen.add(name)
        checked.append((name, _portable(name, spec)))
    return checked


def _env_of(spec: Any) -> dict[str, str]:
    """The environment a spec gives its agent (an AgentSpec's, or a mapping's ``env``)."""
    if isinstance(spec, AgentSpec):
        return dict(spec.env)
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    return {}


def _without_env(spec: Any) -> Any:
    if isinstance(spec, AgentSpec) and spec.env:
        return replace(spec, env={})
    if isinstance(spec, Mapping) and "env" in spec:
        return {key: value for key, value in spec.items() if key != "env"}
    return spec


def proxy_command(agents: AgentsLike, *, probe_timeout: float | None = None, start_timeout: float | None = None,
                  trace: str | os.PathLike[str] | None = None) -> list[str]:
    """The argv that runs the proxy in front of `agents` ({"name": spec}, in order).

    It holds no agent's environment: whoever runs it passes ``proxy_environment(agents)`` in the proxy's
    environment (``start_proxy`` does)."""
    argv = [sys.executable, "-m", "acp_notebook.proxy"]
    for name, spec in _agent_pairs(agents):
        argv += ["--agent", f"{name}={encode_spec(_without_env(spec))}"]
    if probe_timeout is not None:
        argv += ["--probe-timeout", f"{float(probe_timeout):g}"]
    if start_timeout is not None:
        argv += ["--start-timeout", f"{float(start_timeout):g}"]
    if trace is not None:
        argv += ["--trace", os.fspath(trace)]
    return argv


def proxy_environment(agents: AgentsLike) -> dict[str, str]:
    """The variables to add to the environment of the proxy ``proxy_command(agents)`` runs: the agents'
    own environments, by agent name ({} when no agent has one)."""
    envs = {name: env for name, spec in _agent_pairs(agents) if (env := _env_of(spec))}
    return encode_agent_env(envs) if envs else {}


def _portable(name: str, spec: SpecLike) -> SpecLike:
    """Registry names resolve here, in the caller's process: agents registered in this kernel
    (acpnb.register) are unknown to the proxy's own process. A word that is neither a registered name nor a
    program is refused here too, as ``start`` refuses it (the proxy would leave the agent out)."""
    if isinstance(spec, str) and not any(c.isspace() for c in spec.strip()):
        found = registered(spec.strip())
        if isinstance(found, AgentSpec):
            return found
        if os.sep not in spec and shutil.which(spec.strip()) is None:  # a path runs in the agents' cwd: not here
            raise unknown_agent(spec, proxy_name=name)
    return spec


async def _start_proxy(agents: AgentsLike, *, probe_timeout: float | None = None, start_timeout: float | None = None,
                       trace: str | os.PathLike[str] | None = None, **start_kwargs: Any) -> Agent:
    """Start the proxy in front of `agents` (``{"demo": "demo", "claude": "claude"}``) and return it as an
    Agent: its sessions offer every agent's models as ``agent:model``. ``probe_timeout``: how long a new
    session waits for the agents (slower ones join later); ``start_timeout``: how long one may take to
    start before it is left out. ``start_kwargs`` go to ``acpnb.start`` (cwd, env, timeout, permission...)."""
    start_kwargs.setdefault("name", "proxy")
    command = proxy_command(agents, probe_timeout=probe_timeout, start_timeout=start_timeout, trace=trace)
    # The agents' own env (keys) reaches the proxy in its environment, never on its command line.
    start_kwargs["env"] = {**(start_kwargs.get("env") or {}), **proxy_environment(agents)}
    # The notebook's kernel tools, as acpnb.start installs them (starting.py), and any other session extensions.
    extensions = [KernelToolsExtension(start_kwargs.pop("kernel_tools", None), api="acpnb.start_proxy"),
                  *start_kwargs.pop("extensions", ())]
    agent = Agent(command, extensions=extensions, **start_kwargs)
    # An agent may repeat its key (an error, a log line) and the proxy passes it on: the client masks these
    # values wherever it shows them (the log, errors), as it masks its own environment's.
    agent.extra_secrets = [pair for _, spec in _agent_pairs(agents) for pair in secret_values(_env_of(spec))]
    return await agent.connect()


def agents_left_out(proxy: Agent, *, timeout: float = 10.0) -> dict[str, str]:
    """The agents a running proxy could not start (its sessions go on without them), each with why: the
    last line the agent's process wrote, else the proxy's error. Agents still starting are not counted."""
    status = proxy.request("_proxy/status", {}, timeout=timeout)
    left_out = {}
    for name, info in (status.get("agents") or {}).items():
        if isinstance(info, dict) and info.get("status") == "failed":
            said = [line for line in info.get("stderrTail") or () if isinstance(line, str) and line.strip()]
            left_out[name] = said[-1].strip() if said else str(info.get("error") or "it did not start").splitlines()[0]
    return left_out


def _deadline(*args: Any, timeout: float = 60.0, **kwargs: Any) -> float:
    return timeout + 10


start_proxy, astart_proxy = twins(_start_proxy, what="starting the proxy", default_timeout=_deadline,
                                  core_takes_timeout=True)
