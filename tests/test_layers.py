"""The package's shape, read from its source with ast (issue 34, points 1 and 2): nothing of it is imported.

- No import cycle among the modules of ``acp_notebook/``. Every import counts: module level,
  ``if TYPE_CHECKING:`` blocks, imports inside functions, the names a package maps with
  ``lazy_names`` (an import made on first read) and ``importlib.import_module("...")`` of a
  constant. A cycle closed only through a type-checking or deferred import is still a cycle.
- No reach-in: no module reads another object's ``_name`` (dunders excepted). Allowed are
  ``self._x`` and ``cls._x``; ``Name._x`` where ``Name`` is a class or function defined in the same
  module; a parameter annotated with (or narrowed by ``isinstance`` to) a class of the same module;
  ``self.attr._x`` where the class set ``attr`` from such a parameter or annotated it with such a
  class. ``getattr``/``setattr``/``hasattr``/``delattr`` with a constant ``"_name"`` count as
  reads, and so does ``from module import _name`` of a name that is not a module. IPython's display
  hooks (``_repr_*_``, ``_ipython_*_``) are public protocol names, and so are a few documented
  underscore names of the standard library (``PUBLIC_UNDERSCORE``).
- Process-wide state (point 6) is named in its module's docstring: names rebound after import,
  containers changed after import, locks, threads, queues and counters, and instances of the
  package's classes that are not plain data, all bound at module level (``module_state``).
- Function-level imports only where they defer a heavy optional import (``HEAVY``, or a module of
  ours that imports one at module level), each with a comment saying so (on the import or on the
  comment lines just above it).

What is left of today's cycles, reach-ins and function-level imports, in files whose owners have not
got to them yet, is listed below with a reason each. These lists only ever shrink: an entry whose
import or access is gone fails the test too, so it is deleted with the fix. ``DEPENDENCY_PRIVATES`` is not
a pending list: the places that must read a dependency's private attribute (there being no public
one), each checked where it is read.
"""

from __future__ import annotations

import ast
import json
import io
import re
import subprocess
import sys
import textwrap
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "acp_notebook"
NAME = "acp_notebook"

# Third-party packages (and platform-only modules) slow or optional enough that importing them inside a
# function, on first use, is worth it. A module of ours that imports one of them at module level counts too.
HEAVY = frozenset({
    "acp", "fcntl", "inspect_ai", "ipykernel", "IPython", "ipywidgets", "jsonschema", "jupyter_client",
    "matplotlib", "mcp", "mistune", "nbclient", "nbconvert", "nbformat", "numpy", "pandas", "PIL", "pygments",
    "ray", "termios", "uvloop", "zmq",
})

# Underscore names that are the public API of what they belong to.
PUBLIC_UNDERSCORE = frozenset({
    "_getframe",  # sys._getframe: documented (CPython), the only way to a caller's frame
    "_exit",  # os._exit
    "_asdict", "_replace", "_fields", "_make",  # namedtuple's public methods
})

# The tables below: (file, file it imports), (file, private name read) or (file, module as written in a
# function-level import) -> why it is still there. Removing PENDING_CYCLE_EDGES leaves no cycle, and each
# of them closes one today. DEPENDENCY_PRIVATES: where a dependency's private attribute is read because it
# has no public one (not pending: the one place each is read).
# Reasons shared by many entries.
_CORE = "pending: the client core split (client, session, _inbound, _permission, kernel_link), another engineer's"
_KERNEL_TOOLS = "pending: kernel_tools/* is another engineer's this round"
_MAGICS = "pending: magics/* is another engineer's this round"
_WIDGETS = "pending: this widget module is another engineer's this round"
_OUTSIDE = "pending: outside this round's files; move to module level or give the reason"
_BRANCHES = 'pending: branches hang on Session; to go with the session table of the core split'

PENDING_CYCLE_EDGES: dict[tuple[str, str], str] = {
}

PENDING_REACH_INS: dict[tuple[str, str], str] = {
}

PENDING_FUNCTION_IMPORTS: dict[tuple[str, str], str] = {
}

DEPENDENCY_PRIVATES: dict[tuple[str, str], str] = {
    ('acp_notebook/_sdk.py', '_send_cancel_request'): 'whether the SDK line sends $/cancel_request itself has no public flag',
    ('acp_notebook/widgets/comms.py', '_handle_msg'): "ipywidgets' handler, called from ours so a change is acknowledged after it",
    ('acp_notebook/widgets/comms.py', '_reply_subshell_for'): "ipykernel routes a comm's messages by it; there is no public switch",
    ('acp_notebook/widgets/comms.py', '_topic'): "ipykernel's iopub topic for the status messages we acknowledge with",
}


# ------------------------------------------------------------------------------------------- reading
@dataclass
class Module:
    name: str  # dotted: acp_notebook.proxy.server
    path: Path
    is_package: bool
    tree: ast.Module
    text: str

    @property
    def file(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Import:
    source: str  # the importing module (dotted)
    target: str  # the imported module of ours (dotted), or the top-level name of another package
    written: str  # the module as written: ".server", "..errors", "pandas"
    line: int
    end_line: int
    kind: str  # "module" | "type-checking" | "function" | "lazy"
    ours: bool


def read_modules(package: Path = PACKAGE) -> dict[str, Module]:
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        text = path.read_text(encoding="utf-8")
        modules[".".join(parts)] = Module(".".join(parts), path, is_package, ast.parse(text, str(path)), text)
    return modules


def _absolute(module: Module, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _nearest(modules: dict[str, Module], dotted: str) -> str:
    while dotted not in modules and "." in dotted:
        dotted = dotted.rsplit(".", 1)[0]
    return dotted


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk_imports(node: ast.AST, kind: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node below ``node`` with the kind of place it is in."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield child, "function"
            yield from _walk_imports(child, "function")
            continue
        if isinstance(child, ast.If) and kind == "module" and _is_type_checking(child.test):
            yield child, kind
            for sub in child.body:
                yield sub, "type-checking"
                yield from _walk_imports(sub, "type-checking")
            for sub in child.orelse:
                yield sub, kind
                yield from _walk_imports(sub, kind)
            continue
        yield child, kind
        yield from _walk_imports(child, kind)


def imports_of(module: Module, modules: dict[str, Module]) -> list[Import]:
    found: list[Import] = []

    def add(target: str, written: str, node: ast.AST, kind: str) -> None:
        ours = target.split(".")[0] == NAME
        resolved = _nearest(modules, target) if ours else target.split(".")[0]
        if resolved != module.name:
            found.append(Import(module.name, resolved, written, node.lineno, node.end_lineno or node.lineno,  # type: ignore[attr-defined]
                                kind, ours))

    for node, kind in _walk_imports(module.tree, "module"):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, alias.name, node, kind)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, node.level, node.module)
            written = "." * node.level + (node.module or "")
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                add(sub if sub in modules else target, written, node, kind)
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            called = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if called == "import_module" and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                written = node.args[0].value
                level = len(written) - len(written.lstrip("."))
                add(_absolute(module, level, written.lstrip(".") or None), written, node, "lazy")
            elif called == "lazy_names" and len(node.args) >= 3:
                for constant in ast.walk(node.args[2]):
                    if isinstance(constant, ast.Constant) and isinstance(constant.value, str) \
                            and constant.value.startswith("."):
                        written = constant.value
                        level = len(written) - len(written.lstrip("."))
                        add(_absolute(module, level, written.lstrip(".") or None), written, constant, "lazy")
    return found


@dataclass
class Graph:
    modules: dict[str, Module]
    imports: list[Import] = field(default_factory=list)

    @classmethod
    def of(cls, modules: dict[str, Module]) -> Graph:
        graph = cls(modules)
        for module in modules.values():
            graph.imports.extend(imports_of(module, modules))
        return graph

    def edges(self) -> dict[str, set[str]]:
        edges: dict[str, set[str]] = {name: set() for name in self.modules}
        for imp in self.imports:
            if imp.ours:
                edges[imp.source].add(imp.target)
        return edges

    def file(self, name: str) -> str:
        return self.modules[name].file


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        for child in edges[node] - seen:
            seen.add(child)
            todo.append(child)
    return False


# ------------------------------------------------------------------------------------------- reach-ins
def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) \
        and not (name.startswith("_repr_") and name.endswith("_")) and not name.startswith("_ipython_") \
        and name not in PUBLIC_UNDERSCORE


def _names_in(expr: ast.AST | None) -> set[str]:
    """Names an annotation mentions, string annotations included."""
    if expr is None:
        return set()
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        try:
            expr = ast.parse(expr.value, mode="eval")
        except SyntaxError:
            return set()
    return {node.id for node in ast.walk(expr) if isinstance(node, ast.Name)} | {
        node.attr for node in ast.walk(expr) if isinstance(node, ast.Attribute)}


class _ReachIns(ast.NodeVisitor):
    """Walks one module; ``found`` holds (line, what is read) for each reach-in."""

    def __init__(self, module: Module, modules: dict[str, Module]) -> None:
        self.module = module
        self.modules = modules
        tree = module.tree
        self.own = {node.name for node in ast.walk(tree)
                    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
        self.own_classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        self.scopes: list[set[str]] = [set()]
        self.typed_attrs: list[set[str]] = [set()]
        self.found: list[tuple[int, str]] = []

    # which expressions are the module's own objects
    def _owned(self, expr: ast.expr) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in ("self", "cls") or expr.id in self.own or expr.id in self.scopes[-1]
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return expr.attr in self.typed_attrs[-1]
        return False

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        attrs: set[str] = set()
        for method in node.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            typed = {arg.arg for arg in _arguments(method) if _names_in(arg.annotation) & self.own_classes}
            for sub in ast.walk(method):
                if isinstance(sub, ast.AnnAssign) and _is_self_attr(sub.target) \
                        and _names_in(sub.annotation) & self.own_classes:
                    attrs.add(sub.target.attr)  # type: ignore[union-attr]
                elif isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Name) and sub.value.id in typed:
                    attrs.update(t.attr for t in sub.targets if _is_self_attr(t))  # type: ignore[union-attr]
        self.typed_attrs.append(attrs)
        self.generic_visit(node)
        self.typed_attrs.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        owned = {arg.arg for arg in _arguments(node) if _names_in(arg.annotation) & self.own_classes}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "isinstance" \
                    and len(sub.args) == 2 and isinstance(sub.args[0], ast.Name) \
                    and _names_in(sub.args[1]) & self.own_classes:
                owned.add(sub.args[0].id)
        self.scopes.append(self.scopes[-1] | owned)
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function  # type: ignore[assignment]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr) and not self._owned(node.value):
            self.found.append((node.lineno, node.attr))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr", "delattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and _private(node.args[1].value) \
                and not self._owned(node.args[0]):
            self.found.append((node.lineno, node.args[1].value))
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = _absolute(self.module, node.level, node.module)
        for alias in node.names:
            if _private(alias.name) and f"{target}.{alias.name}" not in self.modules \
                    and not _is_stdlib_module(f"{target}.{alias.name}"):
                self.found.append((node.lineno, alias.name))


def _arguments(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[ast.arg]:
    args = node.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]


def _is_self_attr(target: ast.expr) -> bool:
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"


def _is_stdlib_module(dotted: str) -> bool:
    """``from importlib import _bootstrap``-style imports of a private *module* are not reach-ins."""
    return dotted.split(".")[0] in sys.stdlib_module_names and dotted.rsplit(".", 1)[-1] in {"_thread"}


def reach_ins(modules: dict[str, Module]) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for module in modules.values():
        visitor = _ReachIns(module, modules)
        visitor.visit(module.tree)
        for line, name in visitor.found:
            out.setdefault((module.file, name), []).append(line)
    return out


# ------------------------------------------------------------------------------------------- function-level imports
def _comment_lines(text: str) -> set[int]:
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            lines.add(token.start[0])
    return lines


def heavy_modules(graph: Graph) -> set[str]:
    """Our modules that import a HEAVY package at module level, themselves or through ours."""
    direct: dict[str, set[str]] = {name: set() for name in graph.modules}
    heavy = set()
    for imp in graph.imports:
        if imp.kind != "module":
            continue
        if imp.ours:
            direct[imp.source].add(imp.target)
        elif imp.target in HEAVY:
            heavy.add(imp.source)
    changed = True
    while changed:
        changed = False
        for name, targets in direct.items():
            if name not in heavy and targets & heavy:
                heavy.add(name)
                changed = True
    return heavy


def function_imports(graph: Graph) -> dict[tuple[str, str], list[str]]:
    """Each function-level import that is not allowed: (file, module as written) -> what is wrong with it."""
    heavy = heavy_modules(graph)
    comments = {name: _comment_lines(module.text) for name, module in graph.modules.items()}
    import_lines: dict[str, set[int]] = {}
    for imp in graph.imports:
        if imp.kind == "function":
            import_lines.setdefault(imp.source, set()).update(range(imp.line, imp.end_line + 1))
    out: dict[tuple[str, str], list[str]] = {}
    for imp in graph.imports:
        if imp.kind != "function":
            continue
        problems = []
        if not (imp.target in heavy if imp.ours else imp.target in HEAVY):
            problems.append("defers nothing heavy")
        said = comments[imp.source]
        line = imp.line - 1
        while line in import_lines[imp.source] and line not in said:
            line -= 1  # a run of imports under one comment
        if not (said & set(range(imp.line, imp.end_line + 1)) or line in said):
            problems.append("no comment says why")
        if problems:
            out.setdefault((graph.file(imp.source), imp.written), []).extend(problems)
    return out


# ------------------------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph.of(read_modules())


@pytest.fixture(scope="module")
def found_reach_ins(graph: Graph) -> dict[tuple[str, str], list[int]]:
    return reach_ins(graph.modules)


@pytest.fixture(scope="module")
def found_function_imports(graph: Graph) -> dict[tuple[str, str], list[str]]:
    return function_imports(graph)


def _file_to_module(graph: Graph) -> dict[str, str]:
    return {module.file: name for name, module in graph.modules.items()}


@pytest.mark.slow
def test_no_import_cycle_beyond_the_pending_edges(graph: Graph):
    edges = graph.edges()
    by_file = _file_to_module(graph)
    for source, target in PENDING_CYCLE_EDGES:
        edges[by_file[source]].discard(by_file[target])
    found = cycles(edges)
    assert not found, "import cycles (every import counts, TYPE_CHECKING and function-level ones too): " + "; ".join(
        " <-> ".join(graph.file(name) for name in cycle) for cycle in found)


def test_each_pending_cycle_edge_still_closes_a_cycle(graph: Graph):
    """An edge that no longer exists, or no longer closes a cycle, comes off the list with its fix."""
    edges = graph.edges()
    by_file = _file_to_module(graph)
    stale = []
    for source, target in PENDING_CYCLE_EDGES:
        a, b = by_file.get(source), by_file.get(target)
        if a is None or b is None or b not in edges[a] or not _reaches(edges, b, a):
            stale.append(f"{source} -> {target}")
    assert not stale, "no longer a cycle; delete from PENDING_CYCLE_EDGES: " + ", ".join(stale)


@pytest.mark.slow
def test_no_reach_in_beyond_the_pending_ones(found_reach_ins: dict[tuple[str, str], list[int]]):
    found = found_reach_ins
    new = {key: lines for key, lines in found.items() if key not in PENDING_REACH_INS and key not in DEPENDENCY_PRIVATES}
    assert not new, "another object's private name read across modules (add a public name): " + "; ".join(
        f"{file}:{','.join(map(str, lines))} ._{name.lstrip('_')}" for (file, name), lines in sorted(new.items()))


def test_each_pending_reach_in_still_occurs(found_reach_ins: dict[tuple[str, str], list[int]]):
    found = found_reach_ins
    stale = [f"{file} {name}" for file, name in [*PENDING_REACH_INS, *DEPENDENCY_PRIVATES] if (file, name) not in found]
    assert not stale, "gone; delete from PENDING_REACH_INS / DEPENDENCY_PRIVATES: " + ", ".join(stale)


@pytest.mark.slow
def test_function_level_imports_defer_something_heavy_and_say_so(
        found_function_imports: dict[tuple[str, str], list[str]]):
    found = found_function_imports
    new = {key: problems for key, problems in found.items() if key not in PENDING_FUNCTION_IMPORTS}
    assert not new, "function-level imports: " + "; ".join(
        f"{file} imports {written}: {', '.join(sorted(set(problems)))}" for (file, written), problems in sorted(new.items()))


def test_each_pending_function_import_is_still_there(found_function_imports: dict[tuple[str, str], list[str]]):
    found = found_function_imports
    stale = [f"{file} {written}" for file, written in PENDING_FUNCTION_IMPORTS if (file, written) not in found]
    assert not stale, "fixed; delete from PENDING_FUNCTION_IMPORTS: " + ", ".join(stale)


# The protocol layer (issue 34, point 3) and what it must never reach, by any import, directly or through ours.
PROTOCOL_LAYER = ("acp_notebook.connection", "acp_notebook.client", "acp_notebook.session", "acp_notebook.turn",
                  "acp_notebook.state", "acp_notebook._inbound", "acp_notebook._permission",
                  "acp_notebook.extensions", "acp_notebook.session_table", "acp_notebook.session_results")
NOT_BELOW_PROTOCOL = ("acp_notebook.widgets", "acp_notebook.magics", "acp_notebook.kernel_tools",
                      "acp_notebook.kernel_link", "acp_notebook.starting", "IPython", "ipykernel", "ipywidgets")
# (protocol-layer file, module it reaches) -> why it still does. Shrink-only, like the tables above.
PENDING_PROTOCOL_REACH: dict[tuple[str, str], str] = {
}


def _in(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def protocol_reach(graph: Graph) -> dict[tuple[str, str], list[str]]:
    """(protocol-layer module, forbidden module) -> the import path that reaches it (every kind of import counts)."""
    edges: dict[str, set[str]] = {name: set() for name in graph.modules}
    for imp in graph.imports:
        edges[imp.source].add(imp.target)
    found: dict[tuple[str, str], list[str]] = {}
    for start in (name for name in graph.modules if _in(name, PROTOCOL_LAYER)):
        paths = {start: [start]}
        queue = [start]
        while queue:
            current = queue.pop(0)
            for target in sorted(edges.get(current, ())):
                if target in paths:
                    continue
                paths[target] = [*paths[current], target]
                if _in(target, NOT_BELOW_PROTOCOL):
                    found.setdefault((start, target), paths[target])
                elif target in graph.modules:
                    queue.append(target)
    return found


def test_the_protocol_layer_reaches_no_jupyter_layer(graph: Graph):
    found = protocol_reach(graph)
    first = {}
    for (start, target), path in found.items():  # one entry per (file, first forbidden module on the way)
        first.setdefault((graph.file(start), path[-1]), path)
    new = {key: path for key, path in first.items() if key not in PENDING_PROTOCOL_REACH}
    assert not new, "the protocol layer imports what is above it: " + "; ".join(
        f"{file} reaches {target} via {' -> '.join(path)}" for (file, target), path in sorted(new.items()))
    stale = [key for key in PENDING_PROTOCOL_REACH if key not in first]
    assert not stale, f"fixed; delete from PENDING_PROTOCOL_REACH: {stale}"


def test_a_reach_through_another_module_is_found(tmp_path: Path):
    package = tmp_path / "acp_notebook"
    (package / "widgets").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "widgets" / "__init__.py").write_text("")
    (package / "widgets" / "view.py").write_text("")
    (package / "helper.py").write_text("def f():\n    from .widgets import view\n")
    (package / "client.py").write_text("from . import helper\n")
    found = protocol_reach(Graph.of(read_modules(package)))
    assert [path for (start, _), path in found.items() if start == "acp_notebook.client"] == [
        ["acp_notebook.client", "acp_notebook.helper", "acp_notebook.widgets.view"]]


def test_every_reason_is_given():
    for table in (PENDING_CYCLE_EDGES, PENDING_REACH_INS, PENDING_FUNCTION_IMPORTS, DEPENDENCY_PRIVATES):
        for key, reason in table.items():
            assert reason.strip() and "\n" not in reason, key


# ------------------------------------------------------------------------------------------- import side effects
_SIDE_EFFECTS = textwrap.dedent("""
    import importlib, json, logging, signal, sys
    def state():
        root = logging.getLogger()
        return ({name: id(module) for name, module in sys.modules.items()},
                [{int(sig): repr(signal.getsignal(sig)) for sig in signal.valid_signals()
                  if signal.getsignal(sig) is not None}, list(map(id, root.filters)), list(map(id, root.handlers))],
                sys.getswitchinterval())
    for name in [n[1:] for n in sys.argv[1:] if n.startswith("+")]:  # the user's own imports, before ours
        importlib.import_module(name)
    modules, handlers, interval = state()
    for name in [n for n in sys.argv[1:] if not n.startswith("+")]:
        importlib.import_module(name)
    modules_after, handlers_after, interval_after = state()
    print(json.dumps({
        "replaced": sorted(n for n in modules if n in modules_after and modules_after[n] != modules[n]),
        "removed": sorted(n for n in modules if n not in modules_after),
        "foreign": sorted(n for n in modules_after if n not in modules and n.split(".")[0] != "acp_notebook"
                          and n.split(".")[0] not in sys.stdlib_module_names),
        "signals": handlers_after != handlers, "switch_interval": [interval, interval_after],
        "sdk": "acp" in sys.modules and getattr(sys.modules["acp"].__dict__.get("__getattr__"), "__module__", None)}))
""")


# "+name": imported by the user before the package. The SDK's package ("acp") is neither added (the lazy copy of
# _sdk.py is set up on the first start, not at import) nor, when the user imported the SDK first, replaced.
@pytest.mark.parametrize("modules", [["acp_notebook"], ["acp_notebook.connection"],
                                     ["acp_notebook.client", "acp_notebook.demo", "acp_notebook.proxy",
                                      "acp_notebook.cellagent"],
                                     ["+acp", "acp_notebook", "acp_notebook.connection", "acp_notebook.demo"],
                                     ["+acp.connection", "acp_notebook.client", "acp_notebook.cellagent"]])
@pytest.mark.slow
def test_importing_the_package_changes_no_global_state(modules: list[str]):
    """Point 6: no sys.modules entry but its own (the standard library's modules it imports aside) is added,
    replaced or removed (the SDK's package is set up on the first start: _sdk.py), no signal handler, root
    logger filter or handler and no switch interval changes, until the user starts something."""
    done = subprocess.run([sys.executable, "-c", _SIDE_EFFECTS, *modules], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["replaced"] == found["removed"] == found["foreign"] == [], found
    # The SDK's package is absent, or the user's own (imported the ordinary way: not the lazy copy of _sdk.py).
    assert found["sdk"] in (False, "acp"), found
    assert not found["signals"]
    assert found["switch_interval"][0] == found["switch_interval"][1]


# ------------------------------------------------------------------------------------------- the checks check
def _graph_of(tmp_path: Path, files: dict[str, str]) -> Graph:
    package = tmp_path / NAME
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    modules = read_modules(package)
    for module in modules.values():
        module.path = ROOT / module.path.relative_to(tmp_path)  # files named as in the real package
    return Graph.of(modules)


def test_a_cycle_through_type_checking_or_a_function_is_found(tmp_path: Path):
    graph = _graph_of(tmp_path, {
        "__init__.py": "",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        "b.py": "def f():\n    from . import c\n",
        "c.py": "from .a import x\n",
        "d.py": "from .e import y\n",
        "e.py": "",
    })
    assert cycles(graph.edges()) == [[f"{NAME}.a", f"{NAME}.b", f"{NAME}.c"]]


def test_a_lazy_name_is_an_import(tmp_path: Path):
    graph = _graph_of(tmp_path, {
        "__init__.py": "from ._lazy import lazy_names\n__getattr__, __dir__ = lazy_names(__name__, globals(), "
                       "{'Thing': '.thing'})\n",
        "_lazy.py": "",
        "thing.py": "from . import Other\n",
    })
    assert cycles(graph.edges()) == [[NAME, f"{NAME}.thing"]]


def test_what_counts_as_a_reach_in(tmp_path: Path):
    graph = _graph_of(tmp_path, {
        "__init__.py": "",
        "mine.py": """
            from .other import _helper, public
            from . import _private_module

            class Box:
                def __init__(self, peer: Box, other) -> None:
                    self._x = 1
                    self._peer = peer
                    self._other = other

                def same(self, twin: "Box") -> int:
                    return self._x + twin._x + self._peer._x + Box._made

                def __eq__(self, value: object) -> bool:
                    return isinstance(value, Box) and value._x == self._x

                def across(self, thing) -> int:
                    return thing._count + self._other._count + getattr(thing, "_hidden") + thing.__dict__

                def display(self, widget) -> object:
                    return widget._repr_html_()
            """,
        "other.py": "def _helper():\n    pass\n\npublic = 1\n",
        "_private_module.py": "",
    })
    found = reach_ins(graph.modules)
    assert sorted(found) == [("acp_notebook/mine.py", "_count"), ("acp_notebook/mine.py", "_helper"),
                             ("acp_notebook/mine.py", "_hidden")]
    assert len(found[("acp_notebook/mine.py", "_count")]) == 2


def test_what_a_function_level_import_needs(tmp_path: Path):
    graph = _graph_of(tmp_path, {
        "__init__.py": "",
        "plots.py": "import matplotlib\n",
        "user.py": """
            def said():
                # pandas costs a second to import: only when a frame is shown
                import pandas
                import numpy

            def unsaid():
                import pandas

            def light():
                import json  # only here

            def ours():
                from .plots import draw  # matplotlib, on first plot
                from .user import x
            """,
    })
    found = function_imports(graph)
    assert found == {
        ("acp_notebook/user.py", "pandas"): ["no comment says why"],
        ("acp_notebook/user.py", "json"): ["defers nothing heavy"],
    }


# ------------------------------------------------------------------------------------------- process-wide state
# Issue 34, point 6: each process-wide object is owned by one explicit context with a documented lifetime, or
# justified in its module's docstring. What counts as process-wide state: a name bound at module level (outside
# functions and classes) that is rebound after import (a ``global`` statement names it); or a mutable container
# (a display, a comprehension or one of CONTAINERS) that its module changes (item assignment or deletion, a
# mutating method, augmented assignment); or a runtime object (one of RUNTIME: a lock, an event, a thread, a
# queue, a counter); or an instance of one of the package's classes that is not plain data (a frozen dataclass,
# a NamedTuple, an Enum). Each such name must be named in its module's docstring, which says what it is, why
# there is one per process, when it is made and dropped, and which thread changes it.
CONTAINERS = frozenset({"dict", "list", "set", "bytearray", "deque", "defaultdict", "OrderedDict", "Counter",
                        "WeakKeyDictionary", "WeakValueDictionary", "WeakSet"})
RUNTIME = frozenset({"Lock", "RLock", "Event", "Condition", "Semaphore", "BoundedSemaphore", "Barrier", "Thread",
                     "Timer", "Queue", "SimpleQueue", "LifoQueue", "PriorityQueue", "local", "ThreadPoolExecutor",
                     "ProcessPoolExecutor", "count"})
MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "remove", "discard", "add", "clear", "update",
                      "setdefault", "appendleft", "popleft", "extendleft", "rotate", "sort", "reverse",
                      "difference_update", "intersection_update", "symmetric_difference_update"})
_DATA_BASES = frozenset({"NamedTuple", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "tuple", "frozenset"})

# (file, name) -> why its module's docstring does not name it yet: files whose owners have not got to them this
# round, or that this round must not touch. Shrink-only: a name documented (or gone) fails the test until its
# entry is deleted.
PENDING_UNDOCUMENTED_STATE: dict[tuple[str, str], str] = {
}


def _module_body(tree: ast.Module) -> Iterator[ast.stmt]:
    """The statements run at import: the module's, and those inside its top-level if / try / with blocks."""
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for part in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                todo.extend(part)
            for handler in getattr(node, "handlers", []):
                todo.extend(handler.body)
            continue
        yield node


def _called(value: ast.expr) -> str | None:
    if isinstance(value, ast.Call):
        func = value.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def _plain_data(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and _called(decorator) == "dataclass" and any(
                word.arg == "frozen" and isinstance(word.value, ast.Constant) and word.value.value is True
                for word in decorator.keywords):
            return True
    return any((base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")) in _DATA_BASES
               for base in node.bases)


def _changed_names(tree: ast.Module) -> set[str]:
    changed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and isinstance(node.value, ast.Name):
            changed.add(node.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and isinstance(node.func.value, ast.Name):
            changed.add(node.func.value.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            changed.add(node.target.id)
    return changed


def module_state(modules: dict[str, Module]) -> dict[tuple[str, str], str]:
    """(file, name) -> what makes the name process-wide state, for every module of the package."""
    stateful_classes = {node.name for module in modules.values() for node in ast.walk(module.tree)
                        if isinstance(node, ast.ClassDef) and not _plain_data(node)}
    found: dict[tuple[str, str], str] = {}
    for module in modules.values():
        bound: dict[str, ast.expr] = {}
        for node in _module_body(module.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        bound[target.id] = node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
                bound[node.target.id] = node.value
        changed = _changed_names(module.tree)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Global):
                for name in node.names:
                    found[(module.file, name)] = "rebound after import (global)"
        for name, value in bound.items():
            called = _called(value)
            if (isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp))
                    or called in CONTAINERS) and name in changed:
                found.setdefault((module.file, name), "a container changed after import")
            elif called in RUNTIME:
                found.setdefault((module.file, name), f"{called}()")
            elif called in stateful_classes:
                found.setdefault((module.file, name), f"an instance of {called}")
    return found


def _named_in(docstring: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", docstring) is not None


def undocumented_state(modules: dict[str, Module]) -> dict[tuple[str, str], str]:
    docstrings = {module.file: ast.get_docstring(module.tree) or "" for module in modules.values()}
    return {key: what for key, what in module_state(modules).items() if not _named_in(docstrings[key[0]], key[1])}


def test_process_wide_state_is_named_in_its_module_docstring(graph: Graph):
    found = undocumented_state(graph.modules)
    new = {key: what for key, what in found.items() if key not in PENDING_UNDOCUMENTED_STATE}
    assert not new, "process-wide state its module's docstring does not name (what it is, why one per process, " \
        "when it is made and dropped, which thread changes it): " + "; ".join(
            f"{file}: {name} ({what})" for (file, name), what in sorted(new.items()))
    stale = [key for key in PENDING_UNDOCUMENTED_STATE if key not in found]
    assert not stale, f"documented or gone; delete from PENDING_UNDOCUMENTED_STATE: {stale}"
    assert all(reason.strip() and "\n" not in reason for reason in PENDING_UNDOCUMENTED_STATE.values())


def test_what_counts_as_process_wide_state(tmp_path: Path):
    graph = _graph_of(tmp_path, {
        "__init__.py": "",
        "state.py": '''
            """Holds ``_named``, a cache kept for the process."""
            import itertools
            import threading
            from dataclasses import dataclass

            @dataclass(frozen=True)
            class Point:
                x: int

            class Keeper:
                pass

            __all__ = ["Keeper"]  # a list never changed: not state
            ORIGIN = Point(0)  # plain data
            _named: dict[str, int] = {}
            _cache = {}
            _seen = set()
            _lock = threading.Lock()
            _ids = itertools.count()
            _keeper = Keeper()
            _started = None
            if True:
                _late = []

            def remember(key):
                global _started
                _started = key
                _cache[key] = 1
                _seen.add(key)
                _named[key] = 2
                _late.append(key)
            ''',
    })
    assert undocumented_state(graph.modules) == {
        ("acp_notebook/state.py", "_cache"): "a container changed after import",
        ("acp_notebook/state.py", "_seen"): "a container changed after import",
        ("acp_notebook/state.py", "_late"): "a container changed after import",
        ("acp_notebook/state.py", "_lock"): "Lock()",
        ("acp_notebook/state.py", "_ids"): "count()",
        ("acp_notebook/state.py", "_keeper"): "an instance of Keeper",
        ("acp_notebook/state.py", "_started"): "rebound after import (global)",
    }


_MADE_ON_FIRST_USE = textwrap.dedent("""
    import importlib, json, sys
    for name in sys.argv[1:]:
        importlib.import_module(name)
    from acp_notebook import current_scope, launch
    print(json.dumps({"current": vars(current_scope)["_process_current"].made,
                      "registry": vars(launch)["_registry"].made}))
    launch.registry.names(), current_scope.current_session.get()
    print(json.dumps({"current": vars(current_scope)["_process_current"].made,
                      "registry": vars(launch)["_registry"].made}))
""")


@pytest.mark.slow
def test_the_current_session_and_the_agent_registry_are_made_on_first_use():
    """Importing the client, the magics, the proxy, the demo agent or the CLIs makes neither the process's
    CurrentSession nor its AgentRegistry; the first read of each makes it."""
    modules = ["acp_notebook", "acp_notebook.client", "acp_notebook.magics.magic", "acp_notebook.proxy",
               "acp_notebook.demo", "acp_notebook.cli", "acp_notebook.sweep.runner"]
    done = subprocess.run([sys.executable, "-c", _MADE_ON_FIRST_USE, *modules], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    after_import, after_use = map(json.loads, done.stdout.splitlines())
    assert after_import == {"current": False, "registry": False}
    assert after_use == {"current": True, "registry": True}
