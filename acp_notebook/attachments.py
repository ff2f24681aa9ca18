"""Kernel objects as prompt content: a DataFrame, a figure, an array... turned into ACP content blocks.

``collect(items, capabilities)`` turns what ``Session.prompt(text, attach=...)`` was given into
``Attachment``s, each holding the content blocks it adds to the prompt and a one-line account of
itself (name, kind, size, what was cut) for the turn's view. ``prompt_blocks`` puts the prompt's
own text first, then each attachment's blocks. ``inline_text`` is the value of a ``{name}`` in a
``%%acp`` cell.

What each object becomes:
- a pandas DataFrame or Series: a text block stating its shape and columns, then the table as CSV in
  an embedded ``resource`` block (``promptCapabilities.embeddedContext``; else the CSV goes in the
  text block). Rows and columns are sliced off BEFORE anything is rendered (a 10 GB frame costs
  what its first rows cost), long cells are cut, and the CSV is cut to whole rows within the byte cap;
  the text says what was left out.
- a matplotlib Figure (or Axes) or a PIL Image: an ``image`` block (PNG, base64) when the agent's
  ``promptCapabilities.image`` is true (rendered smaller until it fits the image cap); otherwise a
  text block saying it was left out and why, with what text the figure holds (titles, axis labels).
- a numpy array: its shape and dtype, and numpy's summarized form (never every element).
- dicts, lists, tuples, sets: JSON (pruned to a bounded number of items and depth first); strings as
  they are; anything else its ``repr``. Each capped in bytes.

Secrets: an object whose name looks like a secret's (``OPENAI_API_KEY``, ``db_password``) is sent as
``***``; dict keys that name secrets have their values masked; every text goes through the session's
``Redactor`` (secret environment values). Pure functions over the objects given, which they only read:
they run on the thread that builds the prompt (the kernel's for ``start_turn`` and ``%%acp``, the
background loop's for ``prompt`` / ``aprompt``, while the caller waits).
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import reprlib
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ._redact import MASK, Redactor, is_secret_name

__all__ = ["MAX_COLUMNS", "MAX_IMAGE_BYTES", "MAX_INLINE_BYTES", "MAX_ROWS", "MAX_TEXT_BYTES", "Attachment",
           "NotInlinable", "attachment", "collect", "inline_text", "prompt_blocks"]

MAX_ROWS = 50  # of a table
MAX_COLUMNS = 40
MAX_CELL_CHARS = 200  # of one table cell
MAX_TEXT_BYTES = 20_000  # of one attachment's text (UTF-8)
MAX_IMAGE_BYTES = 1_000_000  # of one PNG
MAX_IMAGE_SIDE = 2048  # pixels: a larger PIL image is scaled down before it is encoded
MAX_INLINE_BYTES = 4_000  # of one {name} in a %%acp cell
MAX_ITEMS = 100  # of one list, dict or set level
MAX_DEPTH = 6
MAX_STRING_CHARS = 2_000  # of one string inside a container
URI_ROOT = "kernel://variables/"
_CUT = "\u2026"


@dataclass(frozen=True)
class Attachment:
    """One object as the prompt carries it.

    ``kind``: table, image, array, data (JSON), text. ``summary``: the type and shape in a few words;
    ``description``: what the agent is told it is. ``size``: bytes sent (text, or the PNG); ``sent`` is
    False when the object was left out (an image for an agent that takes none); ``note`` says what was
    cut or why it was left out.
    """

    name: str
    kind: str
    summary: str
    description: str
    blocks: tuple[dict[str, Any], ...]
    size: int
    sent: bool = True
    note: str = ""

    @property
    def label(self) -> str:
        """One line for the turn's view: ``df (table, DataFrame 1,000 x 3, 2.1 kB; cut to the first 50 of 1,000 rows)``."""
        size = _bytes(self.size) if self.sent else "not sent"
        return f"{self.name} ({self.kind}, {self.summary}, {size}{'; ' + self.note if self.note else ''})"


class NotInlinable(ValueError):
    """A ``{name}`` that cannot be text in a prompt (a figure: attach it instead)."""


# --- what the prompt carries ------------------------------------------------------------------
def collect(items: Any, capabilities: Mapping[str, Any] | None = None, *,
            redactor: Redactor | None = None) -> list[Attachment]:
    """``attach=`` as given (objects; ``(name, object)`` pairs; a mapping of names to objects) as Attachments.

    ``capabilities``: the agent's ``agentCapabilities`` (its ``promptCapabilities`` decide between
    image blocks and notes, resource blocks and plain text).
    """
    prompt_caps = (capabilities or {}).get("promptCapabilities") or {}
    image, embedded = prompt_caps.get("image") is True, prompt_caps.get("embeddedContext") is True
    return [attachment(obj, name, image=image, embedded=embedded, redactor=redactor)
            for name, obj in _named(items)]


def _named(items: Any) -> list[tuple[str, Any]]:
    if isinstance(items, Mapping):
        return [(str(name), obj) for name, obj in items.items()]
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise TypeError("attach= takes a list of objects, of (name, object) pairs, or a dict of names to objects, "
                        f"not a {type(items).__name__}: e.g. session.prompt('...', attach=[df, fig]) "
                        "or attach={'sales': df}")
    named = []
    for number, item in enumerate(items, 1):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            named.append(item)
        else:
            named.append((f"attachment {number}", item))
    return named


def prompt_blocks(prompt: str | Sequence[Mapping[str, Any]], attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """The prompt's own blocks (a string is one text block), then each attachment's."""
    blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else [dict(b) for b in prompt]
    for item in attachments:
        blocks.extend(dict(b) for b in item.blocks)
    return blocks


def attachment(obj: Any, name: str | None = None, *, image: bool = False, embedded: bool = False,
               redactor: Redactor | None = None) -> Attachment:
    """One object as content blocks; ``image`` / ``embedded``: what the agent accepts (see ``collect``)."""
    name = name or "attachment"
    redactor = redactor or Redactor()
    if is_secret_name(name):
        return _text_attachment(name, _Rendered("text", type(obj).__name__,
                                                f"a {type(obj).__name__} whose name marks it a secret", MASK,
                                                "text/plain", "masked"), embedded)
    figure = _figure(obj)
    if figure is not None:
        return _image_attachment(name, figure, image)
    rendered = _render(obj, MAX_TEXT_BYTES)
    text, _cut = _fit(redactor.text(rendered.text), MAX_TEXT_BYTES)  # a mask may be longer than what it hides
    return _text_attachment(name, dataclasses.replace(rendered, text=text), embedded)


def inline_text(obj: Any, name: str, *, redactor: Redactor | None = None) -> str:
    """The text a ``{name}`` in a ``%%acp`` cell stands for: a string as it is, else the attachment's text
    form; capped at MAX_INLINE_BYTES. Raises NotInlinable for a figure or image."""
    if is_secret_name(name):
        return MASK
    if _figure(obj) is not None:
        raise NotInlinable(f"{name} is an image ({type(obj).__name__}): send it with --attach {name}")
    text = obj[:MAX_INLINE_BYTES] if isinstance(obj, str) else _render(obj, MAX_INLINE_BYTES).text
    text, _cut = _fit((redactor or Redactor()).text(text), MAX_INLINE_BYTES)
    return text


def _text_attachment(name: str, rendered: _Rendered, embedded: bool) -> Attachment:
    text, mime, note = rendered.text, rendered.mime, rendered.note
    head = f"Attached `{name}`: {rendered.description}" + (f" ({note})" if note else "") + "."
    if embedded:
        uri = URI_ROOT + quote(name, safe="") + _SUFFIX.get(mime, ".txt")
        blocks = ({"type": "text", "text": head},
                  {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": text}})
    else:
        fence = "```" + "`" * _longest_run(text, "`")
        body = text.rstrip("\n")
        blocks = ({"type": "text", "text": f"{head}\n\n{fence}{_FENCE_LANG.get(mime, '')}\n{body}\n{fence}"},)
    return Attachment(name, rendered.kind, rendered.summary, rendered.description, blocks, len(text.encode()),
                      note=note)


_SUFFIX = {"text/csv": ".csv", "application/json": ".json", "text/plain": ".txt"}
_FENCE_LANG = {"text/csv": "csv", "application/json": "json"}


def _longest_run(text: str, char: str) -> int:
    longest = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        longest = max(longest, run)
    return longest


# --- text renderings ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rendered:
    kind: str
    summary: str
    description: str
    text: str
    mime: str
    note: str = ""


def _render(obj: Any, cap: int) -> _Rendered:
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(obj, pandas.DataFrame):
        return _table(obj, obj, "DataFrame", cap)
    if pandas is not None and isinstance(obj, pandas.Series):
        return _table(obj.to_frame(name=obj.name if obj.name is not None else "value"), obj, "Series", cap)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        return _array(numpy, obj, cap)
    if isinstance(obj, str):
        text, cut = _fit(obj[:cap], cap)
        note = f"cut to {len(text):,} of {len(obj):,} characters" if cut or len(obj) > len(text) else ""
        return _Rendered("text", f"str, {len(obj):,} chars", f"str of {len(obj):,} characters", text, "text/plain",
                         note)
    if isinstance(obj, (Mapping, list, tuple, set, frozenset)):
        return _data(obj, cap)
    text, cut = _fit(_safe_repr(obj), cap)
    return _Rendered("text", type(obj).__name__, f"{type(obj).__name__} (its repr)", text, "text/plain",
                     "repr cut" if cut else "")


def _table(frame: Any, original: Any, what: str, cap: int) -> _Rendered:
    """A frame's first rows and columns as CSV: sliced first, long cells cut, then whole rows to the byte cap."""
    rows, columns = frame.shape
    part = frame.iloc[:MAX_ROWS, :MAX_COLUMNS]
    part = (getattr(part, "map", None) or part.applymap)(_cell)  # DataFrame.map is pandas 2.1's applymap
    part.columns = [_cell(column) for column in part.columns]
    pandas = sys.modules["pandas"]
    index = not (isinstance(frame.index, pandas.RangeIndex) and frame.index.start == 0 and frame.index.step == 1)
    text, kept = _csv_within(part, index, cap)
    shape = f"{_count(rows, 'row')} x {_count(columns, 'column')}" if what == "DataFrame" else _count(rows, "value")
    summary = f"{what} {rows:,} x {columns:,}" if what == "DataFrame" else f"{what} of {rows:,}"
    dtypes = ", ".join(f"{column} ({dtype})" for column, dtype in list(frame.dtypes.items())[:MAX_COLUMNS])
    description = f"pandas {what}, {shape}; " + (f"columns: {dtypes}" if what == "DataFrame" else
                                                   f"dtype {original.dtype}")
    left_out = [f"the first {kept:,} of {rows:,} {'rows' if what == 'DataFrame' else 'values'}"] if kept < rows else []
    if columns > part.shape[1]:
        left_out.append(f"the first {part.shape[1]:,} of {columns:,} columns")
    note = "cut to " + " and ".join(left_out) if left_out else ""
    if text.endswith(_CUT):
        note = (note + "; " if note else "") + "header cut"
    return _Rendered("table", summary, description, text, "text/csv", note)


def _cell(value: Any) -> Any:
    """A table cell safe to render: long strings cut, containers and objects as a short repr.

    A carriage return becomes a line break: the csv module quotes fields holding its line terminator
    ("\n") but not a lone "\r", which a reader would take for the end of the row."""
    if isinstance(value, str):
        value = value if len(value) <= MAX_CELL_CHARS else value[:MAX_CELL_CHARS] + _CUT
        return value.replace("\r\n", "\n").replace("\r", "\n") if "\r" in value else value
    if value is None or isinstance(value, (int, float, bool, complex)):
        return value
    kind = type(value)
    if kind.__module__ in ("numpy", "pandas._libs.tslibs.timestamps", "pandas._libs.tslibs.timedeltas",
                           "pandas._libs.tslibs.nattype", "datetime", "decimal"):
        return value
    return _short_repr(value, MAX_CELL_CHARS)


def _csv_within(part: Any, index: bool, cap: int) -> tuple[str, int]:
    """The CSV of as many leading rows of ``part`` as fit in ``cap`` bytes (binary search), and how many."""
    text = part.to_csv(index=index)
    if len(text.encode()) <= cap:
        return text, len(part)
    low, high = 0, len(part) - 1  # low rows always fit, unless the header alone does not
    best = part.iloc[:0].to_csv(index=index)
    if len(best.encode()) > cap:
        cut, _ = _fit(best, cap - len(_CUT.encode()))
        return cut + _CUT, 0
    while low < high:
        middle = (low + high + 1) // 2
        attempt = part.iloc[:middle].to_csv(index=index)
        if len(attempt.encode()) <= cap:
            low, best = middle, attempt
        else:
            high = middle - 1
    return best, low


def _array(numpy: Any, array: Any, cap: int) -> _Rendered:
    """Shape, dtype and numpy's summarized form; arrays of many dimensions are cut to a corner first."""
    summary = f"ndarray {' x '.join(str(n) for n in array.shape) or 'scalar'} {array.dtype}"
    description = f"numpy array, shape {tuple(array.shape)}, dtype {array.dtype}"
    note = ""
    if array.ndim > 4 and array.size > 1000:
        side = max(1, int(1000 ** (1 / array.ndim)))
        array = array[tuple(slice(0, side) for _ in range(array.ndim))]
        note = f"only the leading corner of shape {tuple(array.shape)}"
    text = numpy.array2string(array, threshold=200, edgeitems=3, max_line_width=120)
    text, cut = _fit(text, cap)
    return _Rendered("array", summary, description, text, "text/plain", note or ("cut" if cut else ""))


def _data(obj: Any, cap: int) -> _Rendered:
    """Containers as JSON, pruned to MAX_ITEMS per level and MAX_DEPTH levels before anything is rendered."""
    pruned, left = _prune(obj, 0)
    text = json.dumps(pruned, ensure_ascii=False, default=str)
    text, cut = _fit(text, cap)
    size = _count(len(obj), "item")
    notes = [f"pruned: {left:,} items left out"] if left else []
    notes += ["cut"] if cut else []
    return _Rendered("data", f"{type(obj).__name__}, {size}", f"{type(obj).__name__} of {size}", text,
                     "application/json", "; ".join(notes))


def _prune(value: Any, depth: int) -> tuple[Any, int]:
    """A JSON-able copy of at most MAX_ITEMS items per level and MAX_DEPTH levels, and how many items it left out."""
    if value is None or isinstance(value, (bool, int)):
        return value, 0
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value), 0
    if isinstance(value, str):
        return (value if len(value) <= MAX_STRING_CHARS else value[:MAX_STRING_CHARS] + _CUT), 0
    if depth >= MAX_DEPTH and isinstance(value, (Mapping, list, tuple, set, frozenset)):
        return _CUT, len(value)
    left = 0
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for number, (key, item) in enumerate(value.items()):
            if number >= MAX_ITEMS:
                return {**out, _CUT: f"{len(value) - MAX_ITEMS:,} more"}, left + len(value) - MAX_ITEMS
            key = str(key) if isinstance(key, (str, int, float, bool)) or key is None else _short_repr(key, 100)
            item, more = (MASK, 0) if is_secret_name(key) else _prune(item, depth + 1)
            out[key], left = item, left + more
        return out, left
    if isinstance(value, (list, tuple, set, frozenset)):
        items = []
        for number, item in enumerate(value):
            if number >= MAX_ITEMS:
                items.append(f"{_CUT} {len(value) - MAX_ITEMS:,} more")
                return items, left + len(value) - MAX_ITEMS
            item, more = _prune(item, depth + 1)
            items.append(item)
            left += more
        return items, left
    return _short_repr(value, MAX_STRING_CHARS), 0


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 200, 200, 20, 20


def _short_repr(value: Any, limit: int) -> str:
    text = _safe_repr(value, _REPR.repr)
    return text if len(text) <= limit else text[:limit] + _CUT


def _safe_repr(value: Any, how: Any = repr) -> str:
    """A repr, or a line saying it failed (a user's class may raise in __repr__)."""
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) > MAX_TEXT_BYTES:
        return repr(bytes(value[:MAX_TEXT_BYTES])) + f"{_CUT} ({len(value):,} bytes in all)"
    try:
        return how(value)
    except Exception as exc:  # noqa: BLE001 - anything a user's __repr__ raises is reported, not raised
        return f"<{type(value).__name__}: its repr raised {type(exc).__name__}: {exc}>"


def _fit(text: str, cap: int) -> tuple[str, bool]:
    """``text`` cut to at most ``cap`` UTF-8 bytes (never mid-character), and whether it was cut."""
    data = text.encode()
    if len(data) <= cap:
        return text, False
    return data[:max(0, cap)].decode(errors="ignore"), True


def _count(number: int, word: str) -> str:
    return f"{number:,} {word}{'' if number == 1 else 's'}"


def _bytes(size: int) -> str:
    return f"{size} B" if size < 1000 else f"{size / 1000:.1f} kB" if size < 1_000_000 else f"{size / 1e6:.1f} MB"


# --- images -------------------------------------------------------------------------------------------
def _figure(obj: Any) -> Any:
    """The matplotlib Figure or PIL Image ``obj`` is (an Axes gives its figure), else None."""
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is not None:
        if isinstance(obj, figure_module.Figure):
            return obj
        axes_module = sys.modules.get("matplotlib.axes")
        if axes_module is not None and isinstance(obj, axes_module.Axes):
            return obj.figure
    image_module = sys.modules.get("PIL.Image")
    if image_module is not None and isinstance(obj, image_module.Image):
        return obj
    return None


def _image_attachment(name: str, figure: Any, accepted: bool) -> Attachment:
    width, height = _pixels(figure)
    what = "matplotlib figure" if not _is_pil(figure) else f"PIL image, mode {figure.mode}"
    description = f"{what}, {width} x {height} px"
    summary = f"{'Image' if _is_pil(figure) else 'Figure'} {width} x {height} px"
    words = _figure_words(figure)
    if not accepted:
        note = "left out: the agent does not accept images (its promptCapabilities.image is not true)"
        text = f"Attached `{name}`: {description}; {note}." + (f" It shows: {words}." if words else "")
        return Attachment(name, "image", summary, description, ({"type": "text", "text": text},), 0, sent=False,
                          note=note)
    png, scaled = _png(figure)
    if png is None:
        note = f"left out: no rendering of it fits {_bytes(MAX_IMAGE_BYTES)}"
        return Attachment(name, "image", summary, description,
                          ({"type": "text", "text": f"Attached `{name}`: {description}; {note}."},), 0, sent=False,
                          note=note)
    head = f"Attached `{name}`: {description}" + (f" ({scaled})" if scaled else "") + "." + \
        (f" It shows: {words}." if words else "")
    blocks = ({"type": "text", "text": head},
              {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode("ascii")})
    return Attachment(name, "image", summary, description, blocks, len(png), note=scaled)


def _is_pil(figure: Any) -> bool:
    image_module = sys.modules.get("PIL.Image")
    return image_module is not None and isinstance(figure, image_module.Image)


def _pixels(figure: Any) -> tuple[int, int]:
    if _is_pil(figure):
        return figure.size
    width, height = figure.get_size_inches()
    return round(width * figure.dpi), round(height * figure.dpi)


def _figure_words(figure: Any) -> str:
    """The text a figure holds (its title, each axes' title and labels), so an agent without eyes learns something."""
    if _is_pil(figure):
        return ""
    suptitle = getattr(figure, "get_suptitle", None)  # matplotlib 3.8+
    words = [suptitle()] if suptitle is not None else []
    for axes in figure.axes[:8]:
        parts = [axes.get_title(), axes.get_xlabel() and f"x: {axes.get_xlabel()}",
                 axes.get_ylabel() and f"y: {axes.get_ylabel()}"]
        words.append(", ".join(p for p in parts if p))
    return "; ".join(w for w in words if w)[:500]


def _png(figure: Any) -> tuple[bytes | None, str]:
    """PNG bytes within MAX_IMAGE_BYTES (halving the resolution up to four times), and a note if scaled."""
    scale = 1.0
    if _is_pil(figure):
        largest = max(figure.size)
        scale = min(1.0, MAX_IMAGE_SIDE / largest) if largest else 1.0
    for _attempt in range(5):
        data = _encode(figure, scale)
        if len(data) <= MAX_IMAGE_BYTES:
            return data, (f"sent at {scale:.0%} of its size" if scale < 1 else "")
        scale /= 2
    return None, ""


def _encode(figure: Any, scale: float) -> bytes:
    buffer = io.BytesIO()
    if _is_pil(figure):
        image = figure
        if scale < 1:
            size = (max(1, round(figure.size[0] * scale)), max(1, round(figure.size[1] * scale)))
            image = figure.resize(size)
        if image.mode not in ("1", "L", "LA", "I", "P", "RGB", "RGBA"):
            image = image.convert("RGBA")
        image.save(buffer, format="PNG")
    else:
        figure.savefig(buffer, format="png", dpi=figure.dpi * scale)
    return buffer.getvalue()
