"""Optional libraries the sweep's outputs use (pandas, matplotlib, the eval-log exporters, Ray), and the one
error that names the extra to install when one is missing.

``MissingExtra`` is both an ``AcpError`` (IPython shows it as one line, not a traceback into importlib) and an
``ImportError`` (code that catches ImportError keeps working). ``require`` imports on the caller's thread.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import AcpError

__all__ = ["MissingExtra", "require"]


class MissingExtra(AcpError, ImportError):
    """An optional library a call needs is not installed; the message names the pip command that adds it."""

    def __init__(self, what: str, module: str, extra: str) -> None:
        self.module, self.extra = module, extra
        package = module.split(".")[0]
        # One line, the command included: no separate hint, so IPython shows exactly this line.
        super().__init__(f"{what} needs {package}, which is not installed: pip install 'acp-notebook[{extra}]'",
                         hint="")
        self.name = package


def require(module: str, what: str, extra: str) -> Any:
    """``module`` imported, or MissingExtra naming ``what`` needs it and the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(what, module, extra) from None
