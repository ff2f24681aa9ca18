"""Demo agent behaviour beyond plain chat: client requests that fail, forms (elicitation/create),
clients that predate config options (`modes`, session/set_model), and arithmetic tasks with known
answers for sweeps. Real agent processes over real pipes; frames checked against the ACP schema."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import RequestError
from test_demo_agent import (
    STEP_TIMEOUT,
    Harness,
    demo_agent,
    is_update,
    option,
    option_ids,
    run_async,
    shared_agent,  # noqa: F401 - the fixture behind @with_shared_agent (one agent for this module)
    step,
    text_of,
    updates_in,
    with_shared_agent,
)

from acp_notebook._protocol import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND
from acp_notebook.demo import tasks
from acp_notebook.demo.elicitation import REQUESTED_SCHEMA
from schema_check import validate_frame
from tests.sdk_compat import text_block


def reply_of(h: Harness, session_id: str) -> str:
    return text_of(updates_in(h.turn_frames(session_id), "agent_message_chunk"))


def turn_response(h: Harness, session_id: str) -> dict[str, Any]:
    return h.turn_frames(session_id)[-1].message


# --------------------------------------------------------------------------- failed client requests


@with_shared_agent
async def test_a_failed_permission_request_fails_the_tool_call_not_the_turn(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\n", encoding="utf-8")
    session_id, _ = await h.new_session(str(tmp_path))
    h.client.failures[(session_id, "session/request_permission")] = RequestError(METHOD_NOT_FOUND, "Method not found")
    assert await h.prompt(session_id, "read notes.txt") == "end_turn"
    frames = h.turn_frames(session_id)
    answer = next(f for f in frames if f.method == "session/request_permission" and f.kind == "response")
    assert answer.message["error"]["code"] == METHOD_NOT_FOUND
    assert h.reads_of(session_id) == []
    call = updates_in(frames, "tool_call")[0]
    final = updates_in(frames, "tool_call_update")[-1]
    assert (final["toolCallId"], final["status"]) == (call["toolCallId"], "failed")
    assert final["content"] == [{"type": "content", "content": {
        "type": "text", "text": "session/request_permission failed: Method not found"}}]
    # The plan stops at its first step; the turn ends normally with a reply saying what failed.
    assert [e["status"] for e in updates_in(frames, "plan")[-1]["entries"]] == ["pending", "pending", "pending"]
    assert reply_of(h, session_id) == (
        "[fast] Could not read notes.txt: asking for permission failed (Method not found)."
    )
    assert turn_response(h, session_id)["result"] == {"stopReason": "end_turn"}
    # The session is fine afterwards.
    del h.client.failures[(session_id, "session/request_permission")]
    await h.prompt(session_id, "read notes.txt")
    assert reply_of(h, session_id) == "[fast] Read notes.txt: 1 line."


@with_shared_agent
async def test_a_failed_write_fails_the_tool_call_not_the_turn(h: Harness, tmp_path: Path) -> None:
    session_id, _ = await h.new_session(str(tmp_path))
    h.client.failures[(session_id, "fs/write_text_file")] = RequestError(INTERNAL_ERROR, "Disk full")
    assert await h.prompt(session_id, "write hello to out.txt") == "end_turn"
    frames = h.turn_frames(session_id)
    assert not (tmp_path / "out.txt").exists()
    final = updates_in(frames, "tool_call_update")[-1]
    assert final["status"] == "failed"
    assert final["content"][0]["content"]["text"] == "fs/write_text_file failed: Disk full"
    assert reply_of(h, session_id) == "[fast] Could not write out.txt: Disk full."
    assert turn_response(h, session_id)["result"] == {"stopReason": "end_turn"}


# --------------------------------------------------------------------------- forms


def form_request_of(h: Harness, session_id: str) -> dict[str, Any]:
    frame = next(f for f in h.turn_frames(session_id) if f.method == "elicitation/create" and f.kind == "request")
    return frame.params


@with_shared_agent
async def test_ask_me_sends_a_form_and_answers_with_the_answers(h: Harness) -> None:
    session_id, _ = await h.new_session()
    h.client.forms[session_id] = {
        "action": "accept", "content": {"name": "Ada", "colour": "blue", "cups": 3, "notebooks": True},
    }
    assert await h.prompt(session_id, "Ask me a few things") == "end_turn"
    params = form_request_of(h, session_id)
    assert (params["sessionId"], params["mode"]) == (session_id, "form")
    schema = params["requestedSchema"]
    assert {name: p["type"] for name, p in schema["properties"].items()} == {
        "name": "string", "colour": "string", "cups": "number", "notebooks": "boolean",
    }
    assert schema["properties"]["colour"]["enum"] == ["red", "green", "blue"]
    assert schema["required"] == ["name", "colour"]
    assert reply_of(h, session_id) == (
        "[fast] Thank you, Ada! Favourite colour: blue. 3 cups of tea a day. You like notebooks."
    )
    # The client's SDK parsed the request into its typed form mode (the schema check ran on the frames).
    message, mode = h.client.form_requests[-1]
    assert message == "A few questions from the demo agent" and mode.session_id == session_id


def test_the_form_request_validates_against_the_schema() -> None:
    request = {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create",
               "params": {"sessionId": "s", "mode": "form", "message": "m", "requestedSchema": REQUESTED_SCHEMA}}
    assert validate_frame(request, "agent") == "request"
    answers = [
        {"action": "accept", "content": {"name": "Ada", "colour": "red", "cups": 1.5, "notebooks": False}},
        {"action": "decline"},
        {"action": "cancel"},
    ]
    for answer in answers:
        assert validate_frame({"jsonrpc": "2.0", "id": 7, "result": answer}, "client",
                              answers="elicitation/create") == "response"


@with_shared_agent
async def test_declined_cancelled_and_failed_forms_get_a_polite_reply(h: Harness) -> None:
    cases = [
        ({"action": "decline"}, None, "[fast] No problem, I will not ask."),
        ({"action": "cancel"}, None, "[fast] The questions were cancelled, so I have no answers."),
        (None, RequestError(INTERNAL_ERROR, "Form broke"), "[fast] I could not ask my questions: the form failed (Form broke)."),
        ({"action": "accept", "content": {"cups": "many"}}, None,
         "[fast] Thank you (no name given)! No favourite colour picked. Tea: no answer. Notebooks: no answer."),
    ]
    for answer, error, expected in cases:
        session_id, _ = await h.new_session()
        if answer is not None:
            h.client.forms[session_id] = answer
        if error is not None:
            h.client.failures[(session_id, "elicitation/create")] = error
        assert await h.prompt(session_id, "ask me") == "end_turn"
        assert reply_of(h, session_id) == expected


@run_async
async def test_a_client_without_forms_is_told_the_agent_cannot_ask(tmp_path: Path) -> None:
    async with demo_agent(tmp_path, forms=False) as h:
        session_id, _ = await h.new_session()
        await h.prompt(session_id, "ask me anything")
        assert not any(f.method == "elicitation/create" for f in h.log.frames)
        assert reply_of(h, session_id) == (
            "[fast] I would ask you a few questions, but this client cannot show forms "
            "(no elicitation.form capability)."
        )


@run_async
async def test_cancelling_the_turn_while_the_form_is_open(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as h:
        session_id, _ = await h.new_session()
        h.client.forms[session_id] = None  # the form stays open until the turn is cancelled
        turn = asyncio.ensure_future(h.conn.prompt(session_id=session_id, prompt=[text_block("ask me")]))
        await asyncio.wait_for(h.client.form_opened.wait(), STEP_TIMEOUT)
        await step(h.conn.cancel(session_id=session_id))
        h.client.cancel_sent.set()
        assert (await step(turn)).stop_reason == "cancelled"
        assert updates_in(h.turn_frames(session_id), "agent_message_chunk") == []
        # The session takes the next prompt at once.
        h.client.forms[session_id] = {"action": "decline"}
        assert await h.prompt(session_id, "ask me again") == "end_turn"
        assert reply_of(h, session_id) == "[fast] No problem, I will not ask."


# --------------------------------------------------------------------------- older clients


@with_shared_agent
async def test_modes_field_goes_along_and_follows_the_mode_option(h: Harness) -> None:
    session_id, options = await h.new_session()
    modes = h.log.last_result("session/new")["modes"]
    assert modes["currentModeId"] == "ask" == option(options, "mode")["currentValue"]
    assert [m["id"] for m in modes["availableModes"]] == [c["value"] for c in option(options, "mode")["options"]]

    # A mode picked as a config option is announced the old way too.
    await h.set_option(session_id, "mode", "code")
    update = await h.log.wait_for(is_update(session_id, "current_mode_update"), STEP_TIMEOUT)
    assert update.update == {"sessionUpdate": "current_mode_update", "currentModeId": "code"}
    await step(h.conn.resume_session(session_id=session_id, cwd=h.cwd))
    resumed = h.log.last_result("session/resume")
    assert resumed["modes"]["currentModeId"] == "code" == option(resumed["configOptions"], "mode")["currentValue"]

    # A mode picked the old way moves the config option (config_option_update with the full list).
    pushed_before = len(h.log.updates(session_id, "config_option_update"))
    await step(h.conn.set_session_mode(session_id=session_id, mode_id="ask"))
    await h.log.wait_for(
        lambda f: is_update(session_id, "config_option_update")(f)
        and len(h.log.updates(session_id, "config_option_update")) > pushed_before,
        STEP_TIMEOUT,
    )
    pushed = h.log.updates(session_id, "config_option_update")[-1]["configOptions"]
    assert option(pushed, "mode")["currentValue"] == "ask"
    await step(h.conn.load_session(cwd=h.cwd, session_id=session_id, mcp_servers=[]))
    assert h.log.last_result("session/load")["modes"]["currentModeId"] == "ask"


@run_async
async def test_set_model_maps_onto_the_model_option(tmp_path: Path) -> None:
    # session/set_model is not in the ACP schema: this test checks the other frames itself.
    async with demo_agent(tmp_path, check_frames=False) as h:
        session_id, _ = await h.new_session()
        assert await h.raw("session/set_model", {"sessionId": session_id, "modelId": "smart"}) == {}
        pushed = await h.log.wait_for(is_update(session_id, "config_option_update"), STEP_TIMEOUT)
        options = pushed.update["configOptions"]
        # The dependent thought level appears, exactly as after set_config_option.
        assert option_ids(options) == ["model", "thought_level", "mode", "tone", "show_thoughts"]
        assert option(options, "model")["currentValue"] == "smart"
        await h.prompt(session_id, "hello")
        assert reply_of(h, session_id).startswith("[smart] ")

        with pytest.raises(RequestError) as err:
            await h.raw("session/set_model", {"sessionId": session_id, "modelId": "huge"})
        assert err.value.code == INVALID_PARAMS and "valid values: fast, smart" in str(err.value)
        with pytest.raises(RequestError) as err:
            await h.raw("session/set_model", {"sessionId": session_id})
        assert err.value.code == INVALID_PARAMS and "modelId" in str(err.value)
        with pytest.raises(RequestError) as err:
            await h.raw("session/set_model", {"sessionId": "nope", "modelId": "fast"})
        assert err.value.code == RESOURCE_NOT_FOUND
        assert option(await h.set_option(session_id, "model", "smart"), "model")["currentValue"] == "smart"
    h.log.check()  # session/set_model is recorded unvalidated (in no schema); the rest is valid


@run_async
async def test_legacy_mode_keeps_refusing_set_model(tmp_path: Path) -> None:
    async with demo_agent(tmp_path, "--legacy", check_frames=False) as h:
        session_id, _ = await h.new_session()
        assert "configOptions" not in h.log.last_result("session/new")
        with pytest.raises(RequestError) as err:
            await h.raw("session/set_model", {"sessionId": session_id, "modelId": "smart"})
        assert err.value.code == METHOD_NOT_FOUND
    h.log.check()


# --------------------------------------------------------------------------- arithmetic tasks


def test_task_contract() -> None:
    cases = [
        # (prompt, smart's answer, fast's answer)
        ("What is 2 + 3?", 5, 5),
        ("what is -4 - -10?", 6, 6),
        ("Quick one. WHAT IS 6 * 7? Thanks", 42, 43),
        ("What is 6x7?", 42, 43),
        ("What is 6 X 7?", 42, 43),
        ("What is 7 / 2?", 3, 4),
        ("What is -7 / 2?", -3, -2),  # rounded toward zero
        ("What is 7 / -2?", -3, -2),
        ("What is 5 / 0?", None, None),
    ]
    for prompt, smart, fast in cases:
        task = tasks.parse_task(prompt)
        assert task is not None, prompt
        assert (tasks.model_answer(task, "smart"), tasks.model_answer(task, "fast")) == (smart, fast), prompt
    for not_a_task in ("What is 2 + 2", "What is 2.5 + 1?", "what is ACP?", "somewhat is 1 + 1?", "What is 2 ^ 3?"):
        assert tasks.parse_task(not_a_task) is None, not_a_task
    assert tasks.parse_task("What is 1 + 1? And what is 2 * 2?") == tasks.Task(1, "+", 1)
    assert tasks.answer_line(None) == "Answer: undefined" and tasks.answer_line(-3) == "Answer: -3"


@with_shared_agent
async def test_tasks_give_known_accuracies_per_model(h: Harness) -> None:
    """The sweep contract end to end: half +/- and half *,/ questions; fast scores 50%, smart 100%."""
    dataset = [
        ("What is 12 + 30?", "42"), ("What is 5 - 9?", "-4"),
        ("What is 6 * 7?", "42"), ("What is -9 / 2?", "-4"),
    ]
    scores = {}
    for model in ("fast", "smart"):
        session_id, _ = await h.new_session()
        await h.set_option(session_id, "model", model)
        correct = 0
        for prompt, target in dataset:
            assert await h.prompt(session_id, prompt) == "end_turn"
            reply = reply_of(h, session_id)
            assert reply.startswith(f"[{model}] ")
            last_line = reply.splitlines()[-1]
            assert last_line.startswith("Answer: ")
            correct += last_line == f"Answer: {target}"
        scores[model] = correct / len(dataset)
    assert scores == {"fast": 0.5, "smart": 1.0}


@with_shared_agent
async def test_task_replies_keep_the_answer_last_in_every_tone_and_mode(h: Harness) -> None:
    session_id, _ = await h.new_session()
    await h.set_option(session_id, "model", "smart")
    await h.set_option(session_id, "tone", "pirate")
    await h.set_option(session_id, "mode", "code")
    await h.prompt(session_id, "What is 8 / 3?")
    reply = reply_of(h, session_id)
    assert reply == (
        "[smart] I reckoned it careful, arr: 8 / 3 = 2.\n"
        "Here be the code:\n```python\nprint(int(8 / 3))\n```\n"
        "Answer: 2"
    )
    assert updates_in(h.turn_frames(session_id))[0]["sessionUpdate"] == "agent_thought_chunk"
