"""Kernel objects in prompts: ``session.prompt(text, attach=[...])`` against real agents.

The demo agent runs as a subprocess and accepts embedded resources but no images; a CellAgent
declares image support in its initialize answer. What each one was sent is read from
``agent.log`` (the frames as they crossed the wire) and checked against the official schema.
"""

from __future__ import annotations

import base64
import io
import sys

import matplotlib
import numpy as np
import pandas as pd
import pytest

import acp_notebook as acpnb
from acp_notebook import attachments
from acp_notebook.cellagent import CellAgent
from tests.schema_check import FrameLog

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def sent_prompt(agent: acpnb.Agent) -> list[dict]:
    """The content blocks of the last session/prompt the client sent."""
    prompts = [e["msg"] for e in agent.log if e["dir"] == "send" and e["msg"].get("method") == "session/prompt"]
    return prompts[-1]["params"]["prompt"]


def validate(agent: acpnb.Agent) -> None:
    log = FrameLog(local="client")
    for entry in agent.log:
        log.record("client" if entry["dir"] == "send" else "agent", entry["msg"])
    log.check()


class Viewer(CellAgent):
    """An agent that takes images and embedded resources, and says which block kinds it got."""

    def initialize(self, client):
        answer = super().initialize(client)
        answer["agentCapabilities"]["promptCapabilities"] = {"image": True, "embeddedContext": True}
        return answer

    def prompt(self, text):
        return f"got: {text.splitlines()[0]}"


@pytest.fixture
def figure():
    fig, axes = plt.subplots(figsize=(4, 3), dpi=50)
    axes.plot([1, 3, 2])
    axes.set_title("sales by day")
    axes.set_xlabel("day")
    yield fig
    plt.close(fig)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    agent = acpnb.start([sys.executable, "-m", "acp_notebook.demo"], cwd=tmp_path_factory.mktemp("demo"), timeout=30)
    yield agent
    agent.close()
    validate(agent)


def test_a_dataframe_reaches_the_demo_agent_as_a_csv_resource_with_its_shape(demo):
    df = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "rain_mm": [763.0, 6.4, 722.1]})
    session = demo.new_session()
    turn = session.prompt("Which city is driest?", attach={"df": df}, timeout=30)
    assert turn.stop_reason == "end_turn"
    text, head, resource = sent_prompt(demo)
    assert text == {"type": "text", "text": "Which city is driest?"}
    assert "`df`: pandas DataFrame, 3 rows x 2 columns" in head["text"] and "rain_mm (float64)" in head["text"]
    assert resource["type"] == "resource"
    assert resource["resource"] == {"uri": "kernel://variables/df.csv", "mimeType": "text/csv",
                                    "text": "city,rain_mm\nOslo,763.0\nLima,6.4\nPune,722.1\n"}
    (item,) = turn.attachments
    assert (item.name, item.kind, item.summary, item.sent) == ("df", "table", "DataFrame 3 x 2", True)
    # The demo agent read the block: reopened, the session's replayed history holds the resource's address.
    demo.load_session(session.id, timeout=30)
    replayed = [e["msg"]["params"]["update"]["content"]["text"] for e in demo.log if e["dir"] == "recv"
                and e["msg"].get("method") == "session/update"
                and e["msg"]["params"]["update"]["sessionUpdate"] == "user_message_chunk"]
    assert "kernel://variables/df.csv" in "".join(replayed)


def test_a_huge_frame_is_sliced_before_it_is_rendered_and_says_so(demo):
    rows = 2_000_000
    df = pd.DataFrame({"n": np.arange(rows), "label": np.repeat(np.array(["x" * 500], dtype=object), rows)})
    turn = demo.new_session().prompt("look", attach=[("big", df)], timeout=30)
    _text, head, resource = sent_prompt(demo)
    body = resource["resource"]["text"]
    assert len(body.encode()) <= attachments.MAX_TEXT_BYTES
    assert f"{rows:,} rows x 2 columns" in head["text"]
    kept = len(body.splitlines()) - 1
    assert 0 < kept <= attachments.MAX_ROWS
    assert f"cut to the first {kept} of {rows:,} rows" in head["text"]
    assert max(len(line) for line in body.splitlines()) < attachments.MAX_CELL_CHARS + 20  # long cells cut
    assert turn.attachments[0].note == f"cut to the first {kept} of {rows:,} rows"


def test_a_figure_is_left_out_with_a_note_for_the_demo_agent_which_takes_no_images(demo, figure):
    assert demo.capabilities["promptCapabilities"]["image"] is False
    turn = demo.new_session().prompt("what does it show?", attach={"fig": figure}, timeout=30)
    blocks = sent_prompt(demo)
    assert [b["type"] for b in blocks] == ["text", "text"]
    note = blocks[1]["text"]
    assert "`fig`: matplotlib figure, 200 x 150 px; left out: the agent does not accept images" in note
    assert "sales by day, x: day" in note  # what text the figure holds still goes
    (item,) = turn.attachments
    assert not item.sent and item.size == 0 and "not sent" in item.label


def test_a_figure_goes_as_a_png_image_block_to_an_agent_that_accepts_images(tmp_path, figure):
    from PIL import Image

    with acpnb.start(Viewer(), cwd=tmp_path, timeout=10) as agent:
        assert agent.capabilities["promptCapabilities"]["image"] is True
        turn = agent.new_session().prompt("describe", attach=[figure, ("arr", np.eye(3))], timeout=10)
        blocks = sent_prompt(agent)
        validate(agent)
    assert [b["type"] for b in blocks] == ["text", "text", "image", "text", "resource"]
    image = blocks[2]
    assert image["mimeType"] == "image/png"
    png = base64.b64decode(image["data"])
    assert Image.open(io.BytesIO(png)).size == (200, 150)
    assert "`attachment 1`: matplotlib figure, 200 x 150 px" in blocks[1]["text"]
    assert blocks[4]["resource"]["text"].startswith("[[1. 0. 0.]")
    assert "shape (3, 3), dtype float64" in blocks[3]["text"]
    assert [a.kind for a in turn.attachments] == ["image", "array"]
    assert turn.attachments[0].size == len(png)
    assert turn.text == "got: describe"


def test_without_embedded_context_the_table_goes_as_text(tmp_path):
    class Plain(CellAgent):  # a CellAgent advertises neither images nor embedded resources
        def prompt(self, text):
            return f"heard {len(text)} characters"

    with acpnb.start(Plain(), cwd=tmp_path, timeout=10) as agent:
        agent.new_session().prompt("sum it", attach={"df": pd.DataFrame({"a": [1, 2]})}, timeout=10)
        blocks = sent_prompt(agent)
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert blocks[1]["text"].endswith("\n\n```csv\na\n1\n2\n```")


def test_secret_names_and_values_are_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVICE_API_KEY", "sk-live-0123456789")
    with acpnb.start(Viewer(), cwd=tmp_path, timeout=10) as agent:
        session = agent.new_session()
        session.prompt("check", attach={"OPENAI_API_KEY": "sk-abcdefgh12345",
                                        "settings": {"password": "hunter22", "db_token": "t0k3n", "host": "db"},
                                        "log": "connected with sk-live-0123456789"}, timeout=10)
        blocks = sent_prompt(agent)
    texts = " ".join(b.get("text", "") + b.get("resource", {}).get("text", "") for b in blocks)
    for secret in ("sk-abcdefgh12345", "hunter22", "t0k3n", "sk-live-0123456789"):
        assert secret not in texts
    settings = [b for b in blocks if b["type"] == "resource" and b["resource"]["uri"].endswith("settings.json")]
    assert settings[0]["resource"]["text"] == '{"password": "***", "db_token": "***", "host": "db"}'
    assert "***SERVICE_API_KEY***" in texts


def test_attach_takes_pairs_a_mapping_or_objects_and_refuses_a_bare_string(tmp_path):
    with acpnb.start(Viewer(), cwd=tmp_path, timeout=10) as agent:
        session = agent.new_session()
        with pytest.raises(TypeError, match=r"attach= takes a list of objects.*attach=\[df, fig\]"):
            session.prompt("x", attach="df", timeout=10)
        assert session.turns == []  # nothing was sent
        turn = session.start_turn("x", attach=[{"a": 1}, "a note", ("n", 3)])
        turn.future.result(10)
    assert [a.name for a in turn.attachments] == ["attachment 1", "attachment 2", "n"]
    assert [a.kind for a in turn.attachments] == ["data", "text", "text"]


def test_the_turn_view_and_its_saved_form_name_what_was_attached(tmp_path):
    from acp_notebook.widgets.chat import TurnView

    with acpnb.start(Viewer(), cwd=tmp_path, timeout=10) as agent:
        turn = agent.new_session().start_turn("x", attach={"df": pd.DataFrame({"a": range(80)})})
        view = TurnView(turn)
        view.finished.result(10)
    label = "df (table, DataFrame 80 x 1, 142 B; cut to the first 50 of 80 rows)"
    assert label in view.attached.value
    bundle, _metadata = view._repr_mimebundle_()
    assert f"Attached: {label}" in bundle["text/plain"]
    assert "Attached: df (table, DataFrame 80 x 1" in bundle["text/markdown"]
    assert 'class="acpnb-attached"' in bundle["text/html"] and "DataFrame 80 x 1" in bundle["text/html"]


def test_inline_text_of_values_and_its_refusals():
    assert attachments.inline_text("hello", "greeting") == "hello"
    assert attachments.inline_text(3.5, "x") == "3.5"
    assert attachments.inline_text("sk-abcdefgh", "MY_TOKEN") == "***"
    assert attachments.inline_text(pd.DataFrame({"a": [1]}), "df") == "a\n1\n"
    assert len(attachments.inline_text("y" * 10_000, "long").encode()) == attachments.MAX_INLINE_BYTES
    fig = plt.figure()
    with pytest.raises(attachments.NotInlinable, match="--attach fig"):
        attachments.inline_text(fig, "fig")
    plt.close(fig)


def test_a_repr_that_raises_is_reported_not_raised():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr today")

    item = attachments.attachment(Broken(), "b")
    assert "its repr raised RuntimeError: no repr today" in item.blocks[0]["text"]
    nested = attachments.attachment({"x": Broken()}, "d", embedded=True)
    assert "<Broken instance at" in nested.blocks[1]["resource"]["text"]  # reprlib names it instead
