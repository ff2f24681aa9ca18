"""notebooks/quickstart.ipynb and notebooks/teaching-the-protocol.ipynb run top to bottom in a real kernel.

nbclient saves the widget state the kernel sent, which is what a reader of the executed
notebook sees: the panel's dropdowns (with the thought level the smart model added), the
session title in the headers, the streamed replies. The teaching notebook replays the
recordings in notebooks/recordings/, copied next to it as on Binder.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.kernel

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(name: str, workdir: Path) -> Any:
    shutil.copy(NOTEBOOKS / name, workdir / name)
    shutil.copytree(NOTEBOOKS / "recordings", workdir / "recordings")  # the teaching notebook replays them
    notebook = nbformat.read(workdir / name, as_version=4)
    client = notebook_client(notebook, workdir, timeout=180)
    client.execute()  # raises CellExecutionError on the first failing cell
    nbformat.write(notebook, workdir / name)  # kept for a look when a test fails
    return notebook


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    return execute("quickstart.ipynb", tmp_path_factory.mktemp("quickstart"))


@pytest.fixture(scope="module")
def teaching(tmp_path_factory):
    return execute("teaching-the-protocol.ipynb", tmp_path_factory.mktemp("teaching"))


def widget_models(notebook: Any, model_name: str) -> list[dict[str, Any]]:
    state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"] for m in state.values() if m["model_name"] == model_name]


def code_cell(notebook: Any, starts_with: str) -> Any:
    matches = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts_with)]
    assert len(matches) == 1, f"expected one code cell starting with {starts_with!r}"
    return matches[0]


def texts(cell: Any, mime: str = "text/html") -> str:
    # What a cell printed is one text, however the kernel split it into stream messages.
    parts = ["".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream")]
    parts += [o["data"][mime] for o in cell.outputs if mime in o.get("data", {})]
    return "\n".join(parts)


def titles(notebook: Any) -> list[str]:
    return [re.search(r'class="acpnb-title"[^>]*>([^<]*)<', s["value"]).group(1)
            for s in widget_models(notebook, "HTMLModel") if 'class="acpnb-title"' in s["value"]]


def replies(notebook: Any) -> list[str]:
    """The replies as the saved turns show them (a live turn's reply reaches its widget as deltas, which nbclient's
    widget state does not keep; the output's static form holds it whole)."""
    pages = [o["data"]["text/html"] for c in notebook.cells for o in c.get("outputs", ())
             if "text/html" in o.get("data", {})]
    return [html.unescape(re.sub(r"<[^>]+>", "", reply)).strip() for page in pages
            for reply in re.findall(r'<div class="acpnb-reply"[^>]*>(.*?)</div>', page, re.S)]


@pytest.fixture(scope="module")
def branches(tmp_path_factory):
    return execute("branches.ipynb", tmp_path_factory.mktemp("branches"))


def test_branches_notebook_branches_checks_out_and_sweeps(branches):
    for cell in branches.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o["output_type"] == "error"], cell.source
    said = [texts(c, "text/plain") for c in branches.cells if c.cell_type == "code"]
    assert 'You have sent 2 prompts before this one: "I like apples", "and pears".' in "\n".join(replies(branches))
    assert 'You have sent 2 prompts before this one: "I like apples", "and plums".' in "\n".join(replies(branches))
    assert any("branch b2 from main after 1 turn, forked" in text for text in said)
    assert any("Now on branch main" in text for text in said)
    assert any("== fast" in text and "== smart" in text for text in said)
    assert any("smart vs fast on includes" in text for text in said)


@pytest.mark.parametrize("fixture", ["quickstart", "teaching"])
def test_no_cell_failed(fixture, request):
    notebook = request.getfixturevalue(fixture)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o["output_type"] == "error"], cell.source


def test_quickstart_saves_the_panel_with_the_smart_model_and_its_thought_level(quickstart):
    dropdowns = widget_models(quickstart, "DropdownModel")
    models = [d for d in dropdowns if d["description"] == "Model"]
    assert models[0]["_options_labels"] == ["Everyday / Fast", "Deep thinking / Smart"]
    assert models[0]["index"] == 1  # `%acp set model=smart` reached the panel shown by `%acp start demo`
    (thought_level,) = [d for d in dropdowns if d["description"] == "Thought level"]
    assert thought_level["_options_labels"] == ["Low", "Medium", "High"] and thought_level["index"] == 1
    # Three panels: the first session, the session opened in a scratch directory, the pirate agent's.
    assert [d["description"] for d in dropdowns].count("Tone") == 3
    assert [c["description"] for c in widget_models(quickstart, "CheckboxModel")].count("Show thoughts") == 3


def test_quickstart_saves_the_title_headers_and_the_replies(quickstart):
    assert "Explain the agent client protocol…" in titles(quickstart)
    assert "What is a session" in titles(quickstart)
    answers = replies(quickstart)
    assert any(a.startswith('[smart] I thought it over at the medium level. You said: "Explain') for a in answers)
    assert "[fast] Read notes.txt: 2 lines." in answers
    assert any(a.startswith("[fast] Arr, ye said") for a in answers)
    tool_calls = [o["data"]["text/html"] for c in quickstart.cells for o in c.get("outputs", ())
                  if "acpnb-tool-call" in o.get("data", {}).get("text/html", "")]
    assert any("allowed automatically" in html and ">completed<" in html for html in tool_calls)
    assert "model = Smart" in texts(code_cell(quickstart, "%acp set model=smart"))


def test_readers_without_the_widgets_still_see_the_title_and_the_reply(quickstart):
    """Untrusted notebooks and static renderers fall back to Markdown: the end of the turn refreshed it."""
    (output,) = code_cell(quickstart, "%%acp\nExplain").outputs
    markdown = output["data"]["text/markdown"]
    assert markdown.startswith("**Explain the agent client protocol…** · model: Smart · done")
    assert '[smart] I thought it over at the medium level. You said: "Explain' in markdown
    # The panel's saved form is its final truth: headed by the title the first turn gave the session, and
    # closed by the notebook's last cell.
    (panel,) = next(c for c in quickstart.cells if c.source == "%acp start demo").outputs
    saved = panel["data"]["text/markdown"]
    assert saved.startswith("**Explain the agent client protocol…** · acp-notebook-demo") and "closed" in saved


def inspector_tables(notebook: Any) -> list[str]:
    """The frame table of every live inspector, as its widget state was saved."""
    models = widget_models(notebook, "AnyModel")  # the table's FollowingBox (acp_notebook.widgets.scrollbox)
    return [s["value"] for s in models if 'class="acpnb-frames"' in s.get("value", "")]


def test_quickstart_shows_the_inspector_filtered_to_set_config_option(quickstart):
    (table,) = inspector_tables(quickstart)
    assert table.count('<details class="acpnb-frame') == 2 and "2 of " in table and "model fast\u2192smart" in table


def dropdowns(notebook: Any, description: str) -> list[dict[str, Any]]:
    return [d for d in widget_models(notebook, "DropdownModel") if d["description"] == description]


def test_teaching_notebook_shows_each_step_of_the_protocol(teaching):
    steps = {
        "import tempfile": ["initialize", "protocolVersion", "clientCapabilities", "agentInfo"],
        "session = agent.new_session()": ["session/new", "configOptions", "_demo_style"],
        'session.set("model", "smart")': ["session/set_config_option", "thought_level", "model=&#x27;smart&#x27;",
                                          "model fast\u2192smart \u00b7 +thought_level"],
        'turn = session.prompt("What does a client do?")': ["session/prompt", "agent_thought_chunk",
                                                             "agent_message_chunk", "session_info_update",
                                                             "usage_update", "stopReason=end_turn"],
        'turn = session.prompt("Please use the fallback")': ["config_option_update",
                                                              "model smart\u2192fast \u00b7 \u2212thought_level"],
        '(workspace / "notes.txt")': ["session/request_permission", "fs/read_text_file", "allow_once"],
    }
    for source, expected in steps.items():
        shown = texts(code_cell(teaching, source))
        for fragment in expected:
            assert fragment in shown, (source, fragment)
    explained = texts(code_cell(teaching, "import tempfile"))
    assert 'class="acpnb-explain"' in explained
    assert "https://agentclientprotocol.com/protocol/initialization" in explained  # the spec link
    summary = texts(code_cell(teaching, 'print("reply:'))
    assert "stop reason: end_turn" in summary and "title:       What does a client do\n" in summary
    assert "model now: fast | options: ['model', 'mode', 'tone', 'show_thoughts']" in texts(
        code_cell(teaching, 'print("model now:"'))
    (table,) = [t for t in inspector_tables(teaching) if "model fast\u2192smart" in t]
    assert table.count('<details class="acpnb-frame') == 2 and "2 of " in table


def test_teaching_notebook_shows_notices_a_compaction_and_tool_names(teaching):
    notices = texts(code_cell(teaching, 'turn = session.prompt("notices")'))
    assert "warning  Rate limited:" in notices and "error    The search tool failed:" in notices
    assert notices.count('<details class="acpnb-frame') == 3 and "severity" in notices
    compaction = texts(code_cell(teaching, 'turn = session.prompt("compact'))
    assert "status:  completed" in compaction and 'summary: 4 earlier exchanges. You first said: "What does a ' \
        'client do?"' in compaction
    assert "compaction_summary_chunk" in compaction and "tokens in use" in compaction
    assert "Read notes.txt | name: read_text_file | read completed" in texts(code_cell(teaching, "print(turn.text)"))


def test_teaching_notebook_talks_to_an_agent_written_in_a_cell(teaching):
    from_code = texts(code_cell(teaching, "tutor_agent = acpnb.start(tutor)"))
    assert "session: one conversation in a working directory" in from_code and "tutor-1" in from_code
    panel = code_cell(teaching, "%load_ext acp_notebook").outputs[-1]["data"]["text/markdown"]
    # The tutor never titles its sessions: the header shows the first prompt, marked as such.
    assert panel.startswith("**_How does initialize work, and what is a prompt?_** (from the first prompt) \u00b7 "
                            "tutor 1.0")
    assert any(r.startswith("initialize: the first request;") for r in replies(teaching))  # the %%acp answer
    log = code_cell(teaching, "%acp log").outputs[-1]["data"]["text/plain"]
    assert "Protocol inspector of agent 'tutor'" in log and "\u2192 request" in log and "\u2190 response" in log
    clumsy = texts(code_cell(teaching, "class Clumsy(Tutor):"))
    assert "Clumsy.prompt raised KeyError: 'What is ACP?'" in clumsy and "return GLOSSARY[text]" in clumsy
    assert "session/cancel is a notification" in clumsy  # the session went on after the error
    sleepy = texts(code_cell(teaching, "class Sleepy(Tutor):"))
    assert "stop reason: cancelled" in sleepy and "session/cancel" in sleepy and "stopReason=cancelled" in sleepy


def test_teaching_exercises_show_the_learners_options_as_widgets(teaching):
    models = dropdowns(teaching, "Model")
    assert len(models) >= 5 and all(m["_options_labels"] == ["Everyday / Fast", "Deep thinking / Smart"]
                                    for m in models)
    assert [t["index"] for t in dropdowns(teaching, "Tone")].count(1) == 1  # %acp set tone=pirate, one tutor
    assert all(t["_options_labels"] == ["Plain", "Pirate"] for t in dropdowns(teaching, "Tone"))
    assert any(t["_options_labels"] == ["Low", "Medium", "High"] and t["index"] == 2
               for t in dropdowns(teaching, "Thought level"))
    assert any(r.startswith("Arr, matey! session: one conversation") for r in replies(teaching))

    def panel(source: str) -> str:
        return code_cell(teaching, source).outputs[0]["data"]["text/markdown"]

    # Panels are updated in place: each shows its agent's last settings.
    assert "Model: Smart \u00b7 Thought level: High \u00b7 Tone: Plain" in panel("%acp start --object thinking_tutor")
    assert "\nthought_level = High" in texts(code_cell(teaching, "%acp set model=smart thought_level"))
    assert "Model: Fast \u00b7 Tone: Plain" in panel("%acp start --object fallback_tutor")  # after the fallback
    fallback = texts(code_cell(teaching, "fallback = acpnb.current()"))
    assert "model now: fast | options: ['model', 'tone']" in fallback
    assert "config_option_update" in fallback and "model smart\u2192fast \u00b7 \u2212thought_level" in fallback
    assert "What is a prompt turn" in titles(teaching)
    titled = texts(code_cell(teaching, "titled = acpnb.current()"))
    assert "title: What is a prompt turn | meta: {'questions': 2}" in titled


def test_teaching_notebook_walks_through_recorded_real_agents(teaching):
    claude_new = texts(code_cell(teaching, "replay_dir = "))
    assert "session/new" in claude_new and "configOptions" in claude_new and "availableModes" in claude_new
    options = texts(code_cell(teaching, "for option in claude_session.config:"))
    assert "model  (model) = 'default'  choices: default, opus, fable, sonnet, haiku" in options
    assert "fast   (model_config) = False      choices: False, True" in options  # an on/off option
    turns = texts(code_cell(teaching, 'claude_session.set("model", "haiku")'))
    assert "Hello from the interop model. You said: say hi" in turns and "available_commands_update" in turns
    assert "line 39 of the recording" in texts(code_cell(teaching, "try:\n    claude_session.prompt"))
    tool = texts(code_cell(teaching, "write_turn = "))
    assert "Write notes.txt | edit | completed" in tool
    assert "asked: ['Yes', 'Yes, allow all edits during this session', 'No'] -> chosen: allow-once" in tool
    assert "session/request_permission" in tool and "tool_call_update" in tool
    switch = texts(code_cell(teaching, "opencode = acpnb.replay("))
    assert "before: ['model', 'mode']" in switch and "after:  ['model', 'effort', 'mode']" in switch
    assert "+effort" in switch and "config_option_update" in switch
    assert "effort (thought_level) = high" in texts(code_cell(teaching, 'opencode_session.set("effort"'))
    assert "written by the client: hello world" in texts(code_cell(teaching, 'opencode_session.prompt("say hi")'))
    four = texts(code_cell(teaching, 'for name in ("claude", "opencode", "codex", "gemini"):'))
    assert "OpenCode 1.18.33: model=interop/interop-model, mode=build" in four
    assert "gemini-cli 0.61.0: mode=default (from modes), model=auto (from models)" in four
    recorded = [t for t in inspector_tables(teaching) if "ses_df89edcd1ffe9bR2M95m4mAq4J" in t]
    assert recorded and "50 frames" in recorded[0]  # the whole recording, opened without an agent


def test_teaching_notebook_explains_the_kernel_entry_and_makes_a_kernel_tool_call(teaching):
    # Part 1's session/new already carries the entry; 3.6 explains it from a real agent's recording.
    assert "mcp: kernel" in texts(code_cell(teaching, "session = agent.new_session()"))
    recorded = texts(code_cell(teaching, "from acp_notebook.widgets.inspector import summarize_frames"))
    assert "MCP servers offered to the session" in recorded
    assert "kernel: acp-notebook&#x27;s own MCP server" in recorded and "masked (***)" in recorded
    assert "&quot;ACPNB_KERNEL_TOKEN&quot;" in recorded and "&quot;***&quot;" in recorded
    calls = texts(code_cell(teaching, "tool_rows = "))
    assert calls.count("mcp__kernel__list_variables") >= 2 and "mcp__kernel__run_code" in calls
    assert "session/request_permission" in calls
    # The demo agent, live: list_variables and inspect_variable over MCP, df's real columns in the reply.
    live = texts(code_cell(teaching, "import pandas as pd"))
    assert "kernel: list_variables" in live and "kernel: inspect_variable" in live
    assert "- city: str, 0" in live and "- rain_mm: int64, 0" in live
    # A prompt that carries df: its text, the line about the table, and the CSV in a resource block.
    attached = texts(code_cell(teaching, 'kernel_demo.new_session().prompt("Which city is driest?"'))
    assert "&#x27;Which city is driest?&#x27; + text, resource kernel://variables/df.csv" in attached
    assert "city,rain_mm\\nOslo,763\\nLima,6\\nPune,722\\n" in attached
