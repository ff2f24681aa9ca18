"""Package names imported on first use (PEP 562), so that importing a package stays cheap.

``import acp_notebook`` must not load the SDK, IPython or ipywidgets, and the demo agent's
process (``python -m acp_notebook.demo``) must not load the client, the sweeps or the widgets:
each package's ``__init__`` maps its public names to the modules that define them and imports a
module only when one of its names is first read. A name once loaded is kept in the package's
namespace, so later reads do not come back here. Imports are serialized by Python's import lock;
this module holds no state of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], homes: Mapping[str, str | Callable[[], Any]],
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``homes`` maps a name to the module, relative to
    ``package`` (``".client"``, ``"..widgets.sessions"``), whose attribute of that name it is, or to a
    function that computes the value."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = home() if callable(home) else getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
