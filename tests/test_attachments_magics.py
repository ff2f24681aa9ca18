"""``%%acp --attach NAME`` and ``{name}`` in a cell: the references, their errors, and a real kernel.

The unit tests drive ``magics.context`` with a namespace dict; the kernel test runs a notebook
(nbclient) whose cell attaches a DataFrame to the demo agent, and reads the prompt the agent was
sent back out of ``agent.log`` in that kernel.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from IPython.core.error import UsageError

from acp_notebook.magics import context
from acp_notebook.magics.grammar import parse_cell_line
from tests.kernels import notebook_client


@pytest.fixture
def namespace():
    import os

    return {"df": pd.DataFrame({"city": ["Oslo", "Lima"], "rain": [763, 6]}), "rows": [10, 20, 30],
            "config": {"model": "smart", "API_TOKEN": "x"}, "dataset": "owls", "_hidden": 1, "os": os,
            "OPENAI_API_KEY": "sk-abcdefghijk"}


def test_the_cell_line_takes_repeated_attach_options():
    command = parse_cell_line("second --attach df --attach fig --no-wait")
    assert (command.alias, command.attach, command.wait) == ("second", ("df", "fig"), False)
    assert parse_cell_line("").attach == ()
    with pytest.raises(UsageError, match="%%acp: --attach df given more than once; attach each once"):
        parse_cell_line("--attach df --attach fig --attach df")


def test_references_are_names_attributes_and_indexes_never_code(namespace):
    assert context.resolve("df.shape", namespace, where="w") == (2, 2)
    assert context.resolve("rows[-1]", namespace, where="w") == 30
    assert context.resolve("config['model']", namespace, where="w") == "smart"
    assert context.resolve('df["city"][1]', namespace, where="w") == "Lima"
    for code in ("df.head()", "rows[0] + 1", "__import__('os')", "rows[1:2]", "x if y else z"):
        with pytest.raises(UsageError, match="is not a variable reference: use a name, optionally with"):
            context.resolve(code, namespace, where="%%acp --attach")


def test_an_unknown_name_is_named_with_the_close_matches(namespace):
    with pytest.raises(UsageError) as info:
        context.attached(["df", "datset"], namespace)
    assert str(info.value) == "%%acp --attach datset: no variable 'datset' in this notebook; did you mean dataset?"
    with pytest.raises(UsageError, match="no variable 'zebra' in this notebook; run the cell that defines it first"):
        context.expand("about {zebra}", namespace)
    with pytest.raises(UsageError, match=r"%%acp: \{df.colour\}: df.colour failed: AttributeError"):
        context.expand("{df.colour}", namespace)
    with pytest.raises(UsageError, match=r"rows\[7\] failed: IndexError"):
        context.expand("{rows[7]}", namespace)


def test_braces_insert_values_escape_and_leave_code_alone(namespace):
    body = "Rows: {df.shape[0]}, first {rows[0]}; model {config['model']}. Literal {{df}}; code {} and {\"a\": 1}."
    assert context.expand(body, namespace) == \
        "Rows: 2, first 10; model smart. Literal {df}; code {} and {\"a\": 1}."
    assert context.expand("{df}", namespace) == "city,rain\nOslo,763\nLima,6\n"
    assert context.expand("key {OPENAI_API_KEY} and {config}", namespace) == \
        'key *** and {"model": "smart", "API_TOKEN": "***"}'


def test_user_names_leave_out_modules_and_hidden_names(namespace):
    assert context.user_names({**namespace, "In": [], "exit": None}) == \
        ["OPENAI_API_KEY", "config", "dataset", "df", "rows"]


# --- a real kernel ---------------------------------------------------------------------------------
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

SENT = ("import json, acp_notebook as acpnb\n"
        "print(json.dumps([e['msg']['params']['prompt'] for e in acpnb.current().agent.log\n"
        "                  if e['dir'] == 'send' and e['msg'].get('method') == 'session/prompt']))")


@pytest.mark.kernel
def test_attach_and_braces_in_a_real_kernel(tmp_path):
    cells = [
        "%load_ext acp_notebook",
        "%acp start demo",
        "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'rain_mm': [763, 6, 722]})",
        "%%acp --attach df\nWhich of the {df.shape[0]} cities is driest?",
        SENT,
        "%%acp --attach dff\nanything",
        "%%acp\nabout {cites}",
        SENT,
        "%acp stop",
    ]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    for index in (5, 6):  # a UsageError fails the cell: nbclient goes on past these two
        notebook.cells[index].metadata["tags"] = ["raises-exception"]
    notebook_client(notebook, tmp_path, timeout=120).execute()
    (prompt,) = json.loads(notebook.cells[4].outputs[0]["text"])
    assert prompt[0] == {"type": "text", "text": "Which of the 3 cities is driest?"}
    assert "`df`: pandas DataFrame, 3 rows x 2 columns" in prompt[1]["text"]
    assert prompt[2]["resource"]["text"] == "city,rain_mm\nOslo,763\nLima,6\nPune,722\n"
    # The turn's saved output names what was attached.
    turn_outputs = [o for o in notebook.cells[3].outputs if "text/plain" in o.get("data", {})]
    assert "Attached: df (table, DataFrame 3 x 2, 38 B)" in turn_outputs[-1]["data"]["text/plain"]
    # Bad references are UsageErrors in magic terms (IPython prints them on stderr), and nothing more was sent.
    assert [o["text"] for o in notebook.cells[5].outputs] == \
        ["UsageError: %%acp --attach dff: no variable 'dff' in this notebook; did you mean df?\n"]
    assert [o["text"] for o in notebook.cells[6].outputs] == \
        ["UsageError: %%acp: {cites}: no variable 'cites' in this notebook; run the cell that defines it first\n"]
    assert len(json.loads(notebook.cells[7].outputs[0]["text"])) == 1
