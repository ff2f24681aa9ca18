"""Each protocol constant and rule is written once, in acp_notebook/_protocol.py, and behaves as the spec says."""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

from acp_notebook import _protocol
from acp_notebook._protocol import (
    find_model_option,
    join_agent_model,
    legacy_option,
    parse_bool_word,
    split_agent_model,
)

PACKAGE = Path(_protocol.__file__).resolve().parent
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "_protocol.py")


def _code_tokens(path: Path) -> list[tokenize.TokenInfo]:
    """Tokens that are code: comments and docstrings/strings are left out by looking at NUMBER/NAME/OP only."""
    return [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
            if t.type in (tokenize.NUMBER, tokenize.NAME, tokenize.OP)]


def test_no_json_rpc_error_code_is_written_outside_the_protocol_module():
    found = []
    for path in SOURCES:
        if not re.search(r"32[0-8][0-9][0-9]", path.read_text()):
            continue  # no such number anywhere in the file: tokenizing it (the slow part) could find none
        tokens = _code_tokens(path)
        for minus, number in zip(tokens, tokens[1:]):
            if minus.string == "-" and number.type == tokenize.NUMBER and number.string.isdigit() \
                    and 32000 <= int(number.string) <= 32899:
                found.append(f"{path.relative_to(PACKAGE)}:{number.start[0]}: -{number.string}")
    assert not found, "use the names in acp_notebook/_protocol.py:\n" + "\n".join(found)


@functools.cache
def _parsed() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple((path, ast.parse(path.read_text(), str(path))) for path in SOURCES)


def _trees():
    """Every source file's tree, parsed once for the module's tests (the tests only read them)."""
    yield from _parsed()


@pytest.mark.slow
def test_the_rules_are_defined_only_in_the_protocol_module():
    rules = {"find_model_option", "split_agent_model", "join_agent_model", "legacy_option", "client_version",
             "parse_bool_word", "BOOLEAN_WORDS", "AUTH_REQUIRED", "AUTH_RETRIED_METHODS", "KERNEL_SERVER_NAME"}
    found = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno}: {n}" for n in names if n in rules]
    assert not found, "\n".join(found)


def test_the_package_version_and_the_model_rule_are_read_in_one_place():
    found = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value == "acp-notebook"
                                                  for a in node.args):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: the version lookup")
            if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value == "model"
                                                     for c in [node.left, *node.comparators]):
                if "category" in ast.unparse(node):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: which option is the model")
    assert not found, "\n".join(found)


def test_the_version_sent_is_the_installed_distributions():
    """The version is written once (acp_notebook/_version.py, which pyproject.toml reads at build time): what
    the package sends in clientInfo/agentInfo is what pip installed."""
    from importlib.metadata import version

    from acp_notebook._protocol import client_version

    import acp_notebook

    assert client_version() == version("acp-notebook") == acp_notebook.__version__


def test_the_model_option_is_a_select_with_category_model_else_id_model():
    mode = {"id": "mode", "category": "mode", "type": "select"}
    assert find_model_option([mode]) is None
    by_id = {"id": "model", "type": "select"}
    by_category = {"id": "llm", "category": "model", "type": "select"}
    assert find_model_option([mode, by_id, by_category]) is by_category
    assert find_model_option([by_id]) is by_id
    assert find_model_option([{"id": "model", "category": "model", "type": "boolean"}]) is None
    assert find_model_option(None) is None


@pytest.mark.parametrize(("value", "agents", "expected"), [
    ("claude:opus", None, ("claude", "opus")),
    ("q:org:model-b:latest", ["q"], ("q", "org:model-b:latest")),
    ("a:vendor/x", ["a", "b"], ("a", "vendor/x")),
    ("zz:fast", ["a"], None),
    ("fast", None, None),
    ("a:", None, None),
    (":m", None, None),
    (True, None, None),
])
def test_agent_model_ids_split_at_the_first_separator(value, agents, expected):
    assert split_agent_model(value, agents) == expected
    if expected is not None:
        assert join_agent_model(*expected) == value


def test_legacy_modes_and_models_become_select_options():
    modes = {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code"}, {"x": 1}]}
    option = legacy_option("mode", modes)
    assert option == {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
                      "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "code"}]}
    models = {"availableModels": [{"modelId": "m1", "name": "One", "description": "first"}]}
    assert legacy_option("model", models)["currentValue"] == "m1"  # falls back to the first choice
    assert legacy_option("mode", {"availableModes": []}) is None
    assert legacy_option("mode", None) is None


def test_on_off_words():
    assert [parse_bool_word(w) for w in ("On", " yes", "1", "TRUE")] == [True] * 4
    assert [parse_bool_word(w) for w in ("off", "No", "0", "false")] == [False] * 4
    assert parse_bool_word("maybe") is None


def test_a_prompt_and_a_kernel_entry_are_read_from_any_json_without_failing():
    from acp_notebook._protocol import prompt_text
    from acp_notebook.kernel_tools.client import kernel_entry

    blocks = [{"type": "text", "text": "hi"}, {"type": "resource", "resource": "not an object"},
              {"type": "resource", "resource": {"uri": "file:///a.txt"}}, {"type": "resource_link", "uri": "x:y"}, 7]
    assert prompt_text(blocks) == "hi\nfile:///a.txt\nx:y"
    server = {"name": "kernel", "command": "python", "args": ["-m", "bridge"], "env": {"TOKEN": "t"}}
    assert kernel_entry([server]) == {"name": "kernel", "command": "python", "args": ["-m", "bridge"], "env": []}
    server["env"] = [{"name": "TOKEN", "value": "t"}, "junk"]
    assert kernel_entry([server])["env"] == [{"name": "TOKEN", "value": "t"}]
