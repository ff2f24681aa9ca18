"""The reading tools over the user's namespace: list_variables, inspect_variable, notebook_history.

Every function here runs on the kernel thread (through ``_loop.on_kernel_thread``), never copies a
big object whole, and runs none of the user's code but the ``repr()`` of a plain object that
inspect_variable documents (answers.py says how objects are looked at without it): a length only
for exact builtin containers; sizes from nbytes / memory_usage(deep=False) for library types and
from the builtin base's ``__sizeof__`` otherwise; a DataFrame is summarised from its head, a column
sample and per-column counts, its cells, labels and odd objects shown through answers.MaskedView
(secret-named columns, rows and Series masked), and described only where its values are numbers,
dates or plain strings (describe() hashes and compares values). Every text is masked with the
kernel's memory of secrets (secrets.py), fed at each call.
"""

from __future__ import annotations

import difflib
import itertools
import sys
import types
import warnings
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Mapping
from typing import Any

from .._redact import MASK
from . import secrets
from .answers import (Answer, Caps, MaskedView, builtin_base, cap_text, current_shell, has_base, is_library, library,
                      masked_value, namespace_redactor, render, secret_name, shell_of, type_name, walk_namespace)
from .pictures import picture
from .secrets import MEMORY, mask_source

__all__ = ["HIDDEN_NAMES", "current_shell", "inspect_variable", "list_variables", "notebook_history", "user_variables"]

HIDDEN_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})
# Only these exact types are asked their length (len() of anything else may run the user's __len__).
_LENGTH_TYPES = {id(kind): kind for kind in (str, bytes, bytearray, list, tuple, dict, set, frozenset, range, deque,
                                             OrderedDict, defaultdict, Counter)}
_ARRAY_MODULES = frozenset({"numpy", "pandas", "polars", "torch", "xarray", "jax", "jaxlib", "pyarrow", "dask",
                            "tensorflow"})
MAX_LISTED = 2_000  # variables in one listing
MAX_COLUMNS = 60  # columns described one by one
MAX_ROWS = 100  # rows a head may show
# describe() of a bigger frame (and its null counts past FULL_SCAN_BYTES) use a seeded sample of this many
# rows: its percentiles cost a partition of every column, 300 ms for 200,000 rows x 20 columns here.
SAMPLE_ROWS = 50_000
FULL_SCAN_BYTES = 1 << 30  # null counts scan the whole frame up to this size
OUTPUT_CHARS = 500  # of one history entry's output
SOURCE_CHARS = 4_000  # of one history entry's source
SECTION_CHARS = 7_000  # of a frame's head and of its describe(), so that both fit in one answer
CELL_CAPS = Caps(items=5, depth=2, nodes=40, chars=200, string=200)  # one table cell, one label
OUTPUT_CAPS = Caps(items=20, depth=4, nodes=400, chars=OUTPUT_CHARS, string=OUTPUT_CHARS)


def user_variables(namespace: Mapping[str, Any], hidden: Any = ()) -> dict[str, Any]:
    """The names a user defined: no modules, no IPython internals, no ``_`` names."""
    return {name: value for name, value in list(namespace.items())
            if type(name) is str and not name.startswith("_") and name not in HIDDEN_NAMES and name not in hidden
            and not has_base(type(value), types.ModuleType)}


def _shape(value: Any) -> list[int] | None:
    if library(type(value)) not in _ARRAY_MODULES:
        return None
    try:
        return [int(n) for n in value.shape]
    except Exception:  # noqa: BLE001 - a shape we cannot read is left out
        return None


def _size(value: Any) -> int | None:
    """Approximate bytes in memory, never by walking the object nor by asking the user's code."""
    kind = type(value)
    try:
        base, root = builtin_base(kind), library(kind)
        if root == "pandas" and is_library(value, "pandas", "DataFrame"):
            return int(value.memory_usage(index=True, deep=False).sum())
        if root == "pandas" and is_library(value, "pandas", "Series"):
            return int(value.memory_usage(index=True, deep=False))
        if root in _ARRAY_MODULES:
            nbytes = getattr(value, "nbytes", None)
            if type(nbytes) is int:
                return nbytes
        # A class defined in C (a builtin, a library's) sizes itself; a Python class is sized by its C base.
        return sys.getsizeof(value) if base is kind else int(base.__sizeof__(value))
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
    entry: dict[str, Any] = {"name": name, "type": type_name(value)}
    shape = _shape(value)
    if shape == []:  # a numpy scalar or a 0-d array: its value says more than an empty shape
        entry["shape"] = shape
        number = _number(name, value)
        if number is not None:
            entry["value"] = number
    elif shape is not None:
        entry["shape"] = shape
    elif _LENGTH_TYPES.get(id(type(value))) is type(value):
        try:
            entry["length"] = len(value)
        except OverflowError:  # range(10**30)
            pass
    entry["size_bytes"] = _size(value)
    return entry


def _number(name: str, value: Any) -> str | None:
    """A numpy number's (or a 0-d numeric array's) value as text, unless its name marks it a secret."""
    if secret_name(name) or not (is_library(value, "numpy", "generic") or is_library(value, "numpy", "ndarray")):
        return None
    try:
        if value.dtype.kind not in "biufc":
            return None
        return repr(value.item())
    except Exception:  # noqa: BLE001 - a value we cannot read is listed without it
        return None


def _extent(entry: Mapping[str, Any]) -> str:
    """How big a listed variable is, in words: shape, length, or a scalar's value."""
    if entry.get("shape") == []:
        what = "0-d array" if entry["type"].endswith("ndarray") else "scalar"
        return f"{what} {entry['value']}" if "value" in entry else what
    if "shape" in entry:
        return "shape " + "x".join(str(n) for n in entry["shape"])
    return f"length {entry['length']}" if "length" in entry else ""


def list_variables(namespace: Mapping[str, Any], hidden: Any = ()) -> Answer:
    secrets.refresh(namespace, shell_of(namespace))  # shows no value: the memory is fed, not used
    found = user_variables(namespace, hidden)
    entries = [describe_variable(name, value) for name, value in itertools.islice(found.items(), MAX_LISTED)]
    if not entries:
        return Answer.text("No user variables are defined yet.", structured={"variables": []})
    lines = [f"{len(found)} variable{'s' if len(found) != 1 else ''} (name, type, shape or length, memory):"]
    if len(found) > MAX_LISTED:
        lines.append(f"[cut: the first {MAX_LISTED:,} of {len(found):,} variables are listed]")
    for entry in entries:
        extent = _extent(entry)
        lines.append(f"- {entry['name']}: {entry['type']}{', ' + extent if extent else ''}, "
                     f"{human_bytes(entry['size_bytes'])}")
    return Answer.text("\n".join(lines), structured={"variables": entries})


def unknown_variable(name: str, namespace: Mapping[str, Any], hidden: Any = ()) -> Answer:
    close = difflib.get_close_matches(name, list(user_variables(namespace, hidden)), n=5, cutoff=0.5)
    hint = f" Close names: {', '.join(close)}." if close else " list_variables shows the names there are."
    return Answer.error(f"No variable named {name!r} in the kernel.{hint}")


def inspect_variable(namespace: Mapping[str, Any], name: str, rows: int = 10, hidden: Any = ()) -> Answer:
    if type(name) is not str or name not in namespace or name not in user_variables({name: namespace[name]},
                                                                                   hidden):
        return unknown_variable(str(name), namespace, hidden)
    value = namespace[name]
    redactor = namespace_redactor(namespace)  # feeds the kernel's memory of secrets first
    if secret_name(name):
        return Answer.text(f"{masked_value(name)}; type {type_name(value)}")
    rows = max(0, min(int(rows), MAX_ROWS))
    image = picture(value)
    if image is not None:
        return image
    return Answer.text(redactor.text(_describe_text(name, value, rows)))


def _describe_text(name: str, value: Any, rows: int) -> str:
    if is_library(value, "pandas", "DataFrame"):
        return _frame_text(name, value, rows)
    if is_library(value, "pandas", "Series"):
        return _series_text(name, value, rows)
    if is_library(value, "numpy", "ndarray"):
        return _array_text(name, value)
    return f"{name}: {type_name(value)}\n{render(value)}"


# -- tables ------------------------------------------------------------------------------------

def _label(label: Any) -> str:
    """A column or row label as text: strings as they are, tuples (MultiIndex) joined, the rest shown."""
    if type(label) is tuple:
        return " / ".join(_label(part) for part in label[:8])
    if type(label) is str:
        return MaskedView(CELL_CAPS).text(label)
    return render(label, CELL_CAPS)


def _cell(value: Any) -> Any:
    if value is None or type(value) is float:
        return value
    if type(value) is str:
        return MaskedView(CELL_CAPS).text(value)
    return render(value, CELL_CAPS)


def _columns(data: Any) -> list[Any]:
    """A frame's columns by position (duplicate names), or a Series as its one column: never a new frame
    made of a Series (pandas then looks at each odd value's ``__class__``)."""
    if is_library(data, "pandas", "Series"):
        return [data]
    return [data.iloc[:, position] for position in range(data.shape[1])]


def _table(data: Any, labels: list[str], secret: list[bool]) -> Any:
    """A frame's head to print: masked secret-named columns and rows, every other cell and label as text
    made by us (pandas would call str() on odd objects), numbers and dates left to pandas."""
    import pandas as pd  # only for a DataFrame the user has, so pandas is loaded already

    index = data.index
    plain_index = index.dtype.kind in "iufbmM"
    secret_rows = _secret_rows(index) or [False] * len(index)
    columns = {}
    for position, column in enumerate(_columns(data)):
        if secret[position]:
            values: Any = [None if missing else MASK for missing in _missing(column)]
        elif column.dtype.kind not in "iufbmM" or any(secret_rows):
            values = [_cell(value) for value in column]
        else:
            values = column.to_numpy()
        if any(secret_rows):
            values = [MASK if hidden else value for hidden, value in zip(secret_rows, values)]
        columns[position] = values
    table = pd.DataFrame(columns, index=index if plain_index else [_label(label) for label in index])
    table.columns = labels
    return table


# Values describe() may hash and compare without running user code (NaN is a float, None a missing value).
_PLAIN_VALUES = frozenset(id(kind) for kind in (str, float, bool, type(None)))


def _plain(values: Any) -> bool:
    """Whether every value is a str, a float, a bool or None (by exact type: no isinstance, which reads
    ``__class__``; pandas' infer_dtype does)."""
    return all(id(type(value)) in _PLAIN_VALUES for value in values)


def _missing(column: Any) -> Any:
    """Which of a Series' values are missing, from its array: Series.isna() makes a Series named as this one,
    and pandas hashes a Series' name (a user object's __hash__, for a column named by one)."""
    import pandas as pd  # only for a DataFrame the user has, so pandas is loaded already

    return pd.isna(_array(column))


def _array(column: Any) -> Any:
    """A Series' values as pandas' array (a column already made an array is one)."""
    return column.array if is_library(column, "pandas", "Series") else column


def _describable(column: Any) -> bool:
    """Whether describe() of the column runs no user code: numbers, dates, plain strings."""
    import pandas as pd  # only for a DataFrame the user has, so pandas is loaded already

    dtype = column.dtype
    if dtype.kind in "iufcmM" or isinstance(dtype, pd.StringDtype):
        return True
    if isinstance(dtype, pd.CategoricalDtype):
        return _plain(dtype.categories)
    return dtype.kind == "O" and _plain(column)


def _secret_rows(index: Any) -> list[bool] | None:
    """Which rows' labels name a secret (a transposed config: ``api_key`` as a row); None when none does."""
    if index.dtype.kind in "iufbmM":
        return None
    found = [secret_name(label) for label in index]
    return found if any(found) else None


def _describe(sample: Any, labels: list[str], secret: list[bool]) -> str:
    import numpy as np  # only for an array the user has, so numpy is loaded already
    import pandas as pd  # only for a DataFrame the user has, so pandas is loaded already

    rows = _secret_rows(sample.index)
    columns, kept, left_out = {}, [], []
    for position, column in enumerate(_columns(sample)):
        if rows is not None:  # describe()'s top and extremes would show their values
            column = _array(column)[np.array([not hidden for hidden in rows], dtype=bool)]
        if secret[position]:
            columns[position] = pd.Series(np.where(_missing(column), None, MASK), dtype=object)
        elif _describable(column):
            columns[position] = _array(column)  # not a Series: a new Series would hash its name
        else:
            left_out.append(labels[position])
            continue
        kept.append(labels[position])
    note = f"\n(not described, their values are objects: {', '.join(left_out)})" if left_out else ""
    if rows is not None:
        hidden = sum(rows)
        note += (f"\n({hidden:,} row{'s' if hidden != 1 else ''} whose label{'s mark them' if hidden != 1 else ' marks it'}"
                 " a secret left out)")
    if not columns:
        return "(no column describe() can summarise)" + note
    frame = pd.DataFrame(columns)
    frame.columns = kept
    try:
        return cap_text(frame.describe().to_string(max_cols=30, line_width=150), SECTION_CHARS) + note
    except Exception as exc:  # noqa: BLE001 - columns describe() cannot handle are reported
        return f"(describe() failed: {type(exc).__name__}: {exc})" + note


def _frame_text(name: str, df: Any, rows: int) -> str:
    total_rows, total_cols = df.shape
    shown = df.iloc[:, :MAX_COLUMNS]
    labels = [_label(label) for label in shown.columns]
    secret = [secret_name(label) for label in shown.columns]
    sampled = total_rows > SAMPLE_ROWS
    sample = _sample(shown) if sampled else shown
    size = _size(df)
    nulls_from = shown if size is not None and size <= FULL_SCAN_BYTES else sample
    # Column by column, by position (duplicate names): isna() of the whole frame is a frame of its size.
    nulls = [int(_missing(nulls_from.iloc[:, position]).sum()) for position in range(shown.shape[1])]
    dtypes = list(shown.dtypes)
    parts = [f"{name}: pandas.DataFrame, {total_rows:,} rows x {total_cols:,} columns, {human_bytes(size)} (shallow)"]
    more = f" (the first {MAX_COLUMNS} of {total_cols})" if total_cols > MAX_COLUMNS else ""
    in_sample = " (in a sample)" if nulls_from is sample and sampled else ""
    parts.append(f"\ncolumns{more}: name, dtype, nulls{in_sample}")
    for position, label in enumerate(labels):
        masked = " (its name marks it a secret: values masked)" if secret[position] else ""
        parts.append(f"- {label}: {dtypes[position]}, {int(nulls[position])}{masked}")
    if rows:
        head = _table(shown.head(rows), labels, secret).to_string(max_colwidth=40, max_cols=30, line_width=150)
        parts.append(f"\nhead({rows}):\n{cap_text(head, SECTION_CHARS)}")
    parts.append("\ndescribe()" + (f" over a sample of {SAMPLE_ROWS:,} rows" if sampled else "") + ":")
    parts.append(_describe(sample, labels, secret))
    return "\n".join(parts)


def _sample(data: Any) -> Any:
    """SAMPLE_ROWS rows picked at random (seeded, in their order): a take of those rows only."""
    import numpy as np  # only for an array the user has, so numpy is loaded already

    rows = np.random.default_rng(0).choice(len(data), size=SAMPLE_ROWS, replace=False)
    rows.sort()
    return data.take(rows)


def _series_text(name: str, series: Any, rows: int) -> str:
    sampled = len(series) > SAMPLE_ROWS
    sample = _sample(series) if sampled else series
    label, secret = _label(series.name), secret_name(series.name)
    masked = " (its name marks it a secret: values masked)" if secret else ""
    parts = [f"{name}: pandas.Series {label}, {len(series):,} values, dtype {series.dtype}, "
             f"{int(_missing(sample).sum())} nulls" + (" in a sample" if sampled else "") + masked]
    if rows:
        head = _table(series.head(rows), [label], [secret]).to_string(max_colwidth=40, line_width=150)
        parts.append(f"\nhead({rows}):\n{cap_text(head, SECTION_CHARS)}")
    parts.append("\ndescribe():\n" + _describe(sample, [label], [secret]))
    return "\n".join(parts)


def _array_text(name: str, array: Any) -> str:
    import numpy as np  # only for an array the user has, so numpy is loaded already

    parts = [f"{name}: numpy.ndarray, shape {'x'.join(map(str, array.shape)) or '()'}, dtype {array.dtype}, "
             f"{human_bytes(array.nbytes)}"]
    fields = array.dtype.names or ()
    hidden = [field for field in fields if secret_name(field)]
    if hidden:
        kept = [field for field in fields if field not in hidden]
        parts.append(f"fields {', '.join(hidden)}: {MASK} (their names mark them secrets)")
        if not kept:
            return "\n".join(parts)
        array = array[kept]
    if array.dtype.kind == "O":
        parts.append(render(list(array.flat[:Caps.items + 1])) if array.size else "[]")
        return "\n".join(parts)
    if array.size and (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # an all-NaN array: its min is nan, said without a warning
            parts.append(f"min {np.nanmin(array)}, max {np.nanmax(array)}")
    parts.append(np.array2string(array, threshold=200, edgeitems=3, max_line_width=120))
    return "\n".join(parts)


# -- history -----------------------------------------------------------------------------------

def notebook_history(shell: Any, n: int = 10) -> Answer:
    """The last ``n`` executed cells' sources and short outputs, from IPython's history, masked as the other
    tools mask: literals in secret places (secrets.mask_source), every secret value the kernel has seen,
    outputs shown by a MaskedView (or ``***`` when the cell's last expression names a secret)."""
    if shell is None or getattr(shell, "history_manager", None) is None:
        return Answer.error("notebook_history needs IPython: this Python is not running in a notebook kernel.")
    n = max(1, min(int(n), 100))
    inputs = shell.history_manager.input_hist_raw
    outputs = shell.history_manager.output_hist
    redactor = secrets.refresh(shell.user_ns, shell, walk=walk_namespace)
    first = max(1, len(inputs) - n)
    parts = []
    for number in range(first, len(inputs)):
        source = inputs[number] if type(inputs[number]) is str else ""
        masked, shows_a_secret = mask_source(source[:2 * SOURCE_CHARS])
        parts.append(f"In [{number}]:\n{cap_text(redactor.text(masked), SOURCE_CHARS)}")
        if number in outputs:
            shown = f"{MASK} (the cell shows a secret-named value)" if shows_a_secret else render(outputs[number],
                                                                                                 OUTPUT_CAPS)
            parts.append(f"Out[{number}]: {shown}")
    if not parts:
        return Answer.text("No cells have run yet.")
    return Answer.text(MEMORY.redactor().text("\n".join(parts)))
