"""acp-notebook: the Agent Client Protocol in Jupyter (public API and the IPython extension hook)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._lazy import lazy_names
from ._protocol import client_version

if TYPE_CHECKING:  # for type checkers and editors; at run time each name is imported when first read
    from .cellagent import CellAgent
    from ._permission import KernelApproval
    from .client import Agent, PermissionRequest, Session, areplay, replay
    from .current_scope import current
    from .starting import astart, start
    from .widgets.inspector import ProtocolInspector
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
    from .magics.entry import resume
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
    "KernelApproval",
    "PermissionDenied",
    "PermissionRequest",
    "ProtocolError",
    "ProtocolInspector",
    "ReplayMismatch",
    "RpcError",
    "Session",
    "SessionState",
    "SweepResult",
    "ToolCall",
    "Turn",
    "__version__",
    "agents",
    "abranch_sweep",
    "areplay",
    "astart",
    "branch_sweep",
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

# The subpackage acp_notebook.sweep is loaded now (its names are lazy too, so this is cheap), and the
# attribute the import gave the package is dropped: `acpnb.sweep` is the function, read below, and no
# later first import of the subpackage can put the module in its place.
from . import sweep as _sweep_package  # noqa: E402,F401

del sweep

# Where each public name lives. `import acp_notebook` imports none of these modules (nor the SDK):
# the demo agent's process and a notebook that only loads the extension pay for what they use.
__getattr__, __dir__ = lazy_names(__name__, globals(), {
    **dict.fromkeys(("Agent", "PermissionRequest", "Session", "areplay", "replay"), ".client"),
    "current": ".current_scope",
    **dict.fromkeys(("astart", "start"), ".starting"),
    **dict.fromkeys(("AcpError", "AcpTimeoutError", "AgentClosedError", "AgentExitedError", "AgentStartError",
                     "CapabilityError", "ConfigOptionError", "PermissionDenied", "ProtocolError", "ReplayMismatch",
                     "RpcError"), ".errors"),
    **dict.fromkeys(("AgentSpec", "agents", "register"), ".launch"),
    **dict.fromkeys(("Choice", "ConfigOption", "ConfigOptions", "SessionState"), ".state"),
    **dict.fromkeys(("SweepResult", "load_run", "sweep"), ".sweep"),
    **dict.fromkeys(("ToolCall", "Turn"), ".turn"),
    **dict.fromkeys(("abranch_sweep", "branch_sweep"), ".branch_sweeps"),
    "CellAgent": ".cellagent",
    "KernelApproval": "._permission",
    "ProtocolInspector": ".widgets.inspector",
    "resume": ".magics.entry",
    "start_proxy": ".proxy",
    "__version__": client_version,
})


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext acp_notebook``: imports the magics (and ipywidgets) only now, not on ``import acp_notebook``."""
    # The magics import IPython's magic machinery and ipywidgets: only once the extension loads.
    from .magics.magic import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    # As above: a process that never loaded the extension does not import the magics to unload it.
    from .magics.magic import unload_ipython_extension as unload

    unload(ipython)
