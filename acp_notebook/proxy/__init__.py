"""The multi-agent proxy: several ACP agents behind one endpoint.

``start_proxy`` and its kin (launcher.py: starting the proxy from the user's process, as an agent of the
client) are read on first use, so that the proxy's own process (``python -m acp_notebook.proxy``) never
imports the client, the session machinery or the kernel tools' client side (a tenth of a second of its start).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._lazy import lazy_names
from .._sdk import defer_sdk_package

if TYPE_CHECKING:  # for type checkers and editors; at run time each name is imported when first read
    from .launcher import astart_proxy, proxy_command, proxy_environment, start_proxy


def main(argv: Sequence[str] | None = None) -> int:
    """``acp-notebook proxy``: the proxy on stdio. Its modules (and the SDK) load only here, so that
    ``import acp_notebook`` stays quick."""
    defer_sdk_package()  # the proxy's process starts: the SDK's modules without its schema models (_sdk.py)
    from .cli import main as serve  # the proxy's modules and the acp SDK, only in the proxy's process

    return serve(argv)

__all__ = ["astart_proxy", "main", "proxy_command", "proxy_environment", "start_proxy"]

__getattr__, __dir__ = lazy_names(__name__, globals(), dict.fromkeys(
    ("astart_proxy", "proxy_command", "proxy_environment", "start_proxy"), ".launcher"))
