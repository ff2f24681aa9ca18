"""The multi-agent proxy: several ACP agents behind one endpoint."""

from __future__ import annotations

from collections.abc import Sequence

from .._sdk import defer_sdk_package
from .launcher import astart_proxy, proxy_command, proxy_environment, start_proxy


def main(argv: Sequence[str] | None = None) -> int:
    """``acp-notebook proxy``: the proxy on stdio. Its modules (and the SDK) load only here, so that
    ``import acp_notebook`` stays quick."""
    defer_sdk_package()  # the proxy's process starts: the SDK's modules without its schema models (_sdk.py)
    from .cli import main as serve  # the proxy's modules and the acp SDK, only in the proxy's process

    return serve(argv)

__all__ = ["astart_proxy", "main", "proxy_command", "proxy_environment", "start_proxy"]
