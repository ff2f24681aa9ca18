"""The reading tools over the user's namespace: list_variables, inspect_variable, notebook_history.

Every function here runs on the kernel thread (through ``_loop.on_kernel_thread``) and never
copies a big object whole: sizes come from nbytes / memory_usage(deep=False) / getsizeof, a
DataFrame is summarised from its head, a column sample and per-column counts.
"""

from __future__ import annotations

import difflib
import reprlib
import sys
import types
from collections import deque
from collections.abc import Mapping
from typing import Any

from .answers import Answer, cap_text, masked_value, namespace_redactor, secret_name
from .pictures import picture

__all__ = ["HIDDEN_NAMES", "current_shell", "inspect_variable", "list_variables", "notebook_history", "user_variables"]

HIDDEN_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})
_LENGTH_TYPES = (str, bytes, bytearray, list, tuple, dict, set, frozenset, range, deque)
_ARRAY_MODULES = frozenset({"numpy", "pandas", "polars", "torch", "xarray", "jax", "pyarrow", "dask", "tensorflow"})
MAX_COLUMNS = 60  # columns described one by one
MAX_ROWS = 100  # rows a head may show
# describe() of a bigger frame (and its null counts past FULL_SCAN_BYTES) use a seeded sample of this many
# rows: its percentiles cost a partition of every column, 300 ms for 200,000 rows x 20 columns here.
SAMPLE_ROWS = 50_000
FULL_SCAN_BYTES = 1 << 30  # null counts scan the whole frame up to this size
OUTPUT_CHARS = 500  # of one history entry's output
MASKED_ITEMS = 10_000  # dicts and lists up to this length are searched for secret-named keys
SECTION_CHARS = 7_000  # of a frame's head and of its describe(), so that both fit in one answer


def current_shell() -> Any:
    """The IPython shell this process runs, or None (a plain script)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def user_variables(namespace: Mapping[str, Any], hidden: Any = ()) -> dict[str, Any]:
    """The names a user defined: no modules, no IPython internals, no ``_`` names."""
    return {name: value for name, value in list(namespace.items())
            if not name.startswith("_") and name not in HIDDEN_NAMES and name not in hidden
            and not isinstance(value, types.ModuleType)}


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__.split(".")[0]
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _shape(value: Any) -> list[int] | None:
    if type(value).__module__.split(".")[0] not in _ARRAY_MODULES:
        return None
    try:
        shape = value.shape
        return [int(n) for n in shape]
    except Exception:  # noqa: BLE001 - a shape we cannot read is left out
        return None


def _size(value: Any) -> int | None:
    """Approximate bytes in memory, never by walking the object."""
    try:
        memory_usage = getattr(type(value), "memory_usage", None)
        if memory_usage is not None and type(value).__module__.startswith("pandas"):
            used = value.memory_usage(index=True, deep=False)
            return int(used.sum()) if hasattr(used, "sum") else int(used)
        nbytes = getattr(value, "nbytes", None) if type(value).__module__.split(".")[0] in _ARRAY_MODULES else None
        if isinstance(nbytes, int):
            return nbytes
        return sys.getsizeof(value)
    except Exception:  # noqa: BLE001 - an object that cannot say its size is listed without one
        return None


def human_bytes(size: int | None) -> str:
    if size is None:
        return "?"
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    return f"{size} B"


def describe_variable(name: str, value: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "type": _type_name(value)}
    shape = _shape(value)
    if shape is not None:
        entry["shape"] = shape
    elif isinstance(value, _LENGTH_TYPES):
        entry["length"] = len(value)
    entry["size_bytes"] = _size(value)
    return entry


def list_variables(namespace: Mapping[str, Any], hidden: Any = ()) -> Answer:
    entries = [describe_variable(name, value) for name, value in user_variables(namespace, hidden).items()]
    if not entries:
        return Answer.text("No user variables are defined yet.", structured={"variables": []})
    lines = [f"{len(entries)} variable{'s' if len(entries) != 1 else ''} (name, type, shape or length, memory):"]
    for entry in entries:
        extent = ("shape " + "x".join(str(n) for n in entry["shape"]) if "shape" in entry
                  else f"length {entry['length']}" if "length" in entry else "")
        lines.append(f"- {entry['name']}: {entry['type']}{', ' + extent if extent else ''}, "
                     f"{human_bytes(entry['size_bytes'])}")
    return Answer.text("\n".join(lines), structured={"variables": entries})


def unknown_variable(name: str, namespace: Mapping[str, Any], hidden: Any = ()) -> Answer:
    close = difflib.get_close_matches(name, list(user_variables(namespace, hidden)), n=5, cutoff=0.5)
    hint = f" Close names: {', '.join(close)}." if close else " list_variables shows the names there are."
    return Answer.error(f"No variable named {name!r} in the kernel.{hint}")


def inspect_variable(namespace: Mapping[str, Any], name: str, rows: int = 10, hidden: Any = ()) -> Answer:
    if not isinstance(name, str) or name not in namespace or name not in user_variables({name: namespace[name]},
                                                                                         hidden):
        return unknown_variable(str(name), namespace, hidden)
    value = namespace[name]
    if secret_name(name):
        return Answer.text(f"{masked_value(name)}; type {_type_name(value)}")
    rows = max(0, min(int(rows), MAX_ROWS))
    image = picture(value)
    if image is not None:
        return image
    redactor = namespace_redactor(namespace)
    if type(value) in (dict, list) and len(value) <= MASKED_ITEMS:
        value = redactor.masked(value)  # a copy only when it holds a secret: {"api_key": ...} shows ***
    return Answer.text(redactor.text(_describe_text(name, value, rows)))


def _describe_text(name: str, value: Any, rows: int) -> str:
    module = type(value).__module__
    if module.startswith("pandas") and type(value).__name__ == "DataFrame":
        return _frame_text(name, value, rows)
    if module.startswith("pandas") and type(value).__name__ == "Series":
        return _series_text(name, value, rows)
    if module.startswith("numpy") and type(value).__name__ == "ndarray":
        return _array_text(name, value)
    return f"{name}: {_type_name(value)}\n{_repr(value)}"


class _Repr(reprlib.Repr):
    """reprlib's shortening, but a repr that raises is reported as such (reprlib hides it)."""

    def repr_instance(self, value: Any, level: int) -> str:
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001 - a broken repr is reported, not raised
            return f"<its repr raised {type(exc).__name__}: {exc}>"
        return text if len(text) <= self.maxother else text[:self.maxother] + f"... [{len(text):,} characters]"


_REPR = _Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 4, 50, 50, 50, 50
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 5_000, 5_000, 200


def _repr(value: Any) -> str:
    try:
        return _REPR.repr(value)
    except Exception as exc:  # noqa: BLE001 - a broken repr is reported, not raised
        return f"<its repr raised {type(exc).__name__}: {exc}>"


def _frame_text(name: str, df: Any, rows: int) -> str:
    total_rows, total_cols = df.shape
    shown = df.iloc[:, :MAX_COLUMNS]
    sampled = total_rows > SAMPLE_ROWS
    sample = _sample(shown) if sampled else shown
    nulls_from = shown if _size(df) is not None and (_size(df) or 0) <= FULL_SCAN_BYTES else sample
    parts = [f"{name}: pandas.DataFrame, {total_rows:,} rows x {total_cols:,} columns, "
             f"{human_bytes(_size(df))} (shallow)"]
    more = f" (the first {MAX_COLUMNS} of {total_cols})" if total_cols > MAX_COLUMNS else ""
    in_sample = " (in a sample)" if nulls_from is sample and sampled else ""
    parts.append(f"\ncolumns{more}: name, dtype, nulls{in_sample}")
    for column in shown.columns:
        nulls = int(nulls_from[column].isna().sum()) if shown.columns.is_unique else "?"
        parts.append(f"- {column}: {shown[column].dtype}, {nulls}")
    if rows:
        head = shown.head(rows).to_string(max_colwidth=40, max_cols=30, line_width=150)
        parts.append(f"\nhead({rows}):\n{cap_text(head, SECTION_CHARS)}")
    parts.append("\ndescribe()" + (f" over a sample of {SAMPLE_ROWS:,} rows" if sampled else "") + ":")
    try:
        parts.append(cap_text(sample.describe().to_string(max_cols=30, line_width=150), SECTION_CHARS))
    except Exception as exc:  # noqa: BLE001 - columns describe() cannot handle are reported
        parts.append(f"(describe() failed: {type(exc).__name__}: {exc})")
    return "\n".join(parts)


def _sample(data: Any) -> Any:
    """SAMPLE_ROWS rows picked at random (seeded, in their order): a take of those rows only."""
    import numpy as np

    rows = np.random.default_rng(0).choice(len(data), size=SAMPLE_ROWS, replace=False)
    rows.sort()
    return data.take(rows)


def _series_text(name: str, series: Any, rows: int) -> str:
    sampled = len(series) > SAMPLE_ROWS
    sample = _sample(series) if sampled else series
    parts = [f"{name}: pandas.Series {series.name!r}, {len(series):,} values, dtype {series.dtype}, "
             f"{int(sample.isna().sum())} nulls" + (" in a sample" if sampled else "")]
    if rows:
        parts.append(f"\nhead({rows}):\n{cap_text(series.head(rows).to_string(max_rows=rows), SECTION_CHARS)}")
    parts.append("\ndescribe():\n" + cap_text(sample.describe().to_string(), SECTION_CHARS))
    return "\n".join(parts)


def _array_text(name: str, array: Any) -> str:
    import numpy as np

    parts = [f"{name}: numpy.ndarray, shape {'x'.join(map(str, array.shape)) or '()'}, dtype {array.dtype}, "
             f"{human_bytes(array.nbytes)}"]
    if array.size and (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        parts.append(f"min {np.nanmin(array)}, max {np.nanmax(array)}")
    parts.append(np.array2string(array, threshold=200, edgeitems=3, max_line_width=120))
    return "\n".join(parts)


def notebook_history(shell: Any, n: int = 10) -> Answer:
    """The last ``n`` executed cells' sources and short outputs, from IPython's history."""
    if shell is None or getattr(shell, "history_manager", None) is None:
        return Answer.error("notebook_history needs IPython: this Python is not running in a notebook kernel.")
    n = max(1, min(int(n), 100))
    inputs = shell.history_manager.input_hist_raw
    outputs = shell.history_manager.output_hist
    redactor = namespace_redactor(shell.user_ns)
    first = max(1, len(inputs) - n)
    parts = []
    for number in range(first, len(inputs)):
        parts.append(f"In [{number}]:\n{cap_text(inputs[number], 4_000)}")
        if number in outputs:
            parts.append(f"Out[{number}]: {cap_text(_repr(outputs[number]), OUTPUT_CHARS)}")
    if not parts:
        return Answer.text("No cells have run yet.")
    return Answer.text(redactor.text("\n".join(parts)))
