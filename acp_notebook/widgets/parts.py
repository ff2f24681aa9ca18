"""LiveParts: HTML in keyed parts, of which the frontend is sent only what changed.

A turn view that redraws a section whole (its reply, its tool cards, its plan) sends that section
again on every render: ten times a second while a reply streams, so what reaches the browser grows
with the square of the turn. This widget holds a section as an ordered list of parts, each a key
and its HTML. ``update(parts)`` says what the section shows now; ``flush()`` sends the frontend one
message with only the differences from what it was sent last: a new part (inserted before the next
part it has), a part gone, or a part patched (the characters between the common head and tail of
its old and new HTML; where that span is long, the few runs that really changed inside it, as several patches:
a plan row whose status changed alters its class and its mark, not the words between, and a tool card that
ends changes its badge and gains its diff, without its head being sent again). A short part is compared by
characters; a long one by its tags and text runs first, then by characters inside a short changed run.
A part that did not change costs nothing, so a finished paragraph, a tool
card that is done or a plan row that did not move is sent once. Each message also costs its
envelope (about 150 bytes with the comm's id), so ``flush`` may hold back a change of fewer than
``min_chars`` characters until it is ``max_age`` seconds old: a slow stream is sent a few times a
second, not on every render.

The frontend (the anywidget module below) keeps the parts in the model (``parts``, ``v``: the
version it holds), so every view of the model (JupyterLab builds one anew whenever the output that
holds the widget is updated), and widget state saved with a notebook, show all of it. Each message
names the version it applies to (``f``; the message makes it ``f + 1``); a frontend holding another one (a page reloaded mid-turn whose
state crossed a message) asks for the whole list (``{"sync": v}``) and is sent it. anywidget holds
a model's messages until its module has run, so none is lost at the start. Offsets in patches count
UTF-16 code units, as JavaScript strings do.

In a ``ClockParts`` section a running clock ticks in the browser, not in the kernel: an element with
``data-acpnb-since="<start>"`` (the kernel's epoch seconds; ``clock_attribute``) shows the time since then,
redrawn each second by the frontend, so a turn's clock costs no message while it runs; the part that holds it
is patched once, when the clock stops. The kernel's time as the state was taken (``now``, filled in by
``get_state``) gives the frontend the offset between the two clocks, so a kernel on another machine still
counts right. The ticking stops once the widgets are disconnected (the kernel gone). Only that section's
widget carries the clocks' code (each widget's state carries its module).

Threads: ``update`` and ``flush`` run under the view's lock (render thread, or the constructing
thread once); a frontend's sync request comes on the kernel's shell (main or subshell) thread. The
parts last sent and their version are guarded by ``_lock``, held while a message is sent, so
messages leave in version order.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Iterable
from typing import Any

import traitlets

from ._deltas import VersionedCopy

__all__ = ["CLOCK_ATTRIBUTE", "ClockParts", "LiveParts", "clock_attribute", "patch_op", "patch_ops"]

# A patch whose new text is longer than REFINE_MIN is looked into for the runs that changed (difflib), and the span
# between two changes is not sent: by characters where both sides are at most REFINE_MAX long (cheap at that
# size), else by tokens (a tag, or the text between two tags), at most REFINE_TOKENS of them a side, and then by
# characters inside each short changed run of tokens. A longer part is patched whole, between its common head and tail.
REFINE_MIN = 48
REFINE_MAX = 2000
REFINE_TOKENS = 400
_TOKEN = re.compile(r"<[^<>]*>|[^<]+|<")
OP_COST = 24  # what an op costs beyond its text and its key, sent as JSON: its sign, offsets, quotes and commas
CLOCK_ATTRIBUTE = "data-acpnb-since"

_ESM = r"""
function apply(model, msg) {
  if (msg.full) { model.set({ parts: msg.full, v: msg.v }); return; }
  if (msg.f !== model.get("v")) { model.send({ sync: model.get("v") }); return; }
  const parts = model.get("parts").slice();
  let at = new Map(parts.map((p, i) => [p[0], i]));
  for (const op of msg.o) {
    if (op[0] === "=") {
      const i = at.get(op[1]), old = parts[i][1];
      parts[i] = [op[1], old.slice(0, op[2]) + op[4] + old.slice(op[3])];
    } else if (op[0] === "+") {
      const i = op[3] === null ? parts.length : at.get(op[3]);
      parts.splice(i, 0, [op[1], op[2]]);
      at = new Map(parts.map((p, j) => [p[0], j]));
    } else if (op[0] === "-") {
      parts.splice(at.get(op[1]), 1);
      at = new Map(parts.map((p, j) => [p[0], j]));
    }
  }
  model.set({ parts, v: msg.f + 1 });
}
function initialize({ model }) {
  if (typeof clocksOf === "function") {
    // How far this browser's clock is ahead of the kernel's (its state was taken a moment ago); kept here, not sent.
    model.set("skew", Date.now() / 1000 - (model.get("now") || Date.now() / 1000));
  }
  model.on("msg:custom", (msg) => apply(model, msg));
}
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = model.get("box_class");
  box.setAttribute("style", model.get("box_style"));
  el.appendChild(box);
  const nodes = new Map(), shown = new Map();
  const clocks = typeof clocksOf === "function" ? clocksOf(model, el, box) : null;
  const draw = () => {
    const parts = model.get("parts");
    const keep = new Set(parts.map((p) => p[0]));
    for (const [key, node] of nodes) {
      if (!keep.has(key)) { node.remove(); nodes.delete(key); shown.delete(key); }
    }
    let previous = null;
    for (const [key, html] of parts) {
      let node = nodes.get(key);
      if (!node) {
        node = document.createElement("div");
        node.style.display = "contents";
        nodes.set(key, node);
        box.insertBefore(node, previous ? previous.nextSibling : box.firstChild);
      }
      if (shown.get(key) !== html) {
        // A part drawn again keeps the folds the person opened or closed (a compaction whose summary streams).
        const folds = Array.from(node.querySelectorAll("details"), (d) => d.open);
        node.innerHTML = html;
        node.querySelectorAll("details").forEach((d, i) => { if (i < folds.length) d.open = folds[i]; });
        shown.set(key, html);
      }
      previous = node;
    }
    if (clocks) clocks.drawn();
  };
  model.on("change:parts", draw);
  draw();
  return () => {
    model.off("change:parts", draw);
    if (clocks) clocks.stop();
  };
}
export default { initialize, render };
"""

# The running clocks of a ClockParts section (prepended to _ESM): elements with data-acpnb-since, redrawn each
# second while the section holds one and the widgets are connected.
_CLOCKS_ESM = r"""
function clockText(value) {  // as _html.clock: 0 s, 42 s, 1 min 05 s
  const whole = Math.max(0, Math.floor(value));
  return whole < 60 ? `${whole} s` : `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, "0")} s`;
}
function clocksOf(model, el, box) {
  let timer = null;
  const tick = () => {
    if (el.closest(".jupyter-widgets-disconnected")) return;  // the kernel is gone: the clock stops where it was
    const now = Date.now() / 1000 - (model.get("skew") || 0);
    for (const node of box.querySelectorAll("[data-acpnb-since]")) {
      const text = clockText(now - Number(node.getAttribute("data-acpnb-since")));
      if (node.textContent !== text) node.textContent = text;
    }
  };
  const stop = () => { if (timer !== null) { clearInterval(timer); timer = null; } };
  const drawn = () => {
    if (box.querySelector("[data-acpnb-since]") === null) { stop(); return; }
    tick();
    if (timer === null) timer = setInterval(tick, 1000);
  };
  return { drawn, stop };
}
"""


def clock_attribute(since: float) -> str:
    """The attribute that makes an element a running clock from ``since`` (epoch seconds, ``time.time()``)."""
    return f'{CLOCK_ATTRIBUTE}="{since:.3f}"'


def _units(text: str) -> int:
    """The length of ``text`` in UTF-16 code units (a JavaScript string's length)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _common_head(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share from their start (comparisons in C, halving)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _head_and_tail(old: str, new: str) -> tuple[int, int]:
    """How many characters ``old`` and ``new`` share from their start, and then from their end."""
    head = _common_head(old, new)
    return head, _common_head(old[head:][::-1], new[head:][::-1])


def _spliced(key: str, old: str, new: str, head: int, tail: int) -> list[Any]:
    start = _units(old[:head])
    return ["=", key, start, start + _units(old[head:len(old) - tail]), new[head:len(new) - tail]]


def patch_op(key: str, old: str, new: str) -> list[Any]:
    """The op that turns ``old`` into ``new``: ``["=", key, start, end, text]`` replaces ``old[start:end]`` (in
    UTF-16 units) by ``text``."""
    return _spliced(key, old, new, *_head_and_tail(old, new))


def patch_ops(key: str, old: str, new: str) -> list[list[Any]]:
    """The ops that turn ``old`` into ``new``: one ``patch_op``, or, where cheaper, one per changed run inside it, last
    run first (so each op's offsets, taken in ``old``, still hold when the ops are applied in order)."""
    head, tail = _head_and_tail(old, new)  # once: the whole op and the runs inside it share the span
    whole = _spliced(key, old, new, head, tail)
    if len(whole[4]) <= REFINE_MIN:
        return [whole]
    before, after = old[head:len(old) - tail], new[head:len(new) - tail]
    found = _changed_runs(before, after)
    if found is None:
        return [whole]
    op_cost = OP_COST + len(key)
    runs: list[list[int]] = []  # [i1, i2, j1, j2]: changed runs, those closer than an op's cost merged
    for i1, i2, j1, j2 in found:
        if runs and i1 - runs[-1][1] < op_cost:
            runs[-1][1], runs[-1][3] = i2, j2
        else:
            runs.append([i1, i2, j1, j2])
    if sum(j2 - j1 + op_cost for _i1, _i2, j1, j2 in runs) >= len(whole[4]) + op_cost:
        return [whole]
    ops = []
    for i1, i2, j1, j2 in reversed(runs):
        start = _units(old[:head + i1])
        ops.append(["=", key, start, start + _units(before[i1:i2]), after[j1:j2]])
    return ops


def _changed_runs(before: str, after: str) -> list[tuple[int, int, int, int]] | None:
    """The runs ``(i1, i2, j1, j2)`` where ``before[i1:i2]`` became ``after[j1:j2]``, in order; None when the two are
    too long to compare (see REFINE_MAX and REFINE_TOKENS)."""
    if len(before) <= REFINE_MAX and len(after) <= REFINE_MAX:
        return _char_runs(before, after)
    old_tokens, new_tokens = _TOKEN.findall(before), _TOKEN.findall(after)
    if len(old_tokens) > REFINE_TOKENS or len(new_tokens) > REFINE_TOKENS:
        return None
    old_at, new_at = _offsets(old_tokens), _offsets(new_tokens)
    runs: list[tuple[int, int, int, int]] = []
    matcher = difflib.SequenceMatcher(None, old_tokens, new_tokens, autojunk=False)
    for tag, t1, t2, u1, u2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        i1, i2, j1, j2 = old_at[t1], old_at[t2], new_at[u1], new_at[u2]
        if tag == "replace" and REFINE_MIN < j2 - j1 <= REFINE_MAX and i2 - i1 <= REFINE_MAX:
            runs.extend((i1 + a1, i1 + a2, j1 + b1, j1 + b2) for a1, a2, b1, b2 in _char_runs(before[i1:i2], after[j1:j2]))
        else:
            runs.append((i1, i2, j1, j2))
    return runs


def _char_runs(before: str, after: str) -> list[tuple[int, int, int, int]]:
    return [(i1, i2, j1, j2)
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
            if tag != "equal"]


def _offsets(tokens: list[str]) -> list[int]:
    """Where each token starts in their concatenation, and (last) its length."""
    at = [0]
    for token in tokens:
        at.append(at[-1] + len(token))
    return at


class LiveParts(VersionedCopy):
    """A section of HTML parts (see the module docstring). ``value`` is the HTML it shows now."""

    _esm = _ESM
    _copy_trait = "parts"
    parts = traitlets.List().tag(sync=True)  # the frontend's copy; sent whole only at open and on request
    box_class = traitlets.Unicode("").tag(sync=True)
    box_style = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        self._wanted: dict[str, str] = {}
        self._sent: dict[str, str] = {}
        self._flushed_at = 0.0
        self.sent_bytes = 0  # the HTML and keys of the ops sent (a measure for the view's republish budget)
        super().__init__(**kwargs)

    @property
    def value(self) -> str:
        return "".join(self._wanted.values())

    def update(self, parts: Iterable[tuple[str, str]]) -> None:
        """What the section shows now, in order; sent by the next ``flush``."""
        self._wanted = dict(parts)

    def flush(self, min_chars: int = 0, max_age: float = 0.0) -> None:
        """Send the frontend what changed since the last flush, as one message (nothing when nothing did); a change
        of fewer than ``min_chars`` characters waits until the last message is ``max_age`` seconds old."""
        with self._lock:
            ops = self._ops()
            if ops is None:
                self._send_whole()
                return
            if not ops:
                return
            size = sum(len(op[1]) + (len(op[2]) if op[0] == "+" else len(op[-1]) if op[0] == "=" else 0) for op in ops)
            now = time.monotonic()
            if size < min_chars and now - self._flushed_at < max_age:
                return
            message = {"f": self._version, "o": ops}
            self._version += 1
            self._flushed_at = now
            self._sent = dict(self._wanted)
            self.sent_bytes += size
            self.send(message)

    def _ops(self) -> list[list[Any]] | None:
        """The ops from what was sent to what is wanted; None when parts kept moved (then all is sent)."""
        wanted, sent = self._wanted, self._sent
        ops: list[list[Any]] = [["-", key] for key in sent if key not in wanted]
        if [k for k in sent if k in wanted] != [k for k in wanted if k in sent]:
            return None
        changes: list[list[Any]] = []
        following: str | None = None
        for key in reversed(wanted):  # an insert names the part after it, already there when it is applied
            html = wanted[key]
            old = sent.get(key)
            if old is None:
                changes.append(["+", key, html, following])
            elif old is not html and old != html:
                changes.extend(patch_ops(key, old, html))
            following = key
        return ops + changes

    def _send_whole(self) -> None:
        """Under the lock: the whole list, for a frontend that asked or parts that moved."""
        self._version += 1
        self._sent = dict(self._wanted)
        full = [[key, html] for key, html in self._sent.items()]
        self.sent_bytes += sum(len(key) + len(html) for key, html in full)
        self.send({"full": full, "v": self._version})

    def _snapshot(self) -> list[list[Any]]:
        return [[key, html] for key, html in self._sent.items()]


class ClockParts(LiveParts):
    """A section whose running clocks tick in the browser (see the module docstring): its widget carries the clocks'
    code, and the kernel's time as its state is taken."""

    _esm = _CLOCKS_ESM + _ESM
    now = traitlets.Float(0.0).tag(sync=True)  # filled in by get_state: the offset between the two clocks

    def get_state(self, key: Any = None) -> dict[str, Any]:
        state = super().get_state(key)
        if "now" in state:
            state["now"] = time.time()
        return state
