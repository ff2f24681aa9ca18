"""``acpnb.start``: the core start (client.py) with the notebook's kernel tools installed.

The core ``Agent`` knows nothing of Jupyter; what serves its sessions beside the protocol is given to it
as extensions (extensions.py). Here ``kernel_tools=`` becomes kernel_link.py's ``KernelToolsExtension``,
installed on every agent started this way, so its policy can be changed later (``agent.kernel_tools =``)
even when it starts "off". Signature and docstring are the core's, with ``kernel_tools`` in place of
``extensions``, derived below rather than written twice.

``arelaunch`` starts an agent again as it was started (the reconnect after a terminal login, auth_terminal.py).

Threads: ``start`` blocks the calling thread; the work runs on the background loop thread (``twins``), as
``arelaunch`` does.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from . import client
from ._facade import twins
from .client import Agent
from .extensions import SessionExtension
from .kernel_link import KernelToolsExtension
from .sandbox import SandboxWrap

__all__ = ["arelaunch", "astart", "start"]

_KERNEL_TOOLS_DOC = (
    "``kernel_tools``: the policy of the MCP server ``kernel`` every session is offered (\"ask\", \"read-only\", "
    "\"allow\", \"off\"); None is \"ask\" in a Jupyter kernel, where \"ask\" is answered by ``permission`` (in a "
    "``%%acp`` cell: Allow / Reject buttons), and \"off\" in plain Python. ``extensions``: more session extensions "
    "(acp_notebook.extensions). ``sandbox=\"bwrap\"`` runs the agent's process under bubblewrap, writable only in "
    "``cwd``, /tmp and its own state folders (``network=False``: no network either); see acp_notebook/sandbox.py.")


async def _start(spec: Any, *, kernel_tools: str | None = None, extensions: Sequence[SessionExtension] = (),
                 sandbox: str | None = None, network: bool = True, **options: Any) -> Agent:
    installed = [KernelToolsExtension(kernel_tools, api="acpnb.start"), *extensions]
    wrap = SandboxWrap(sandbox, network) if sandbox is not None or not network else None
    return await client.start_core(spec, extensions=installed, wrap=wrap, **options)


def _signature() -> inspect.Signature:
    core = inspect.signature(client.start_core)
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = []
    for parameter in core.parameters.values():
        if parameter.name == "extensions":
            parameters.append(inspect.Parameter("kernel_tools", keyword, default=None, annotation="str | None"))
        if parameter.name == "wrap":  # sandbox= and network= are how this layer wraps the spec
            parameters.append(inspect.Parameter("sandbox", keyword, default=None, annotation="str | None"))
            parameters.append(inspect.Parameter("network", keyword, default=True, annotation="bool"))
            continue
        parameters.append(parameter)
    return core.replace(parameters=parameters)


_start.__signature__ = _signature()  # type: ignore[attr-defined]
_start.__doc__ = (client.start_core.__doc__ or "").rstrip() + "\n    " + _KERNEL_TOOLS_DOC

start, astart = twins(_start, what="starting the agent", default_timeout=client.start_deadline,
                      core_takes_timeout=True)


# --- the reconnect ----------------------------------------------------------------------------------
async def arelaunch(agent: Any, *, name: str | None = None) -> Any:
    """``agent`` started again as it was started (program, working directory, environment, policies, sandbox,
    recording, system prompt): ACP v1's reconnect after a terminal login. The old agent is left as it is."""
    recorder = getattr(agent.log, "recorder", None)
    return await astart(
        agent.spec, cwd=agent.cwd, env=dict(agent.extra_env) or None, timeout=agent.timeout,
        permission=agent.permission, inherit_env=agent.inherit_env, fs=agent.fs, name=name or agent.name,
        record=getattr(recorder, "path", None), elicitation=agent.elicitation,
        permission_timeout=agent.permission_timeout, notebook_writes=agent.notebook_writes,
        kernel_tools=agent.kernel_tools, extensions=[e for e in agent.extensions if e.name != "kernel"],
        sandbox=getattr(agent.wrap, "sandbox", None), network=getattr(agent.wrap, "network", True),
        system_prompt=agent.system_prompt,
        system_prompt_mode=agent.system_prompt_mode)
