"""The agent in your kernel: the MCP server named ``kernel`` offered to every notebook session.

``KernelTools`` (server.py) serves the tools (list_variables, inspect_variable, run_code,
notebook_history, propose_cell) over a private Unix socket (channel.py) that the agent reaches
through a small stdio bridge (bridge.py); the tools read and run in the user's namespace on the
kernel thread only (namespace.py, runner.py through ``_loop.on_kernel_thread``); the policy words
are in policy.py; client.py opens the tools from an mcpServers entry with the official MCP client;
connect.py tells the user, once a session, when an agent offered the server never connected to it.

Importing this package is cheap: the MCP SDK is imported when a channel is first used.
"""

from __future__ import annotations

from .._lazy import lazy_names
from .policy import POLICIES, KernelToolEvent, RunRequest, parse_policy

__all__ = ["POLICIES", "KernelToolEvent", "KernelTools", "RunRequest", "parse_policy", "start_kernel_tools"]

# The server's modules (the tools, the namespace readers, the runner) load when a channel is first made: the
# bridge's process and the proxy's, which import only the channel, start without them.
__getattr__, __dir__ = lazy_names(__name__, globals(), dict.fromkeys(("KernelTools", "start_kernel_tools"), ".server"))
