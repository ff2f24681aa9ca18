"""The multi-agent proxy: several ACP agents behind one endpoint."""

from __future__ import annotations

from .cli import main
from .launcher import astart_proxy, proxy_command, start_proxy

__all__ = ["astart_proxy", "main", "proxy_command", "start_proxy"]
