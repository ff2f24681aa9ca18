"""`jupyter nbconvert --to acp-markdown`: Markdown export that writes each output's Markdown form.

nbconvert's markdown exporter writes, for each output, the first of its ``display_data_priority``
that the output has, and that list starts with text/html. Every view of this package carries its
own Markdown (text/markdown) beside its HTML, so the stock exporter writes the long inline-styled
HTML instead. This exporter is the stock one with text/markdown first; outputs with no Markdown
form (a DataFrame's HTML table, a plot) come out exactly as before; so does a turn whose Markdown form holds
only the beginning of a long reply (``widgets.static.CLIPPED_MARK``: its HTML form holds the reply whole, so
that is what is written). Registered as the nbconvert
exporter ``acp-markdown`` (an entry point of the package). The same effect without this package:
``jupyter nbconvert --to markdown --NbConvertBase.display_data_priority=text/markdown
--NbConvertBase.display_data_priority=text/html ...`` (listing the remaining types in order).

Imported by nbconvert only; no state.
"""

from __future__ import annotations

import copy
from typing import Any

from nbconvert.exporters.markdown import MarkdownExporter as _StockMarkdownExporter
from traitlets.config import Config

from .widgets.static import CLIPPED_MARK

__all__ = ["MarkdownExporter"]


class MarkdownExporter(_StockMarkdownExporter):
    """The stock Markdown exporter, preferring text/markdown over text/html."""

    export_from_notebook = "Markdown (acp-notebook outputs as Markdown)"

    @property
    def default_config(self) -> Config:
        config = super().default_config
        stock = list(config.NbConvertBase.display_data_priority)
        config.NbConvertBase.display_data_priority = ["text/markdown", *(t for t in stock if t != "text/markdown")]
        return config

    def from_notebook_node(self, nb: Any, resources: Any = None, **kw: Any) -> Any:
        """The export, with the clipped Markdown of long replies left out (their HTML is written instead)."""
        nb = copy.deepcopy(nb)
        for cell in nb.get("cells", ()):
            for output in cell.get("outputs", ()) if cell.get("cell_type") == "code" else ():
                data = output.get("data") or {}
                markdown = data.get("text/markdown")
                markdown = "".join(markdown) if isinstance(markdown, list) else markdown
                if isinstance(markdown, str) and CLIPPED_MARK in markdown and "text/html" in data:
                    del data["text/markdown"]
        return super().from_notebook_node(nb, resources, **kw)
