"""SessionState semantics: wholesale option replacement, grouping, categories, info updates, legacy fields."""

from __future__ import annotations

import pytest

from acp_notebook.state import ConfigOptions, SessionState, merge_meta

MODEL_GROUPED = {
    "id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "fast",
    "options": [
        {"group": "everyday", "name": "Everyday", "options": [{"value": "fast", "name": "Fast"}]},
        {"group": "deep", "name": "Deep thinking", "options": [{"value": "smart", "name": "Smart",
                                                                 "description": "slower"}]},
    ],
}
MODE_FLAT = {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
             "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}]}
TONE_CUSTOM = {"id": "tone", "name": "Tone", "category": "_demo_style", "type": "select", "currentValue": "plain",
               "options": [{"value": "plain", "name": "Plain"}, {"value": "pirate", "name": "Pirate"}]}
BOOL = {"id": "show_thoughts", "name": "Show thoughts", "type": "boolean", "currentValue": True}
UNKNOWN = {"id": "slider", "name": "Temperature", "type": "range", "currentValue": 0.3, "min": 0, "max": 1}


def make_state(options):
    state = SessionState("s1")
    state.apply_session_result({"sessionId": "s1", "configOptions": options})
    return state


def test_options_keep_agent_order_and_index_by_id():
    state = make_state([MODEL_GROUPED, MODE_FLAT, TONE_CUSTOM, BOOL])
    assert state.config.ids() == ["model", "mode", "tone", "show_thoughts"]
    assert state.config[1].id == "mode"
    assert state.config["mode"].value == "ask"
    assert "tone" in state.config and "nope" not in state.config
    with pytest.raises(KeyError, match="model, mode, tone, show_thoughts"):
        state.config["nope"]


def test_grouped_choices_are_flattened_with_their_group_label():
    model = make_state([MODEL_GROUPED]).config["model"]
    assert model.grouped
    assert [(c.value, c.name, c.group, c.group_id) for c in model.choices] == [
        ("fast", "Fast", "Everyday", "everyday"), ("smart", "Smart", "Deep thinking", "deep")]
    assert model.choices[1].description == "slower"
    assert model.values == ["fast", "smart"]
    assert list(model.groups) == ["Everyday", "Deep thinking"]
    assert model.value_name == "Fast"


def test_custom_categories_are_kept_and_booleans_parsed():
    state = make_state([TONE_CUSTOM, BOOL])
    assert state.config["tone"].category == "_demo_style"
    assert state.config["show_thoughts"].type == "boolean"
    assert state.config["show_thoughts"].value is True
    assert state.config["show_thoughts"].values == [False, True]


def test_unknown_types_stay_out_of_config_but_in_raw_state():
    state = make_state([MODE_FLAT, UNKNOWN])
    assert state.config.ids() == ["mode"]
    assert [o["id"] for o in state.raw_options] == ["mode", "slider"]
    assert state.raw_options[1]["max"] == 1


def test_every_option_list_replaces_the_last_one_wholesale():
    state = make_state([MODEL_GROUPED, MODE_FLAT])
    events = []
    state.observe(lambda e: events.append(e))
    thought = {"id": "thought_level", "name": "Thinking", "category": "thought_level", "type": "select",
               "currentValue": "medium", "options": [{"value": "low", "name": "Low"},
                                                     {"value": "medium", "name": "Medium"}]}
    smart = dict(MODEL_GROUPED, currentValue="smart")
    state.set_options([smart, thought, MODE_FLAT])
    assert state.config.ids() == ["model", "thought_level", "mode"]
    assert state.model == "smart"
    assert state.apply_update({"sessionUpdate": "config_option_update", "configOptions": [MODEL_GROUPED]})
    assert state.config.ids() == ["model"]
    assert [e.kind for e in events] == ["config", "config"]
    assert isinstance(events[-1].data, ConfigOptions)


def test_session_info_update_is_partial_and_null_clears():
    state = SessionState("s1")
    state.apply_update({"sessionUpdate": "session_info_update", "title": "First", "updatedAt": "2026-01-01T00:00:00Z",
                        "_meta": {"a": {"b": 1, "c": 2}, "keep": True}})
    assert (state.title, state.updated_at) == ("First", "2026-01-01T00:00:00Z")
    state.apply_update({"sessionUpdate": "session_info_update", "_meta": {"a": {"b": None, "d": 4}}})
    assert state.title == "First", "an omitted field is unchanged"
    assert state.meta == {"a": {"c": 2, "d": 4}, "keep": True}
    state.apply_update({"sessionUpdate": "session_info_update", "title": None})
    assert state.title is None and state.updated_at == "2026-01-01T00:00:00Z"
    state.apply_update({"sessionUpdate": "session_info_update", "_meta": None})
    assert state.meta == {}


def test_merge_meta_does_not_mutate_its_inputs():
    current = {"x": {"y": 1}}
    merged = merge_meta(current, {"x": {"z": 2}})
    assert merged == {"x": {"y": 1, "z": 2}} and current == {"x": {"y": 1}}


def test_legacy_modes_and_models_become_options():
    state = SessionState("g1")
    state.apply_session_result({
        "sessionId": "g1",
        "modes": {"currentModeId": "default", "availableModes": [{"id": "default", "name": "Default"},
                                                                 {"id": "yolo", "name": "YOLO"}]},
        "models": {"currentModelId": "gemini-pro", "availableModels": [{"modelId": "gemini-pro", "name": "Pro"}]},
    })
    mode, model = state.config["mode"], state.config["model"]
    assert (mode.category, mode.legacy_source, mode.read_only) == ("mode", "modes", False)
    assert (model.category, model.read_only, model.value) == ("model", True, "gemini-pro")
    state.apply_update({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"})
    assert state.config["mode"].value == "yolo"


def test_config_options_win_over_legacy_fields():
    state = SessionState("s1")
    state.apply_session_result({"sessionId": "s1", "configOptions": [MODE_FLAT],
                                "modes": {"currentModeId": "x", "availableModes": [{"id": "x", "name": "X"}]}})
    assert state.config.ids() == ["mode"] and state.config["mode"].legacy_source is None


def test_unknown_update_kinds_are_reported_not_raised():
    state = SessionState("s1")
    assert state.apply_update({"sessionUpdate": "hologram", "x": 1}) is False
    assert state.apply_update({"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": "hi"}}) is True


def test_a_broken_observer_does_not_stop_the_others():
    state = SessionState("s1")
    seen = []

    def broken(event):
        raise RuntimeError("view bug")

    state.observe(broken)
    stop = state.observe(seen.append)
    state.set_options([MODE_FLAT])
    stop()
    state.set_options([MODE_FLAT])
    assert len(seen) == 1
