"""Every kernel tool result of text carries a ``structuredContent`` object beside its text, through the real
bridge and the official MCP client, as an agent's MCP client receives it; a result with an image carries
none, and never starts with text that reads as JSON but not as an object.

Why (structured.py): Gemini CLI reads the first text block of a result without one as JSON and fails the
call when that is not an object (run_code printing ``1491``); Claude Code and Codex show their model the
structured content instead of the blocks, so it must carry the output itself, and it would hide an image.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_notebook import _loop
from acp_notebook.kernel_tools import KernelTools
from acp_notebook.kernel_tools.answers import Answer
from acp_notebook.kernel_tools.client import open_kernel_tools
from acp_notebook.kernel_tools.namespace import current_shell
from acp_notebook.kernel_tools.structured import result_parts, structured_content

pd = pytest.importorskip("pandas")

TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def bridge_imports_this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge runs as the client's child with PYTHONPATH passed through: it must import this checkout."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


@pytest.fixture
def namespace() -> dict[str, Any]:
    return {"df": pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "rain_mm": [763, 6, 722]}), "numbers": [1, 2, 3]}


@pytest.fixture
def tools(namespace: dict[str, Any]) -> Iterator[KernelTools]:
    kernel_tools = KernelTools(policy="allow", run_timeout=20.0, namespace=namespace)
    _loop.run_sync(kernel_tools.start(), TIMEOUT)
    try:
        yield kernel_tools
    finally:
        _loop.run_sync(kernel_tools.close(), TIMEOUT)


def call(tools: KernelTools, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """Each call's CallToolResult, as the official MCP client parsed it off the bridge."""
    async def go() -> list[Any]:
        async with open_kernel_tools(tools.entry) as session:
            return [await session.call_tool(name, arguments) for name, arguments in calls]

    return _loop.run_sync(go(), TIMEOUT)


def text(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def test_every_tool_answers_with_an_object_beside_its_text(tools: KernelTools) -> None:
    results = call(tools, ("list_variables", {}), ("inspect_variable", {"name": "df", "rows": 2}),
                   ("run_code", {"code": "print('rows', len(df))\nint(df['rain_mm'].sum())"}),
                   ("notebook_history", {"n": 2}), ("propose_cell", {"code": "df.plot()"}))
    listing, inspected, ran, history, proposed = results
    for result in results:
        assert isinstance(result.structured_content, dict) and text(result), result
    assert [v["name"] for v in listing.structured_content["variables"]] == ["df", "numbers"]
    assert inspected.structured_content == {"text": text(inspected)} and "rain_mm" in text(inspected)
    # What Claude Code and Codex show their model: the output itself, not only that the call worked.
    assert ran.structured_content == {"output": "rows 3\n1491\n", "error": None} == {"output": text(ran),
                                                                                      "error": None}
    # Without an IPython shell in this process notebook_history answers with an error, as an object too (another
    # module of the same worker may have started one: then it answers with the shell's history).
    assert history.structured_content == ({"error": text(history)} if history.is_error else {"text": text(history)})
    assert history.is_error == (current_shell() is None)
    assert proposed.structured_content == {"text": text(proposed)} and "not run" in text(proposed)


@pytest.mark.parametrize("code", ["print(1491)", "1491", "print([1, 2, 3])", "[1, 2, 3]", "print('null')",
                                  "print('\"a string\"')", "print('true')", "-2.5e3", "{}"])
def test_output_that_is_json_but_not_an_object_still_comes_with_an_object(tools: KernelTools, code: str) -> None:
    """Gemini CLI parses the first text block of a result without structured content as JSON and stores it;
    its MCP SDK then refuses anything but an object. With our object there, it never guesses."""
    (result,) = call(tools, ("run_code", {"code": code}))
    assert not result.is_error, text(result)
    json.loads(text(result))  # the text alone is valid JSON: what made Gemini fail
    assert result.structured_content == {"output": text(result), "error": None}


def test_errors_and_refusals_carry_their_reason_in_the_object(tools: KernelTools) -> None:
    failed, typo, wrong_argument = call(tools, ("run_code", {"code": "print(7)\n1 / 0"}), ("list_variable", {}),
                                        ("inspect_variable", {"name": 3}))
    assert failed.is_error and failed.structured_content["output"] == "7\n"
    assert failed.structured_content["error"].rstrip().endswith("ZeroDivisionError: division by zero")
    assert failed.structured_content["output"] + failed.structured_content["error"] == text(failed)
    assert typo.is_error and typo.structured_content == {"error": text(typo)} and "list_variables" in text(typo)
    assert wrong_argument.is_error and wrong_argument.structured_content == {"error": text(wrong_argument)}
    tools.policy = "read-only"
    (refused,) = call(tools, ("run_code", {"code": "1"}))
    assert refused.is_error and refused.structured_content == {"output": "", "error": text(refused)}
    assert refused.structured_content["error"].startswith("refused: the kernel tools are read-only")


def test_an_answer_with_an_image_carries_no_object_so_the_model_sees_the_image(tools: KernelTools,
                                                                               namespace: dict[str, Any]) -> None:
    """Claude Code and Codex show their model the structured content instead of the blocks, images dropped."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(2, 2))
    figure.add_subplot().plot([1, 3, 2])
    namespace["fig"] = figure
    (inspected,) = call(tools, ("inspect_variable", {"name": "fig"}))
    assert [block.type for block in inspected.content] == ["text", "image"]
    assert text(inspected).startswith("matplotlib Figure") and inspected.structured_content is None
    assert base64.b64decode(inspected.content[1].data).startswith(b"\x89PNG")


def test_a_plot_after_printed_json_comes_image_first_so_no_client_reads_the_text_as_the_answer(
        tools: KernelTools) -> None:
    """Gemini CLI would read a first text block `7` as the structured content (a number: the call fails)."""
    pytest.importorskip("matplotlib")
    code = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "print(7)\nplt.figure(figsize=(1, 1), dpi=20)\nlines = plt.plot([1, 2])")
    (ran,) = call(tools, ("run_code", {"code": code}))
    assert not ran.is_error and ran.structured_content is None
    assert [block.type for block in ran.content] == ["image", "text"]
    assert text(ran) == "7\n"  # figures come back after the output: the plot is the first image
    (labelled,) = call(tools, ("run_code", {"code": code.replace("print(7)", "print('seven')")}))
    assert [block.type for block in labelled.content] == ["text", "image"]  # not JSON: the order is kept


def test_an_answer_s_own_object_is_used_when_it_is_plain_json_and_derived_when_not() -> None:
    listing = Answer.text("1 variable", structured={"variables": [{"name": "x", "type": "int"}]})
    assert structured_content(listing, "list_variables") == {"variables": [{"name": "x", "type": "int"}]}
    # A run_code answer that carries the value apart keeps its output and error beside it.
    ran = Answer.text("hi\n3\n", structured={"result": "3"})
    assert structured_content(ran, "run_code") == {"output": "hi\n3\n", "error": None, "result": "3"}
    # NaN is no JSON a JavaScript client can parse, and an object is no JSON at all: the text stands in.
    for odd in ({"value": math.nan}, {"value": object()}):
        assert structured_content(Answer.text("odd", structured=odd), "inspect_variable") == {"text": "odd"}
    # No tool name (an in-process caller): still an object.
    assert structured_content(Answer.error("nope")) == {"error": "nope"}
    assert structured_content(Answer([]), None) == {"text": ""}


def test_result_parts_move_an_image_first_only_before_text_that_parses_as_json_but_not_an_object() -> None:
    image = {"type": "image", "data": "aVZCT1I=", "mimeType": "image/png"}
    for first, moved in (("[1, 2]\n", True), ("null", True), (" -3.5 ", True), ('{"a": 1}', False),
                         ("rows 3", False), ("[" * 100_000, False)):
        blocks, structured = result_parts(Answer([{"type": "text", "text": first}, image]), "run_code")
        assert structured is None
        assert [b["type"] for b in blocks] == (["image", "text"] if moved else ["text", "image"]), first
    blocks, structured = result_parts(Answer([{"type": "text", "text": "1491"}]), "run_code")
    assert structured == {"output": "1491", "error": None} and blocks == [{"type": "text", "text": "1491"}]
