"""What a kernel tool answers, and how a user's value is shown in it: bounded, masked, escaped.

- ``Answer``: content blocks as plain dicts. Every text block, and every string of the structured
  content, goes through ``_visible.visible`` when an Answer is made (whichever constructor made it,
  run_code's ``Capture.answer`` included), so an answer always encodes as UTF-8 and shows NUL,
  control, bidi characters and lone surrogates (an undecodable file name) as escapes.
- Looking at user objects without running their code: type names, MROs, instance attributes and
  slots are read through the C-level descriptors of ``type`` and ``object``; never through the
  object's ``__getattr__``, properties, ``__class__``, ``__len__`` or ``__sizeof__``. A library type
  (numpy, pandas...) is recognised only when its module really defines it (``library``), so a user's
  subclass is a user object.
- ``MaskedView``: one rendering of a value, repr-like. Builtin containers (any dict, list, tuple,
  set, deque, their subclasses), dataclasses, named tuples and namespaces are walked by us, with a
  visited path (cycles show as ``[...]``) and caps on items per container, depth, values and
  characters; a value under a secret-named key, field or attribute (secrets.secret_name) shows as
  ``***`` and is remembered (secrets.MEMORY); any other object shows its ``repr()`` (the one user
  method a reading tool calls), after its attributes were searched for secrets. Every remembered
  secret value is masked in the result, each string before it is cut (so no prefix of one shows).
  Whatever was cut says so: ``[cut: ...]``.

Answers and views are built on the kernel thread; Answer is plain data any thread may read.

Process-wide: ``_LIBRARY_VERDICTS``, which library a class of the user's objects belongs to, by the
class's id with a weak reference to it (an id reused after the class is freed is not mistaken); a
cache over classes, which are process-wide themselves. Filled on the kernel thread as answers are
made, never emptied, bounded at 4096 classes.
"""

from __future__ import annotations

import gc
import itertools
import re
import sys
import threading
import types
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._redact import MASK
from .._visible import visible
from . import secrets
from .secrets import MEMORY, secret_name, secret_strength

__all__ = ["IMAGE_LIMIT", "TEXT_LIMIT", "Answer", "Caps", "MaskedView", "busy_message", "cap_text", "collect_secrets",
           "current_shell", "has_base", "library", "masked_value", "namespace_redactor", "render", "secret_name",
           "shell_of", "type_name"]

TEXT_LIMIT = 20_000  # characters of text in one answer
IMAGE_LIMIT = 1_000_000  # bytes of one PNG, before base64
STRUCTURED_STRINGS = 50_000  # strings of structured content escaped; the rest are left out
_PLAIN_TEXT = re.compile(r"[ -~]{0,200}")  # short printable ASCII: nothing to escape, nothing to cut


@dataclass
class Answer:
    """Content blocks ({"type": "text", "text"} or {"type": "image", "data", "mimeType"}), whether it is
    a tool error, and optional structured content. Text is escaped and capped when the Answer is made."""

    content: list[dict[str, Any]] = field(default_factory=list)
    is_error: bool = False
    structured: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.content = [_shown_block(block) for block in self.content]
        if self.structured is not None:
            self.structured = _shown_data(self.structured, [STRUCTURED_STRINGS])

    @classmethod
    def text(cls, text: str, *, structured: dict[str, Any] | None = None) -> Answer:
        return cls([{"type": "text", "text": cap_text(text)}], structured=structured)

    @classmethod
    def error(cls, text: str) -> Answer:
        return cls([{"type": "text", "text": cap_text(text)}], is_error=True)

    def text_of(self) -> str:
        return "\n".join(block["text"] for block in self.content if block["type"] == "text")


def _escaped(text: Any) -> str:
    if type(text) is not str:
        text = str.__str__(text) if has_base(type(text), str) else repr(text)
    shown = visible(text)  # a carriage return too: a lone one redraws the line over what came before
    # Escapes make text longer (up to six characters for one): cut again past the limit and its note.
    return cap_text(shown) if len(shown) > TEXT_LIMIT + 200 else shown


def _shown_block(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") == "text":
        return {**block, "text": _escaped(block.get("text", ""))}
    return block


def _shown_data(value: Any, budget: list[int]) -> Any:
    """Structured content (JSON-like, ours) with every string, keys too, escaped; at most ``budget`` values."""
    budget[0] -= 1
    kind = type(value)
    if budget[0] < 0:
        return None
    if kind is str:
        return value if _PLAIN_TEXT.fullmatch(value) else _escaped(value)
    if kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, dict):
        return {_shown_data(key, budget): _shown_data(item, budget) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shown_data(item, budget) for item in value]
    return value  # not JSON: left for the server to notice (it sends the text instead)


def cap_text(text: str, limit: int = TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: the first {limit:,} of {len(text):,} characters are shown]"


def busy_message(waited: float) -> str:
    return (f"the kernel is busy running a cell: waited {waited:g} s for it to finish; "
            "try again when the user's cell is done")


def masked_value(name: str) -> str:
    return f"{name} = {MASK} (masked: its name marks it a secret)"


def current_shell() -> Any:
    """The IPython shell this process runs, or None (a plain script)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def shell_of(namespace: Mapping[str, Any]) -> Any:
    """The IPython shell whose user namespace ``namespace`` is, or None."""
    shell = current_shell()
    return shell if shell is not None and getattr(shell, "user_ns", None) is namespace else None


class KernelRedactor:
    """Masks every secret the kernel has seen. Made on the kernel thread (it feeds the memory from the
    namespace, the environment and the history); ``text`` on that thread first looks at the
    namespace's secret-named names again (run_code may have just made one), elsewhere only masks."""

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        self._namespace = namespace
        self._thread = threading.get_ident()
        secrets.refresh(namespace, shell_of(namespace), walk=walk_namespace)

    def text(self, text: str) -> str:
        if threading.get_ident() == self._thread:
            secrets.refresh(self._namespace)
        return MEMORY.redactor().text(text)


def namespace_redactor(namespace: Mapping[str, Any]) -> KernelRedactor:
    """Masks the environment's secrets and every secret value the kernel has seen (kernel thread)."""
    return KernelRedactor(namespace)


# -- looking at objects without running their code --------------------------------------------

_MRO = type.__dict__["__mro__"]
_CLASS_DICT = type.__dict__["__dict__"]
_QUALNAME = type.__dict__["__qualname__"]
_MODULE = type.__dict__["__module__"]
_FLAGS = type.__dict__["__flags__"]
_HEAPTYPE = 1 << 9
_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)
LIBRARIES = frozenset({"numpy", "pandas", "polars", "torch", "xarray", "jax", "jaxlib", "pyarrow", "dask",
                       "tensorflow", "matplotlib", "PIL", "scipy"})


def mro(kind: type) -> tuple[type, ...]:
    return _MRO.__get__(kind, type)  # type: ignore[no-any-return]


def has_base(kind: type, base: type) -> bool:
    """``issubclass(kind, base)`` by identity over the MRO (no metaclass hook, no ``__eq__``)."""
    if kind is base:
        return True
    for klass in _MRO.__get__(kind, type):
        if klass is base:
            return True
    return False


def _is_one_of(kind: type, kinds: tuple[type, ...]) -> bool:
    return any(kind is other for other in kinds)


def _class_dict(kind: type) -> Mapping[str, Any]:
    return _CLASS_DICT.__get__(kind, type)  # type: ignore[no-any-return]


def _names(kind: type) -> tuple[str, str]:
    module, qualname = _MODULE.__get__(kind, type), _QUALNAME.__get__(kind, type)
    return (module if type(module) is str else "?"), (qualname if type(qualname) is str else "?")


def type_name(value: Any) -> str:
    module, qualname = _names(type(value))
    return qualname if module == "builtins" else f"{module.partition('.')[0]}.{qualname}"


def builtin_base(kind: type) -> type:
    """The first class of ``kind``'s MRO that is not defined in Python (object at worst)."""
    for klass in mro(kind):
        if not _FLAGS.__get__(klass, type) & _HEAPTYPE:
            return klass
    return object


# id(class) -> (a weak reference to it, its verdict): a freed class's id reused by another is not mistaken.
_LIBRARY_VERDICTS: dict[int, tuple[Any, str | None]] = {}


def library(kind: type) -> str | None:
    """The library (``numpy``, ``pandas``...) whose own class ``kind`` is, found under the name it gives;
    None for anything else, a user's subclass of a library class included."""
    known = _LIBRARY_VERDICTS.get(id(kind))
    if known is not None and known[0]() is kind:
        return known[1]
    module, qualname = _names(kind)
    root = module.partition(".")[0]
    owner: Any = sys.modules.get(module) if root in LIBRARIES else None
    for part in qualname.split(".") if owner is not None else ():
        owner = getattr(owner, part, None)  # the library's module and classes: library code
    verdict = root if owner is kind else None
    if len(_LIBRARY_VERDICTS) < 4096:
        _LIBRARY_VERDICTS[id(kind)] = (weakref.ref(kind), verdict)
    return verdict


def is_library(value: Any, module: str, name: str) -> bool:
    """Whether ``value`` is an instance of the library class ``module.name`` (or of one of that library's
    own subclasses of it), never of a user's subclass."""
    base = getattr(sys.modules.get(module), name, None)
    return isinstance(base, type) and library(type(value)) is not None and has_base(type(value), base)


def attributes(value: Any, limit: int = 200) -> list[tuple[str, Any]]:
    """An object's instance attributes (its ``__dict__`` and slots), read without its own code."""
    found: list[tuple[str, Any]] = []
    kind = type(value)
    classes = mro(kind)
    for klass in classes:
        descriptor = _class_dict(klass).get("__dict__")
        if descriptor is None:
            continue
        if _is_one_of(type(descriptor), _DESCRIPTORS):
            try:
                own = descriptor.__get__(value, kind)
            except Exception:  # noqa: BLE001 - no instance dict after all
                own = None
            if own is not None and has_base(type(own), dict):
                found.extend(itertools.islice(dict.items(own), limit))
        break
    for klass in classes:
        if not _FLAGS.__get__(klass, type) & _HEAPTYPE or len(found) >= limit:
            continue
        for name, descriptor in list(_class_dict(klass).items()):
            if type(descriptor) is types.MemberDescriptorType and name not in ("__dict__", "__weakref__"):
                try:
                    found.append((name, descriptor.__get__(value, kind)))
                except Exception:  # noqa: BLE001 - an unset slot
                    continue
    return found[:limit]


def _class_attribute(kind: type, name: str) -> Any:
    for klass in mro(kind):
        found = _class_dict(klass).get(name)
        if found is not None:
            return found
    return None


def _dataclass_fields(kind: type) -> list[str] | None:
    fields = _class_attribute(kind, "__dataclass_fields__")
    if type(fields) is not dict:
        return None
    return [name for name, spec in fields.items() if type(name) is str and getattr(spec, "repr", True) is True]


def _namedtuple_fields(kind: type) -> tuple[str, ...] | None:
    fields = _class_attribute(kind, "_fields") if has_base(kind, tuple) and kind is not tuple else None
    return fields if type(fields) is tuple and all(type(name) is str for name in fields) else None


# -- the masked, bounded view ------------------------------------------------------------------

@dataclass(frozen=True)
class Caps:
    """How much of a value a view shows."""

    items: int = 50  # of one container
    depth: int = 6
    nodes: int = 5_000  # values rendered in all
    chars: int = TEXT_LIMIT - 1_000
    string: int = 2_000  # characters of one string, bytes or repr()


_ATOMS = {id(kind): kind for kind in (type(None), bool, float, complex, range, type(...), type(NotImplemented))}
_CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type)
_SEQUENCES = (list, tuple, set, frozenset, deque)
_OPENERS = {list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"), frozenset: ("frozenset({", "})"),
            deque: ("deque([", "])")}


class _Full(Exception):
    """The view reached its character or value cap: rendering stops where it is."""


class MaskedView:
    """One rendering of one value (see the module docstring). Kernel thread."""

    def __init__(self, caps: Caps = Caps()) -> None:
        self.caps = caps
        self.nodes = 0
        self.cuts: dict[str, int] = {}
        self._parts: list[str] = []
        self._size = 0
        self._path: set[int] = set()
        self._longest = MEMORY.longest()

    def render(self, value: Any) -> str:
        try:
            self._render(value, 0)
        except _Full:
            pass
        text = MEMORY.redactor().text("".join(self._parts))
        if self.cuts:
            text += "\n[cut: " + ", ".join(self._cut_notes()) + "]"
        return text

    def _cut_notes(self) -> Iterable[str]:
        caps, cuts = self.caps, self.cuts
        if "items" in cuts:
            yield f"{cuts['items']:,} items past the first {caps.items} of a container"
        if "depth" in cuts:
            yield f"{cuts['depth']:,} values nested deeper than {caps.depth} levels"
        if "string" in cuts:
            yield f"{cuts['string']:,} texts past their first {caps.string:,} characters"
        if "nodes" in cuts:
            yield f"everything after the first {caps.nodes:,} values"
        if "chars" in cuts:
            yield f"everything after the first {caps.chars:,} characters"

    def _cut(self, why: str, count: int = 1) -> None:
        self.cuts[why] = self.cuts.get(why, 0) + count

    def _emit(self, text: str) -> None:
        room = self.caps.chars - self._size
        if len(text) > room:
            self._parts.append(text[:max(0, room)] + " [cut]")
            self._cut("chars")
            raise _Full
        self._parts.append(text)
        self._size += len(text)

    def _render(self, value: Any, depth: int) -> None:
        self.nodes += 1
        if self.nodes > self.caps.nodes:
            self._emit("[cut]")
            self._cut("nodes")
            raise _Full
        kind = type(value)
        if _ATOMS.get(id(kind)) is kind:
            self._emit(repr(value))
        elif kind is str or has_base(kind, str):
            self._emit(self.text(str.__str__(value), quoted=True))
        elif has_base(kind, int):
            self._emit(_int_text(value))
        elif has_base(kind, float):
            self._emit(float.__repr__(value))
        elif has_base(kind, bytes) or has_base(kind, bytearray):
            self._emit(self._bytes(value))
        elif id(value) in self._path:
            self._emit("{...}" if has_base(kind, dict) else "[...]" if has_base(kind, list) else "<...>")
        elif depth >= self.caps.depth:
            self._emit(f"<{type_name(value)}>")
            self._cut("depth")
        else:
            self._path.add(id(value))
            try:
                self._container(value, kind, depth)
            finally:
                self._path.discard(id(value))

    def _container(self, value: Any, kind: type, depth: int) -> None:
        fields = None if library(kind) else _dataclass_fields(kind)
        if has_base(kind, dict):
            prefix = "" if kind is dict else f"{type_name(value)}("
            self._items(dict.items(value), dict.__len__(value), depth, prefix + "{", "}" + (")" if prefix else ""))
        elif kind is types.MappingProxyType and _proxied(value) is not None:
            proxied = _proxied(value)
            self._items(dict.items(proxied), dict.__len__(proxied), depth, "mappingproxy({", "})")
        elif fields is not None or has_base(kind, types.SimpleNamespace):
            pairs = attributes(value, self.caps.items + 1)
            if fields is not None:
                present = dict(pairs)
                pairs = [(name, present[name]) for name in fields if name in present]
            name = "namespace" if kind is types.SimpleNamespace else type_name(value)
            self._fields(name, pairs, len(pairs), depth)
        elif _namedtuple_fields(kind) is not None:
            names = _namedtuple_fields(kind) or ()
            pairs = list(zip(names, tuple.__iter__(value)))
            self._fields(type_name(value), pairs, len(pairs), depth)
        elif any(has_base(kind, base) for base in _SEQUENCES):
            base = next(base for base in _SEQUENCES if has_base(kind, base))
            opener, closer = _OPENERS[base]
            if kind is not base:
                opener, closer = f"{type_name(value)}({opener}", closer + ")"
            size = base.__len__(value)
            if base is tuple and size == 1:
                closer = "," + closer
            self._sequence(base.__iter__(value), size, depth, opener, closer)
        else:
            self._other(value, depth)

    def _items(self, items: Iterable[tuple[Any, Any]], size: int, depth: int, opener: str, closer: str) -> None:
        self._emit(opener)
        for index, (key, item) in enumerate(itertools.islice(items, self.caps.items)):
            if index:
                self._emit(", ")
            self._render(key, depth + 1)
            self._emit(": ")
            self._named(key, item, depth)
        self._more(size, closer)

    def _fields(self, name: str, pairs: list[tuple[str, Any]], size: int, depth: int) -> None:
        self._emit(f"{name}(")
        for index, (key, item) in enumerate(pairs[:self.caps.items]):
            self._emit(f"{', ' if index else ''}{key}=")
            self._named(key, item, depth)
        self._more(size, ")")

    def _named(self, key: Any, item: Any, depth: int) -> None:
        strength = secret_strength(key)
        if strength and not (item is None or type(item) is str and not item):
            self._emit(f"'{MASK}'")
            collect_secrets([item], under=(key, strength))
        else:
            self._render(item, depth + 1)

    def _sequence(self, items: Iterable[Any], size: int, depth: int, opener: str, closer: str) -> None:
        self._emit(opener)
        for index, item in enumerate(itertools.islice(items, self.caps.items)):
            if index:
                self._emit(", ")
            self._render(item, depth + 1)
        self._more(size, closer)

    def _more(self, size: int, closer: str) -> None:
        if size > self.caps.items:
            self._emit(f", ... [cut: {size - self.caps.items:,} more]")
            self._cut("items", size - self.caps.items)
        self._emit(closer)

    def text(self, text: str, *, quoted: bool = False) -> str:
        """A string masked (before it is cut, so no part of a secret shows) and cut to the caps."""
        limit = self.caps.string
        shown = MEMORY.redactor().text(text[:limit + self._longest]) if self._longest else text[:limit + 1]
        cut = len(text) > limit
        shown = shown[:limit]
        if quoted:
            shown = repr(shown)
        if cut:
            self._cut("string")
            shown += f"... [cut: {len(text):,} characters]"
        return shown

    def _bytes(self, value: Any) -> str:
        base = bytes if has_base(type(value), bytes) else bytearray
        size = base.__len__(value)
        head = bytes(base.__getitem__(value, slice(0, self.caps.string)))
        text = MEMORY.redactor().text(repr(head))
        if size > self.caps.string:
            self._cut("string")
            text += f"... [cut: {size:,} bytes]"
        return text

    def _other(self, value: Any, depth: int) -> None:
        """Any other object: its repr() (documented), after its attributes were searched for secrets."""
        if library(type(value)) is None:
            collect_secrets([value])
        elif library(type(value)) == "pandas":
            value = _masked_pandas(value)
        try:
            text = repr(value)
            text = str.__str__(text)
        except Exception as exc:  # noqa: BLE001 - a broken repr is reported, not raised
            text = f"<its repr raised {type_name(exc)}: {_exception_text(exc)}>"
        self._emit(self.text(text))


def _proxied(proxy: types.MappingProxyType[Any, Any]) -> dict[Any, Any] | None:
    """The dict behind a mappingproxy (read by the garbage collector's C walk: no method of it runs)."""
    referents = gc.get_referents(proxy)
    return referents[0] if len(referents) == 1 and has_base(type(referents[0]), dict) else None


def _int_text(value: int) -> str:
    bits = int.bit_length(value)
    if bits > 30_000:
        return f"<int of {bits:,} bits>"
    return int.__repr__(value)


def _exception_text(exc: BaseException) -> str:
    try:
        return str(exc)[:500]
    except Exception:  # noqa: BLE001 - an exception whose str fails
        return "?"


def _masked_pandas(value: Any) -> Any:
    """A DataFrame or Series inside a container as a one-line summary: pandas' repr cuts long cells before
    any masking could see a whole secret (inspecting the frame itself shows it, masked)."""
    if is_library(value, "pandas", "DataFrame"):
        rows, columns = value.shape
        return _Summary(f"<pandas.DataFrame, {rows:,} rows x {columns:,} columns; inspect it on its own to see it>")
    if is_library(value, "pandas", "Series"):
        return _Summary(f"<pandas.Series, {len(value):,} values, dtype {value.dtype}; inspect it on its own to see it>")
    return value


class _Summary(str):
    """Text shown as it is in place of a value's repr."""

    def __repr__(self) -> str:
        return str.__str__(self)


def render(value: Any, caps: Caps = Caps()) -> str:
    """``value`` shown by a fresh MaskedView under ``caps``."""
    return MaskedView(caps).render(value)


def walk_namespace(roots: list[Any]) -> int:
    """``secrets.refresh``'s walk of a namespace's top-level values, within the refresh's bounds."""
    return collect_secrets(roots, nodes=secrets.WALK_NODES, items=secrets.WALK_ITEMS, depth=secrets.WALK_DEPTH)


def collect_secrets(roots: Iterable[Any], *, under: tuple[Any, int] | None = None, nodes: int = 2_000,
                    items: int = 200, depth: int = 4) -> int:
    """Remember the secret values found in ``roots``: values under secret-named keys, fields and attributes
    (all of a value's strings, when it is under one: ``under`` says the roots are). Each object once (a
    visited set), at most ``nodes`` values looked at, ``items`` per container, ``depth`` levels; the
    containers waiting to be looked at never outnumber what is left of ``nodes``. Returns values looked at."""
    seen: set[int] = set()
    pending: list[tuple[Any, int, tuple[Any, int] | None]] = []
    looked = 0
    for root in roots:
        looked += 1
        if looked > nodes:
            break
        if _collect_leaf(root, under):
            pending.append((root, 0, under))
    while pending:
        value, level, secret = pending.pop()
        if level >= depth or id(value) in seen or library(type(value)) is not None:
            continue
        seen.add(id(value))
        for key, child in _children(value, type(value), items):
            looked += 1
            strength = secret_strength(key) if key is not None else 0
            inherited = (key, strength) if strength else secret
            if _collect_leaf(child, inherited) and looked + len(pending) < nodes:
                pending.append((child, level + 1, inherited))
            if looked >= nodes:
                return looked
    return looked


def _collect_leaf(value: Any, secret: tuple[Any, int] | None) -> bool:
    """Remember ``value`` if it is text under a secret name; whether it is a container to walk."""
    kind = type(value)
    if kind is str or kind is bytes or kind is bytearray:
        if secret is not None:
            MEMORY.remember(secret[0], value, secret[1])
        return False
    return not (_ATOMS.get(id(kind)) is kind or kind is int)


def _children(value: Any, kind: type, items: int) -> list[tuple[Any, Any]]:
    if kind is dict:
        return list(itertools.islice(value.items(), items))
    if kind is list or kind is tuple:
        return [(None, item) for item in value[:items]]
    if kind is types.MappingProxyType:
        value = _proxied(value)
        return list(itertools.islice(dict.items(value), items)) if value is not None else []
    if has_base(kind, dict):
        return list(itertools.islice(dict.items(value), items))
    for base in _SEQUENCES:
        if has_base(kind, base):
            return [(None, item) for item in itertools.islice(base.__iter__(value), items)]
    if any(has_base(kind, other) for other in _CALLABLES):
        return []  # functions, modules and classes: not data
    return attributes(value, items)
