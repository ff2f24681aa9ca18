"""Which names in a kernel hold secrets, and the kernel's memory of the secret values it has seen.

- ``secret_name(name)``: the rule for names in the user's kernel (variables, dict keys, attributes,
  dataclass fields, DataFrame columns, keyword arguments). Word-based, so that ``OPENAI_API_KEY``,
  ``apiKey``, ``hf_token``, ``db_password``, ``client_secret`` are secrets and ``tokenizer``,
  ``max_tokens``, ``author``, ``monkey``, ``token_count`` or ``api_key_path`` are not. Names that
  only end in ``_key`` (``sort_key``) are "weak": their values are masked where they show, but
  remembered (below) only when they look like a key (letters and digits, no spaces), so that
  ``sort_key = "timestamp"`` does not hide every later "timestamp".
- ``MEMORY`` (a ``SecretMemory``): every secret value seen in this process, kept for the kernel's
  lifetime (bounded), so a value stays masked after ``del OPENAI_API_KEY`` and wherever it was
  copied to. It is fed at each tool call (``refresh``) from the environment, the namespace's
  secret-named variables and a bounded walk of its containers, and the notebook's history (string
  literals in secret places, found with ``ast``); after each cell too once ``watch`` is on.
- ``mask_source(source)``: a cell's source with those literals replaced by ``'***'``, for
  notebook_history.

Threads: the memory is mutated on the kernel thread (tool work, the post_run_cell hook) and read by
the loop thread when a timed-out run_code's answer is made: one lock guards it. The rest is pure.

Process-wide, besides ``MEMORY``: ``_VERDICTS``, how strongly a variable name names a secret (a
pure function of the name, remembered; bounded by ``_VERDICTS_KEPT``, never emptied, filled from any
thread one dict operation at a time); ``_WATCHED``, the shells (by id) whose cells already end with
remembering their secret-named values, so that each shell is watched once however many sessions
open tools on it (added on the kernel thread, never removed: a shell lives as long as its kernel).
"""

from __future__ import annotations

import ast
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .._redact import MASK, MIN_SECRET_LENGTH, Redactor, secret_values

__all__ = ["MEMORY", "SecretMemory", "mask_source", "refresh", "secret_name", "source_secrets", "watch"]

# A name's words: snake_case, kebab-case, camelCase, SCREAMING_CASE and digits.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_STRONG_PARTS = ("passw", "secret", "credential", "apikey", "privatekey", "accesskey", "bearer")
_STRONG_WORDS = frozenset({"pwd", "passphrase", "creds", "cookie", "cookies", "auth", "authorization", "jwt"})
_KEY_OWNERS = frozenset({"api", "private", "secret", "access", "signing", "encryption", "master", "ssh"})
# A last word that makes the name about a secret rather than the secret itself (as _redact's _NOT_SECRET).
_NOT_SECRET_TAILS = frozenset({"count", "counts", "id", "ids", "type", "types", "len", "length", "limit", "limits",
                               "usage", "size", "sizes", "index", "indices", "file", "files", "path", "paths", "dir",
                               "url", "uri", "name", "names", "env", "var", "sock", "socket", "field", "fields",
                               "column", "columns", "col", "cols", "prefix", "suffix"})
_VERDICTS: dict[str, int] = {}
_VERDICTS_KEPT = 8192
WEAK, STRONG = 1, 2


def secret_strength(name: Any) -> int:
    """0 when ``name`` names no secret, WEAK for a ``*_key`` name, STRONG for the rest of the rule."""
    if type(name) is not str:
        if type(name) is bytes:
            name = name.decode("latin-1")
        elif type(name) is tuple:  # a MultiIndex column: any level naming a secret
            return max((secret_strength(part) for part in name[:8]), default=0)
        else:
            return 0
    verdict = _VERDICTS.get(name)
    if verdict is None:
        verdict = _strength(name[:200])
        if len(_VERDICTS) < _VERDICTS_KEPT and len(name) <= 200:  # a huge key is not kept alive here
            _VERDICTS[name] = verdict
    return verdict


def secret_name(name: Any) -> bool:
    """Whether a value under this name (variable, key, attribute, column, keyword) is a secret."""
    return secret_strength(name) > 0


def _strength(name: str) -> int:
    words = [word.lower() for word in _WORD.findall(name)]
    if not words or words[-1] in _NOT_SECRET_TAILS and not (words[-2:] == ["session", "id"]):
        return 0
    joined = "".join(words)
    if any(part in joined for part in _STRONG_PARTS) or any(word in _STRONG_WORDS for word in words):
        return STRONG
    if any(word == "token" or word.endswith("token") and len(word) > 5 for word in words):
        return STRONG  # hf_token, accessToken, HFTOKEN; not tokens, tokenizer
    if words[-2:] == ["session", "id"] or "sessionid" in words:
        return STRONG
    for before, word in zip(words, words[1:]):
        if word in ("key", "keys") and before in _KEY_OWNERS:
            return STRONG
    if len(words) > 1 and words[-1] in ("key", "keys"):
        return WEAK
    return 0


def _looks_like_a_key(value: str) -> bool:
    return (not any(c.isspace() for c in value) and any(c.isdigit() for c in value)
            and any(c.isalpha() for c in value))


class SecretMemory:
    """Secret values seen in this process (value -> the name it was seen under), oldest forgotten first
    past ``limit``; each kept to its first ``value_chars`` characters."""

    def __init__(self, limit: int = 1024, value_chars: int = 16_384) -> None:
        self.limit = limit
        self.value_chars = value_chars
        self._lock = threading.Lock()
        self._values: OrderedDict[str, str] = OrderedDict()
        self._redactor: Redactor | None = None
        self._longest = 0  # of the values ever kept (an over-estimate once some are forgotten: harmless)
        self._history: tuple[int, int] = (0, 0)  # (id of the history list read, cells of it read)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def remember(self, name: Any, value: Any, strength: int = STRONG) -> None:
        """Keep ``value`` (a str, or bytes: kept as text) if it is long enough to be masked safely."""
        for text in _texts(value):
            if len(text) < MIN_SECRET_LENGTH or strength == WEAK and not _looks_like_a_key(text):
                continue
            text = text[:self.value_chars]
            label = name if type(name) is str and name.isidentifier() and len(name) <= 60 else "secret"
            with self._lock:
                if text in self._values:
                    self._values.move_to_end(text)
                    continue
                self._values[text] = label
                self._longest = max(self._longest, len(text))
                while len(self._values) > self.limit:
                    self._values.popitem(last=False)
                self._redactor = None

    def redactor(self) -> Redactor:
        """A Redactor for every value remembered (made again only after a change)."""
        with self._lock:
            if self._redactor is None:
                pairs = sorted(((name, value) for value, name in self._values.items()), key=lambda p: -len(p[1]))
                self._redactor = Redactor(pairs)
            return self._redactor

    def longest(self) -> int:
        return self._longest

    def history_read(self, inputs: list[Any], most: int) -> list[tuple[int, Any]]:
        """The cells of ``inputs`` not read yet (at most ``most``), marked read."""
        with self._lock:
            seen, done = self._history
            if seen != id(inputs) or done > len(inputs):
                done = 0
            end = min(len(inputs), done + most)
            self._history = (id(inputs), end)
        return [(number, inputs[number]) for number in range(done, end)]

    def forget_all(self) -> None:
        """For tests that need a memory of nothing."""
        with self._lock:
            self._values.clear()
            self._redactor = None
            self._longest = 0
            self._history = (0, 0)


def _texts(value: Any) -> Iterator[str]:
    if type(value) is str:
        yield value
        escaped = repr(value[:65_536])[1:-1]
        if escaped != value:  # as a repr shows it: quotes, backslashes, control characters escaped
            yield escaped
    elif type(value) in (bytes, bytearray):
        raw = bytes(value[:65_536])
        yield raw.decode("utf-8", "surrogateescape")
        yield repr(raw)[2:-1]  # as a bytes repr shows it: non-ASCII bytes as \xNN


MEMORY = SecretMemory()

# -- feeding the memory ------------------------------------------------------------------------

NAMESPACE_NAMES = 20_000  # top-level names looked at per refresh
WALK_NODES = 3_000  # values a refresh's walk of the namespace's containers visits, in all
WALK_ITEMS = 200  # items of one container it looks at
WALK_DEPTH = 3
HISTORY_CELLS = 500  # cells parsed per refresh (the rest on the next calls)
SOURCE_CHARS = 100_000  # longer cells are not parsed


def refresh(namespace: Mapping[str, Any] | None, shell: Any = None, *,
            walk: Callable[[list[Any]], Any] | None = None) -> Redactor:
    """Feed the memory from the environment, ``namespace`` and ``shell``'s history; its Redactor. ``walk``, when
    given, looks into the namespace's containers for values under secret-named keys (answers.walk_namespace: the
    safe object walk lives with the rendering it shares, which imports this module)."""
    for name, value in secret_values(os.environ):
        MEMORY.remember(name, value)
    if namespace is not None:
        _from_namespace(namespace, walk)
    if shell is not None:
        watch(shell)
        _from_history(shell)
    return MEMORY.redactor()


def _top_level(namespace: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    try:
        items = list(dict.items(namespace)) if isinstance(namespace, dict) else list(namespace.items())
    except Exception:  # noqa: BLE001 - a namespace changing under us is read next time
        return []
    return items[:NAMESPACE_NAMES]


def _from_namespace(namespace: Mapping[str, Any], walk: Callable[[list[Any]], Any] | None) -> None:
    items = _top_level(namespace)
    for name, value in items:
        strength = secret_strength(name)
        if strength:
            MEMORY.remember(name, value, strength)
    if walk is not None:
        walk([value for name, value in items if type(name) is str and not name.startswith("_")])


def _from_history(shell: Any) -> None:
    """Secrets written in cells: the transformed source (Python) and the raw one (``%env NAME=...``)."""
    manager = getattr(shell, "history_manager", None)
    parsed, raw = getattr(manager, "input_hist_parsed", None), getattr(manager, "input_hist_raw", None)
    if type(parsed) is not list or type(raw) is not list:
        return
    for number, source in MEMORY.history_read(parsed, HISTORY_CELLS):
        sources = (source, raw[number]) if number < len(raw) and raw[number] != source else (source,)
        for text in sources:
            for name, value in source_secrets(text):
                MEMORY.remember(name, value, secret_strength(name))


_WATCHED: set[int] = set()


def watch(shell: Any) -> None:
    """Remember the namespace's secret-named values after every cell (once per shell), so a value
    deleted between two tool calls is still known."""
    if id(shell) in _WATCHED or getattr(shell, "events", None) is None:
        return
    _WATCHED.add(id(shell))

    def after_cell(*_args: Any) -> None:
        try:
            for name, value in _top_level(shell.user_ns):
                strength = secret_strength(name)
                if strength:
                    MEMORY.remember(name, value, strength)
        except Exception:  # noqa: BLE001 - never a traceback under the user's cell for this
            pass

    shell.events.register("post_run_cell", after_cell)


# -- secrets in a cell's source ----------------------------------------------------------------

_ENV_MAGIC = re.compile(r"^([ \t]*%(?:set_)?env[ \t]+)([A-Za-z_][A-Za-z0-9_]*)([ \t]*=[ \t]*|[ \t]+)(\S.*?)[ \t]*$",
                        re.MULTILINE)


def source_secrets(source: Any) -> list[tuple[str, str]]:
    """``(name, literal)`` for each literal a cell puts in a secret place (see ``mask_source``)."""
    if type(source) is not str:
        return []
    return [(name, value) for name, value, _start, _end, _mask in _secret_literals(source)]


def mask_source(source: str) -> tuple[str, bool]:
    """``source`` with every literal in a secret place replaced by ``'***'``, and whether the cell's
    last expression names a secret (its output is one, then).

    Secret places: the value of an assignment to a secret-named target (a name, an attribute, a
    ``[...]`` key), of a secret-named keyword argument or parameter default, of a secret-named key in
    a dict literal, the argument after a secret-named string argument (``setattr(o, "token", ...)``,
    ``os.environ.setdefault("HF_TOKEN", ...)``), the other side of ``==`` with a secret-named
    name, and ``%env NAME=value``. A cell that does not parse whole is read line by line.
    """
    spans = sorted({(start, end, mask) for _name, _value, start, end, mask in _secret_literals(source)},
                   reverse=True)
    last_end = len(source) + 1
    for start, end, mask in spans:
        if end <= last_end:  # nested spans: the outer one is masked already
            source = source[:start] + mask + source[end:]
            last_end = start
    return source, _shows_a_secret(source)


def _shows_a_secret(source: str) -> bool:
    tree = _parse(source)
    if tree is None or not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return False
    return _target_name(tree.body[-1].value) is not None


def _parse(source: str) -> ast.Module | None:
    if len(source) > SOURCE_CHARS:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeError, OverflowError):
        return None


def _secret_literals(source: str) -> list[tuple[str, Any, int, int, str]]:
    """(name, value, start, end, mask) of each literal in a secret place, by character offsets in source."""
    found: list[tuple[str, Any, int, int, str]] = []
    tree = _parse(source)
    if tree is not None:
        found.extend(_literals_in(tree, source, 0))
    else:
        offset = 0
        for line in source.splitlines(keepends=True)[:5_000]:
            line_tree = _parse(line.strip())
            if line_tree is not None:
                found.extend(_literals_in(line_tree, line.strip(), offset + len(line) - len(line.lstrip())))
            offset += len(line)
    for match in _ENV_MAGIC.finditer(source):
        if secret_name(match.group(2)):
            found.append((match.group(2), match.group(4), match.start(4), match.end(4), MASK))
    return found


def _literals_in(tree: ast.AST, source: str, base: int) -> list[tuple[str, Any, int, int, str]]:
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]
    found = []
    for name, node in _secret_places(tree):
        for leaf in _literal_leaves(node):
            span = _span(source, starts, leaf)
            if span is not None:
                found.append((name, _literal_value(leaf), base + span[0], base + span[1], f"'{MASK}'"))
    return found


def _literal_value(node: ast.AST) -> Any:
    """What a literal evaluates to, where that is plain (a constant, a sum of string constants); else ""
    (an f-string: masked where it is written, but its value is not known here)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, (str, bytes)) else str(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_value(node.left), _literal_value(node.right)
        if type(left) is type(right) and left and right:
            return left + right
    return ""


def _span(source: str, starts: list[int], node: ast.AST) -> tuple[int, int] | None:
    """Character offsets of ``node`` (ast counts columns in UTF-8 bytes)."""
    try:
        return (_offset(source, starts, node.lineno, node.col_offset),  # type: ignore[attr-defined]
                _offset(source, starts, node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]
    except (AttributeError, IndexError, TypeError, UnicodeError):
        return None


def _offset(source: str, starts: list[int], line: int, column: int) -> int:
    start = starts[line - 1]
    end = starts[line] if line < len(starts) else len(source)
    head = source[start:end].encode("utf-8", "surrogatepass")[:column]
    return start + len(head.decode("utf-8", "surrogatepass"))


def _target_name(node: ast.AST) -> str | None:
    """The secret name ``node`` assigns to or reads: ``API_KEY``, ``cfg.token``, ``env["HF_TOKEN"]``."""
    name: Any = None
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        name = node.slice.value
    return name if isinstance(name, str) and secret_name(name) else None


def _constant_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and secret_name(node.value):
        return node.value
    return None


def _secret_places(tree: ast.AST) -> Iterable[tuple[str, ast.AST]]:
    """(secret name, the expression it is given) for every secret place in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield from _assigned(target, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
            yield from _assigned(node.target, node.value)
        elif isinstance(node, ast.keyword) and node.arg and secret_name(node.arg):
            yield node.arg, node.value
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                name = _constant_name(key) if key is not None else None
                if name:
                    yield name, value
        elif isinstance(node, (ast.Call, ast.Tuple, ast.List)):
            items = node.args if isinstance(node, ast.Call) else node.elts
            for first, second in zip(items, items[1:]):
                name = _constant_name(first)
                if name:
                    yield name, second
        elif isinstance(node, ast.arguments):
            yield from _defaults(node)
        elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
            left, right = node.left, node.comparators[0]
            for named, other in ((left, right), (right, left)):
                name = _target_name(named)
                if name:
                    yield name, other


def _assigned(target: ast.AST, value: ast.AST) -> Iterable[tuple[str, ast.AST]]:
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        if len(target.elts) == len(value.elts):
            for sub_target, sub_value in zip(target.elts, value.elts):
                yield from _assigned(sub_target, sub_value)
        return
    name = _target_name(target)
    if name:
        yield name, value


def _defaults(arguments: ast.arguments) -> Iterable[tuple[str, ast.AST]]:
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(arg, default) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default]
    for arg, default in pairs:
        if secret_name(arg.arg):
            yield arg.arg, default


def _literal_leaves(node: ast.AST) -> list[ast.AST]:
    """The literals ``node`` is made of: itself when it is one (a constant, an f-string, a sum of
    those), its items' for a list, tuple, set or dict display; none for anything computed."""
    if isinstance(node, ast.Constant):
        return [] if node.value is None or isinstance(node.value, bool) or node.value is Ellipsis else [node]
    if isinstance(node, ast.JoinedStr):
        return [node]
    if isinstance(node, ast.BinOp):
        parts = _literal_leaves(node.left), _literal_leaves(node.right)
        return [node] if all(parts) else [*parts[0], *parts[1]]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [leaf for item in node.elts for leaf in _literal_leaves(item)]
    if isinstance(node, ast.Dict):
        return [leaf for item in node.values for leaf in _literal_leaves(item)]
    return []
