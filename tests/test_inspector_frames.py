"""The inspector's analysis layer on hand-made frames: explanations, pairing, config differences, session
info, schema checks and capabilities; plain functions over log entries, no agent and no widgets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_notebook import _explain, _schema
from acp_notebook.frames import analyze, capabilities
from acp_notebook.widgets._frames_html import frames_markdown, frames_text, table_html

TESTS = Path(__file__).resolve().parent
SCHEMA = json.loads((TESTS / "acp_schema" / "schema.json").read_text(encoding="utf-8"))
# The pages of the v1 protocol documentation (docs/docs.json of the specification repository).
SPEC_PAGES = {"overview", "initialization", "authentication", "session-setup", "session-list", "session-delete",
              "prompt-turn", "content", "tool-calls", "elicitation", "file-system", "cancellation", "terminals",
              "agent-plan", "session-modes", "session-config-options", "slash-commands", "extensibility",
              "transports", "schema"}
SID = "sess-1"


def entry(direction: str, t: float, **msg: Any) -> dict[str, Any]:
    return {"dir": direction, "t": t, "msg": {"jsonrpc": "2.0", **msg}}


def option(oid: str, value: Any, values: list[str] | None = None, *, name: str = "") -> dict[str, Any]:
    if values is None:
        return {"id": oid, "name": name or oid.title(), "type": "boolean", "currentValue": value}
    return {"id": oid, "name": name or oid.title(), "type": "select", "currentValue": value,
            "options": [{"value": v, "name": v.title()} for v in values]}


def update(t: float, **fields: Any) -> dict[str, Any]:
    return entry("recv", t, method="session/update", params={"sessionId": SID, "update": fields})


# --- the explanation table ---------------------------------------------------------------------------
def test_explanations_cover_every_method_and_update_kind_in_the_schema():
    methods = {d["x-method"] for d in SCHEMA["$defs"].values() if "x-method" in d}
    kinds = {b["properties"]["sessionUpdate"]["const"] for b in SCHEMA["$defs"]["SessionUpdate"]["oneOf"]}
    assert len(methods) > 20 and len(kinds) >= 11
    assert methods <= set(_explain.METHODS), sorted(methods - set(_explain.METHODS))
    assert kinds <= set(_explain.UPDATES), sorted(kinds - set(_explain.UPDATES))
    pages = [info.page for info in _explain.METHODS.values()] + [page for page, _text in _explain.UPDATES.values()]
    assert {page.split("#")[0] for page in pages} <= SPEC_PAGES
    for method, info in _explain.METHODS.items():
        assert info.ask.endswith(".") and (info.answer.endswith(".") or not info.answer), method
        is_request = any(d.get("x-method") == method and name.endswith("Request")
                         for name, d in SCHEMA["$defs"].items())
        assert bool(info.answer) == is_request, f"{method}: a request needs an answer text, a notification none"


def test_explain_picks_the_request_answer_error_or_update_caption():
    ask = _explain.explain("session/set_config_option", "request")
    answer = _explain.explain("session/set_config_option", "result")
    assert "changes one session setting" in ask.text and "COMPLETE list" in answer.text
    assert ask.url == "https://agentclientprotocol.com/protocol/session-config-options#setting-a-config-option"
    assert "failed" in _explain.explain("session/prompt", "error").text
    chunk = _explain.explain("session/update", "notification", "agent_message_chunk")
    assert "reply" in chunk.text and chunk.url.endswith("prompt-turn#3-agent-reports-output")
    assert "extension" in _explain.explain("_demo/ping", "request").text
    assert "not a method of ACP v1" in _explain.explain("session/set_model", "request").text
    assert "ignore" in _explain.explain("session/update", "notification", "brand_new_kind").text


def test_the_packaged_schema_is_the_tests_copy_with_its_attribution():
    packaged = Path(_schema.__file__).parent / "_data" / "acp_schema"
    assert (packaged / "schema.json").read_bytes() == (TESTS / "acp_schema" / "schema.json").read_bytes()
    readme = (packaged / "README.md").read_text(encoding="utf-8")
    assert "Apache License 2.0" in readme and "agentclientprotocol/agent-client-protocol" in readme
    assert _schema.load_schema()["$defs"]["SessionUpdate"] == SCHEMA["$defs"]["SessionUpdate"]


# --- pairing ------------------------------------------------------------------------------------------
def test_each_request_is_paired_with_its_answer_and_round_trip_time():
    rows = analyze([
        entry("send", 10.0, id=0, method="initialize", params={"protocolVersion": 1}),
        entry("send", 10.1, id=1, method="session/new", params={"cwd": "/w", "mcpServers": []}),
        entry("recv", 10.25, id=0, result={"protocolVersion": 1}),
        # The agent's own request reuses id 1: ids are per direction, so it must not take the client's answer.
        entry("recv", 10.3, id=1, method="fs/read_text_file", params={"sessionId": SID, "path": "/w/a"}),
        entry("send", 10.32, id=1, result={"content": "a\nb\n"}),
        entry("recv", 10.6, id=1, result={"sessionId": SID}),
        entry("send", 11.0, id=2, method="session/prompt", params={"sessionId": SID, "prompt": []}),
        entry("send", 11.5, id=3, method="session/load", params={"sessionId": "x", "cwd": "/w", "mcpServers": []}),
        entry("recv", 11.7, id=3, error={"code": -32002, "message": "Resource not found"}),
    ])
    init, new, init_answer, read, read_answer, new_answer, prompt, load, load_error = rows
    assert (init.pair, init_answer.pair, init_answer.method) == (2, 0, "initialize")
    assert init.rtt == init_answer.rtt == pytest.approx(0.25)
    assert (read.pair, read_answer.pair, read_answer.direction) == (4, 3, "send")
    assert read_answer.summary == "2 lines" and read_answer.rtt == pytest.approx(0.02)
    assert (new.pair, new_answer.method, new_answer.session_id) == (5, "session/new", SID)
    assert prompt.pair is None and prompt.rtt is None  # still waiting
    assert (load_error.kind, load_error.pair, load_error.summary) == ("error", 7, "-32002 Resource not found")
    text = frames_text(rows)
    assert "\u21aa #2 \u00b7 250 ms" in text and "\u21a9 #0 \u00b7 250 ms" in text and "waiting" in text


# --- config options and session info --------------------------------------------------------------------
def test_config_answers_and_updates_show_what_changed():
    first = [option("model", "fast", ["fast", "smart"]), option("mode", "ask", ["ask", "code"])]
    second = [option("model", "smart", ["fast", "smart"]), option("mode", "ask", ["ask", "code"]),
              option("thought_level", "medium", ["low", "medium", "high"], name="Thought level")]
    pushed = [option("model", "smart", ["fast", "smart", "huge"]),
              option("thought_level", "high", ["low", "medium", "high"]), option("verbose", True)]
    rows = analyze([
        entry("send", 1, id=1, method="session/new", params={"cwd": "/w", "mcpServers": []}),
        entry("recv", 2, id=1, result={"sessionId": SID, "configOptions": first}),
        entry("send", 3, id=2, method="session/set_config_option",
              params={"sessionId": SID, "configId": "model", "value": "smart"}),
        entry("recv", 4, id=2, result={"configOptions": second}),
        entry("send", 5, id=3, method="session/set_config_option",
              params={"sessionId": SID, "configId": "model", "value": "nope"}),
        entry("recv", 6, id=3, error={"code": -32602, "message": "Invalid params"}),
        update(7, sessionUpdate="config_option_update", configOptions=pushed),
    ])
    opened, request, answer, refused = rows[1], rows[2], rows[3], rows[5]
    assert opened.config.initial and opened.summary == f"session {SID} \u00b7 2 options: model=fast, mode=ask"
    assert request.summary == "model='smart'"
    assert answer.config.changed == (("model", "fast", "smart"),)
    assert answer.config.added == (("thought_level", "Thought level", "medium"),) and not answer.config.removed
    assert answer.summary == "3 options \u00b7 model fast\u2192smart \u00b7 +thought_level"
    assert refused.config is None  # a refusal changes nothing
    pushed_row = rows[6]
    assert pushed_row.update == "config_option_update"
    assert pushed_row.config.lines() == ["thought_level: 'medium' \u2192 'high'", "+ verbose (Verbose) = True",
                                         "\u2212 mode (Mode)", "model: choices changed (+1 \u22120)"]
    html = table_html(rows)
    assert "config changed" in html and "+ verbose (Verbose) = True" in html


def test_session_info_updates_apply_the_partial_update_rules():
    rows = analyze([
        update(1, sessionUpdate="session_info_update", title="First", _meta={"a": {"x": 1, "y": 2}, "b": 1}),
        update(2, sessionUpdate="session_info_update", _meta={"a": {"x": None, "z": 3}}),  # title unchanged
        update(3, sessionUpdate="session_info_update", title=None, updatedAt="2026-01-01T00:00:00Z"),
        update(4, sessionUpdate="session_info_update", _meta=None),
    ])
    assert [r.info for r in rows] == [
        {"title": "First", "updatedAt": None, "_meta": {"a": {"x": 1, "y": 2}, "b": 1}},
        {"title": "First", "updatedAt": None, "_meta": {"a": {"y": 2, "z": 3}, "b": 1}},
        {"title": None, "updatedAt": "2026-01-01T00:00:00Z", "_meta": {"a": {"y": 2, "z": 3}, "b": 1}},
        {"title": None, "updatedAt": "2026-01-01T00:00:00Z", "_meta": {}},
    ]
    assert rows[0].summary == "title='First', _meta={'a': {'x': 1, 'y': 2}, 'b': 1}"
    assert "Session info after this update" in table_html(rows[:1])


# --- the schema -------------------------------------------------------------------------------------------
def test_frames_that_break_the_schema_or_add_fields_are_marked():
    rows = analyze([
        entry("send", 1, id=1, method="session/set_config_option", params={"sessionId": SID, "configId": "model"}),
        update(2, sessionUpdate="agent_message_chunk", content={"type": "text", "text": "hi", "colour": "red"}),
        update(3, sessionUpdate="agent_message_chunk", content={"type": "text"}),
        entry("send", 4, id=2, method="fs/read_text_file", params={"sessionId": SID, "path": "/a"}),
        {"dir": "recv", "t": 5, "msg": {"id": 9, "result": {}, "error": {"code": 1, "message": "both"}}},
        entry("send", 6, id=3, method="_demo/anything", params={"free": ["form"]}),
        {"dir": "send", "t": 7, "msg": {"jsonrpc": "1.0", "method": "session/cancel", "params": {"sessionId": SID}}},
        update(8, sessionUpdate="usage_update", used=1, size=10, _meta={"anything": {"goes": True}}),
    ])
    found = [[(i.level, i.path) for i in r.issues] for r in rows]
    assert found[0] == [("violation", "params")] and "'value' is a required property" in rows[0].issues[0].message
    assert found[1] == [("unknown", "params/update/content/colour")]
    assert found[2] == [("violation", "params/update/content")]
    assert "'text' is a required property" in rows[2].issues[0].message  # the text branch, not "any of"
    assert found[3] == [("violation", "method")] and "sent by the agent" in rows[3].issues[0].message
    assert found[4] == [("violation", "")]
    assert found[5] == [] and found[7] == []  # extension methods and _meta are free-form
    assert found[6] == [("violation", "jsonrpc")]
    html = table_html(rows)
    assert html.count('class="acpnb-schema-error"') == 5 and html.count('class="acpnb-schema-unknown"') == 1
    assert "5 breaking the schema" in html and "\u2717 schema" in frames_markdown(rows)


def test_without_jsonschema_frames_are_left_unchecked(monkeypatch):
    monkeypatch.setattr(_schema, "available", lambda: False)
    (row,) = analyze([entry("send", 1, id=1, method="session/cancel")])
    assert row.issues is None and row.checked and not row.violations


# --- capabilities ---------------------------------------------------------------------------------------
def test_capabilities_offered_are_set_against_those_used():
    rows = analyze([
        entry("send", 1, id=0, method="initialize", params={
            "protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": False},
                                                         "terminal": False, "_meta": {"x": 1}}}),
        entry("recv", 2, id=0, result={"protocolVersion": 1, "agentCapabilities": {
            "loadSession": False, "promptCapabilities": {"image": True}, "sessionCapabilities": {"list": {}},
            "_custom": True}}),
        entry("recv", 3, id=5, method="fs/read_text_file", params={"sessionId": SID, "path": "/a"}),
        entry("recv", 4, id=6, method="fs/write_text_file", params={"sessionId": SID, "path": "/a", "content": ""}),
        entry("send", 5, id=1, method="session/load", params={"sessionId": SID, "cwd": "/", "mcpServers": []}),
        entry("send", 6, id=2, method="session/prompt", params={"sessionId": SID, "prompt": [
            {"type": "image", "data": "", "mimeType": "image/png"}]}),
    ])
    status = {(u.side, u.name): (u.status, u.used_by) for u in capabilities(rows)}
    assert status[("client", "fs.readTextFile")] == ("used", (2,))
    assert status[("client", "fs.writeTextFile")] == ("used but not offered", (3,))
    assert status[("client", "terminal")] == ("not offered", ())
    assert status[("agent", "loadSession")] == ("used but not offered", (4,))
    assert status[("agent", "promptCapabilities.image")] == ("used", (5,))
    assert status[("agent", "sessionCapabilities.list")] == ("offered, not used", ())
    assert status[("agent", "_custom")] == ("offered, not used", ())  # capabilities the table does not know
    assert all(u.offered is None for u in capabilities(rows[2:]))  # no initialize seen: unknown, not "not offered"
