"""FollowingBox: HTML in a scroll box that opens at the top and follows new content only from its end.

The protocol inspector's table is redrawn whole as frames arrive. In a plain HTML widget every
redraw loses the reader's place and folds the rows they opened, and whether the reader has
scrolled to the end never reaches the kernel. This widget's front end (an anywidget module, below)
keeps both across redraws: a reader at the end stays at the end (the table follows the newest
frames), a reader anywhere else stays where they are, and opened rows (``details[data-index]``)
stay open. Where the reader is (``following``: at the end; ``reading_at``: the scroll offset
otherwise) is synced to the model, so a view JupyterLab builds anew (when the output's saved form
is refreshed) opens where the last one was.

Threads: ``value`` is written under the inspector's lock from the kernel or loop thread (ipywidgets
sends the change); ``following`` and ``reading_at`` are written by the front end.
"""

from __future__ import annotations

import anywidget
import traitlets

__all__ = ["FollowingBox"]

_ESM = r"""
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "acpnb-frames-scroll";
  box.style.overflowY = "auto";
  box.style.maxHeight = model.get("max_height");
  el.appendChild(box);
  const atEnd = () => box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  let following = model.get("following");
  let drawing = false;
  let pending = null;
  const place = () => {
    box.scrollTop = following ? box.scrollHeight : model.get("reading_at");
  };
  const draw = () => {
    const opened = new Set(Array.from(box.querySelectorAll("details[open][data-index]"), (d) => d.dataset.index));
    drawing = true;
    box.innerHTML = model.get("value");
    for (const row of box.querySelectorAll("details[data-index]")) {
      if (opened.has(row.dataset.index)) row.open = true;
    }
    place();
    drawing = false;
  };
  box.addEventListener("scroll", () => {
    if (drawing) return;
    following = atEnd() && box.scrollHeight > box.clientHeight;
    clearTimeout(pending);
    pending = setTimeout(() => {
      model.set("following", following);
      model.set("reading_at", Math.round(box.scrollTop));
      model.save_changes();
    }, 150);
  });
  model.on("change:value", draw);
  model.on("change:max_height", () => { box.style.maxHeight = model.get("max_height"); });
  draw();
  requestAnimationFrame(place);  // once laid out: a rebuilt view opens where the last one was
  return () => clearTimeout(pending);
}
export default { render };
"""


class FollowingBox(anywidget.AnyWidget):
    """``value`` (HTML) in a box at most ``max_height`` high; see the module docstring."""

    _esm = _ESM
    value = traitlets.Unicode("").tag(sync=True)
    max_height = traitlets.Unicode("32em").tag(sync=True)
    following = traitlets.Bool(False).tag(sync=True)
    reading_at = traitlets.Int(0).tag(sync=True)
