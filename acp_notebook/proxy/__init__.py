"""The multi-agent proxy: several ACP agents behind one endpoint."""

from __future__ import annotations

from collections.abc import Sequence

from .launcher import astart_proxy, proxy_command, proxy_environment, start_proxy


def main(argv: Sequence[str] | None = None) -> int:
    """``acp-notebook proxy``: the proxy on stdio. Its modules (and the SDK) load only here, so that
    ``import acp_notebook`` stays quick."""
    from .cli import main as serve

    return serve(argv)

__all__ = ["astart_proxy", "main", "proxy_command", "proxy_environment", "start_proxy"]
