"""The kernel tools' names, descriptions and argument schemas (the interface agents see), and
the checks of the arguments an agent sends. Pure data; any thread."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["READING_TOOLS", "TOOLS", "ArgumentError", "argument", "names_kernel_tool"]

TOOLS: dict[str, dict[str, Any]] = {
    "list_variables": {
        "description": "List the variables defined in the user's Jupyter kernel: name, type, shape or length, "
                       "approximate memory size. Modules, IPython internals and _names are left out.",
        "input_schema": {"type": "object", "properties": {}},
    },
    "inspect_variable": {
        "description": "Look at one variable of the user's kernel: a DataFrame's columns, dtypes, null counts, "
                       "head and describe(); an array's shape, dtype, min and max; a figure or image as a PNG; "
                       "dicts, lists, tuples, sets, dataclasses, named tuples and namespaces item by item; any "
                       "other object as its repr() (the one method of the user's objects the reading tools run). "
                       "Shortened to fit, saying what was cut; values under secret-looking names (api_key, "
                       "*_TOKEN, password...) and values such names held show as ***.",
        "input_schema": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "description": "The variable's name."},
            "rows": {"type": "integer", "minimum": 0, "maximum": 100, "default": 10,
                     "description": "Rows of a table's head to show."}}},
    },
    "run_code": {
        "description": "Run Python code in the user's kernel, in their namespace, as a notebook cell would: "
                       "printed output, the last expression's value, displays and figures come back. "
                       "Depending on the user's setting it is refused or needs their approval.",
        "input_schema": {"type": "object", "required": ["code"], "properties": {
            "code": {"type": "string", "description": "Python source to run."}}},
    },
    "notebook_history": {
        "description": "The source of the last cells the user ran in the notebook, with short outputs.",
        "input_schema": {"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
                  "description": "How many of the last cells."}}},
    },
    "propose_cell": {
        "description": "Propose a new notebook cell to the user: it appears below the running cell, NOT run; "
                       "the user decides whether to run it.",
        "input_schema": {"type": "object", "required": ["code"], "properties": {
            "code": {"type": "string", "description": "The cell's Python source."},
            "explanation": {"type": "string", "description": "One or two sentences on what it does and why."}}},
    },
}
READING_TOOLS = frozenset({"list_variables", "inspect_variable", "notebook_history"})


class ArgumentError(ValueError):
    """An argument an agent sent that the tool cannot use; the message says what to send."""


_KINDS = {str: "a string", int: "an integer"}


def argument(tool: str, arguments: dict[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    value = arguments.get(key, default)
    if value is ...:
        raise ArgumentError(f"{tool} needs the argument {key!r} ({_KINDS[kind]})")
    if value is default:
        return value
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ArgumentError(f"{tool}: {key!r} must be {_KINDS[kind]}, not {type(value).__name__}")
    return value


def names_kernel_tool(name: Any, title: Any, tool: str) -> bool:
    """Whether an agent's tool call (its programmatic ``name`` where it gives one, else its ``title``) is a call of
    the kernel server's ``tool``, as each agent names MCP tools: "mcp__kernel__run_code" (Claude Code),
    "mcp_kernel_run_code" (Gemini CLI), "kernel_run_code" (OpenCode), "kernel: run_code" (the demo agent),
    "run_code (kernel MCP Server)" (Gemini's title)."""
    for said in (name, title):
        text = str(said or "").lower()
        if "kernel" in text and re.search(rf"(?<![a-z0-9]){re.escape(tool)}(?![a-z0-9_])", text):
            return True
    return False
