"""acp-notebook: the Agent Client Protocol in Jupyter (public API and the IPython extension hook)."""

from __future__ import annotations

from typing import Any

from .client import Agent, PermissionRequest, Session, astart, current, start
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
    RpcError,
)
from .launch import AgentSpec, agents, register
from .proxy import start_proxy
from .state import Choice, ConfigOption, ConfigOptions, SessionState
from .sweep import SweepResult, sweep
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
    "Choice",
    "ConfigOption",
    "ConfigOptionError",
    "ConfigOptions",
    "PermissionDenied",
    "PermissionRequest",
    "ProtocolError",
    "RpcError",
    "Session",
    "SessionState",
    "SweepResult",
    "ToolCall",
    "Turn",
    "__version__",
    "agents",
    "astart",
    "current",
    "load_ipython_extension",
    "register",
    "start",
    "start_proxy",
    "sweep",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("acp-notebook")
    except PackageNotFoundError:
        return "0.0.0"


__version__ = _version()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext acp_notebook``: imports the magics (and ipywidgets) only now, not on ``import acp_notebook``."""
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as unload

    unload(ipython)
