"""The house's size limits (issue 26): no class in acp_notebook/ over 35 methods or 500 lines, no module over
800 lines. Read from the source with ast only (nothing of the package is imported), so it runs in a moment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "acp_notebook"
SOURCES = sorted(PACKAGE.rglob("*.py"))
MAX_METHODS = 35
MAX_CLASS_LINES = 500
MAX_MODULE_LINES = 800


def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def _methods(cls: ast.ClassDef) -> int:
    """Functions defined in the class body itself (properties and static methods count; nested ones do not)."""
    return sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in cls.body)


def _span(cls: ast.ClassDef) -> int:
    first = min([cls.lineno, *(decorator.lineno for decorator in cls.decorator_list)])
    return (cls.end_lineno or cls.lineno) - first + 1


def test_the_package_is_found():
    assert (PACKAGE / "__init__.py").is_file() and len(SOURCES) > 50


def test_the_counts_are_what_they_say():
    tree = ast.parse("@dataclass\nclass A:\n    x = 1\n\n    def f(self):\n        def inner():\n            pass\n\n"
                     "    @property\n    def g(self):\n        return 1\n\n    async def h(self):\n        pass\n")
    (cls,) = _classes(tree)
    assert (_methods(cls), _span(cls)) == (3, 14)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_classes_and_modules_stay_within_the_limits(path: Path):
    text = path.read_text(encoding="utf-8")
    over = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        over.append(f"the module has {lines} lines (at most {MAX_MODULE_LINES})")
    for cls in _classes(ast.parse(text, str(path))):
        methods, span = _methods(cls), _span(cls)
        if methods > MAX_METHODS or span > MAX_CLASS_LINES:
            over.append(f"class {cls.name} (line {cls.lineno}) has {methods} methods and {span} lines "
                        f"(at most {MAX_METHODS} and {MAX_CLASS_LINES}): give one of its jobs a class of its own")
    assert not over, f"{path.relative_to(PACKAGE)}: " + "; ".join(over)
