"""Figures and images as MCP image content (PNG), capped at IMAGE_LIMIT bytes.

Runs on the kernel thread (it draws the user's figures). matplotlib and PIL are only looked at
when the object is one of theirs: nothing here imports them otherwise. "One of theirs" means the
library's own class (answers.is_library): a user's subclass of Figure or Image may override what
drawing calls, so it is shown as any other object is, never drawn.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from .answers import IMAGE_LIMIT, Answer, is_library

__all__ = ["figure_png", "image_block", "picture"]

_DPI = 100


def image_block(png: bytes) -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(png).decode("ascii"), "mimeType": "image/png"}


def _is_figure(value: Any) -> bool:
    return is_library(value, "matplotlib.figure", "Figure")


def _is_pil_image(value: Any) -> bool:
    return is_library(value, "PIL.Image", "Image")


def figure_png(figure: Any) -> bytes | None:
    """The figure as PNG under IMAGE_LIMIT (drawn smaller when needed), or None when it cannot be."""
    dpi = _DPI
    for _ in range(4):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        png = buffer.getvalue()
        if len(png) <= IMAGE_LIMIT:
            return png
        dpi = max(10, int(dpi * (IMAGE_LIMIT / len(png)) ** 0.5 * 0.9))
    return None


def _pil_png(image: Any) -> tuple[bytes | None, bool]:
    """PNG bytes under IMAGE_LIMIT and whether the image had to be scaled down."""
    current, scaled = image, False
    for _ in range(6):
        buffer = io.BytesIO()
        current.save(buffer, format="PNG")
        png = buffer.getvalue()
        if len(png) <= IMAGE_LIMIT:
            return png, scaled
        factor = (IMAGE_LIMIT / len(png)) ** 0.5 * 0.9
        current = image.copy()
        current.thumbnail((max(1, int(current.width * factor)), max(1, int(current.height * factor))))
        image, scaled = current, True
    return None, scaled


def picture(value: Any) -> Answer | None:
    """A figure or PIL image as an image answer with a line of text; None for anything else."""
    if _is_figure(value):
        width, height = value.get_size_inches()
        png = figure_png(value)
        note = f"matplotlib Figure, {width:g} x {height:g} in, {len(value.axes)} axes"
        if png is None:
            return Answer.text(f"{note}; its PNG stays over {IMAGE_LIMIT:,} bytes even drawn small, "
                               "so it was left out")
        return Answer([{"type": "text", "text": note}, image_block(png)])
    if _is_pil_image(value):
        note = f"PIL image, {value.width} x {value.height}, mode {value.mode}"
        png, scaled = _pil_png(value)
        if png is None:
            return Answer.text(note + f"; its PNG stays over {IMAGE_LIMIT:,} bytes, so it was left out")
        if scaled:
            note += f" (scaled down to fit {IMAGE_LIMIT:,} bytes)"
        return Answer([{"type": "text", "text": note}, image_block(png)])
    return None
