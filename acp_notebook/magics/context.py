"""Kernel variables in a ``%%acp`` cell: ``--attach NAME`` and ``{name}`` in the body.

A reference names a variable of the notebook, optionally followed by attributes and indexes:
``df``, ``df.columns``, ``results[0]``, ``config["model"]``, ``frames[-1].shape``. Nothing else:
no calls, operators or expressions; a reference is looked up (``getattr`` / ``[]``), never
evaluated, so a prompt cannot run code. In a body, ``{ref}`` is replaced by the value as text
(``attachments.inline_text``: capped, secrets masked), ``{{`` and ``}}`` stand for ``{`` and
``}``, and any other braces (``{}``, ``{"a": 1}``, ``{x + 1}``) are left as they are. A name the
notebook does not have is a UsageError naming it and the closest names it does have; nothing
is sent then.

Pure functions over the namespace they are given; the kernel thread calls them.
"""

from __future__ import annotations

import ast
import difflib
import re
import types
from collections.abc import Mapping, Sequence
from typing import Any

from IPython.core.error import UsageError

from ..attachments import NotInlinable, inline_text

__all__ = ["attached", "expand", "resolve", "user_names"]

# {{ and }} (escapes), or one brace pair holding no braces and no line break.
_BRACES = re.compile(r"\{\{|\}\}|\{([^{}\n]*)\}")
# A reference: a name, then .attribute, [integer] or ["string"] / ['string'] any number of times.
_REFERENCE = re.compile(r"""[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\s*(?:-?\d+|"[^"\\]*"|'[^'\\]*')\s*\])*""")
_IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})


def user_names(namespace: Mapping[str, Any]) -> list[str]:
    """The notebook's own variables: no ``_`` names, modules or IPython's helpers."""
    return sorted(name for name, value in namespace.items()
                  if not name.startswith("_") and name not in _IPYTHON_NAMES and not isinstance(value, types.ModuleType))


def resolve(reference: str, namespace: Mapping[str, Any], *, where: str) -> Any:
    """The object ``reference`` names (see the module docstring); UsageError in ``where``'s terms otherwise."""
    text = reference.strip()
    if not _REFERENCE.fullmatch(text):
        raise UsageError(f"{where}: {reference!r} is not a variable reference: use a name, optionally with "
                         ".attribute or [index] (e.g. df, df.columns, rows[0], config['model']); no calls or "
                         "expressions")
    steps = _steps(ast.parse(text, mode="eval").body)
    head = steps[0][1]
    if head not in namespace:
        close = difflib.get_close_matches(head, user_names(namespace), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; run the cell that defines it first"
        raise UsageError(f"{where}: no variable {head!r} in this notebook{hint}")
    value, path = namespace[head], head
    for kind, key in steps[1:]:
        try:
            value = getattr(value, key) if kind == "attribute" else value[key]
        except Exception as exc:  # noqa: BLE001 - any lookup failure is the user's to fix; say which
            shown = f".{key}" if kind == "attribute" else f"[{key!r}]"
            raise UsageError(f"{where}: {path}{shown} failed: {type(exc).__name__}: {exc}") from None
        path += f".{key}" if kind == "attribute" else f"[{key!r}]"
    return value


def _steps(node: ast.expr) -> list[tuple[str, Any]]:
    """A parsed reference as (name | attribute | index, key) steps, outermost last."""
    if isinstance(node, ast.Name):
        return [("name", node.id)]
    if isinstance(node, ast.Attribute):
        return [*_steps(node.value), ("attribute", node.attr)]
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):  # [-1]
            return [*_steps(node.value), ("index", -index.operand.value)]  # type: ignore[attr-defined]
        return [*_steps(node.value), ("index", index.value)]  # type: ignore[attr-defined]
    raise ValueError(f"not a reference: {ast.dump(node)}")  # the regular expression admits nothing else


def expand(body: str, namespace: Mapping[str, Any], *, redactor: Any = None,
           filled: list[tuple[str, str]] | None = None) -> str:
    """``body`` with every ``{ref}`` replaced by the value's text and ``{{`` / ``}}`` unescaped; ``filled`` (a list)
    gets ``(reference, the text put in)`` for each, so the cell can show what was sent."""

    def replace(match: re.Match[str]) -> str:
        whole, inner = match.group(0), match.group(1)
        if whole in ("{{", "}}"):
            return whole[0]
        if not _REFERENCE.fullmatch(inner.strip()):
            return whole  # not a reference: braces of code or JSON in the prompt
        value = resolve(inner, namespace, where=f"%%acp: {{{inner}}}")
        try:
            text = inline_text(value, inner.strip(), redactor=redactor)
        except NotInlinable as exc:
            raise UsageError(f"%%acp: {{{inner}}}: {exc}") from None
        if filled is not None:
            filled.append((inner.strip(), text))
        return text

    return _BRACES.sub(replace, body)


def attached(references: Sequence[str], namespace: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``--attach`` references as ``(name, object)`` pairs, every one checked before any is used."""
    return [(reference, resolve(reference, namespace, where=f"%%acp --attach {reference}"))
            for reference in references]
