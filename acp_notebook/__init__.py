"""acp-notebook: the Agent Client Protocol in Jupyter (public API and the IPython extension hook)."""

from __future__ import annotations

from typing import Any

from ._protocol import client_version
from .cellagent import CellAgent
from .client import Agent, PermissionRequest, Session, areplay, astart, current, replay, start
from .errors import (
    AcpError,
    AcpTimeoutError,
    AgentClosedError,
    AgentExitedError,
    AgentStartError,
    CapabilityError,
    ConfigOptionError,
    PermissionDenied,
    ProtocolError,
    ReplayMismatch,
    RpcError,
)
from .launch import AgentSpec, agents, register
from .magics.resume import resume
from .proxy import start_proxy
from .state import Choice, ConfigOption, ConfigOptions, SessionState
from .sweep import SweepResult, load_run, sweep
from .turn import ToolCall, Turn

__all__ = [
    "AcpError",
    "AcpTimeoutError",
    "Agent",
    "AgentClosedError",
    "AgentExitedError",
    "AgentSpec",
    "AgentStartError",
    "CapabilityError",
    "CellAgent",
    "Choice",
    "ConfigOption",
    "ConfigOptionError",
    "ConfigOptions",
    "PermissionDenied",
    "PermissionRequest",
    "ProtocolError",
    "ReplayMismatch",
    "RpcError",
    "Session",
    "SessionState",
    "SweepResult",
    "ToolCall",
    "Turn",
    "__version__",
    "agents",
    "areplay",
    "astart",
    "current",
    "load_ipython_extension",
    "load_run",
    "register",
    "replay",
    "resume",
    "start",
    "start_proxy",
    "sweep",
]


__version__ = client_version()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext acp_notebook``: imports the magics (and ipywidgets) only now, not on ``import acp_notebook``."""
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as unload

    unload(ipython)
