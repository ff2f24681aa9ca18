"""ReplyRouter, alone: answers are applied in wire order by the applier their sender registered (no I/O)."""

from __future__ import annotations

import asyncio

from acp_notebook.connection.routing import ReplyRouter
from acp_notebook.state import SessionState

OPTIONS_V1 = [{"id": "model", "name": "Model", "type": "select", "currentValue": "fast",
               "options": [{"value": "fast", "name": "Fast"}, {"value": "smart", "name": "Smart"}]}]
OPTIONS_V2 = [{**OPTIONS_V1[0], "currentValue": "smart"},
              {"id": "thought_level", "name": "Thought level", "type": "select", "currentValue": "high",
               "options": [{"value": "high", "name": "High"}]}]
OPTIONS_V3 = [{**OPTIONS_V1[0], "currentValue": "fast"}]  # the agent fell back, after answering


def request(request_id, method="session/set_config_option"):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}


def answer(request_id, result):
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def test_an_answer_runs_the_applier_of_its_request_only():
    router = ReplyRouter()
    applied = []
    with router.sending(lambda frame: applied.append(("first", frame["result"]))):
        router.on_send(request(1))
    with router.sending(lambda frame: applied.append(("second", frame["result"]))):
        router.on_send(request(2))
    assert router.on_receive(answer(2, {"n": 2})) is None
    assert router.on_receive(answer(1, {"n": 1})) is None
    assert applied == [("second", {"n": 2}), ("first", {"n": 1})]
    assert router.outstanding == {}


def test_wire_order_keeps_an_update_after_the_answer_from_being_overwritten():
    """set_config_option's answer, then a config_option_update: state ends on the update's list."""
    state = SessionState("s1")
    state.set_options(OPTIONS_V1)
    router = ReplyRouter()
    with router.sending(lambda frame: state.set_options(frame["result"]["configOptions"])):
        router.on_send(request(7))
    router.on_receive(answer(7, {"configOptions": OPTIONS_V2}))
    assert state.config.ids() == ["model", "thought_level"]
    state.apply_update({"sessionUpdate": "config_option_update", "configOptions": OPTIONS_V3})
    assert state.model == "fast" and state.config.ids() == ["model"]


def test_notifications_and_agent_requests_are_not_filed():
    router = ReplyRouter()
    with router.sending(lambda frame: None):
        router.on_send({"jsonrpc": "2.0", "method": "session/cancel", "params": {}})
    assert router.outstanding == {}
    assert router.on_receive({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission"}) is None
    assert router.on_receive({"jsonrpc": "2.0", "method": "session/update", "params": {}}) is None


def test_one_sending_block_files_one_request():
    router = ReplyRouter()
    applied = []
    with router.sending(applied.append):
        router.on_send(request(1))
        router.on_send(request(2))  # a second request in the same block gets no applier
    router.on_receive(answer(2, {}))
    router.on_receive(answer(1, {}))
    assert [frame["id"] for frame in applied] == [1]


def test_a_wrong_id_and_a_second_answer_are_noted_not_applied():
    router = ReplyRouter()
    applied = []
    with router.sending(applied.append):
        router.on_send(request(3, "session/new"))
    assert router.on_receive(answer(3, {"sessionId": "a"})) is None
    assert "second answer to request 3 (session/new)" in router.on_receive(answer(3, {"sessionId": "b"}))
    assert "answers no request sent (id 99)" in router.on_receive(answer(99, {}))
    assert len(applied) == 1


def test_a_failing_applier_is_noted_and_later_answers_still_flow():
    router = ReplyRouter()

    def broken(frame):
        raise KeyError("configOptions")

    with router.sending(broken):
        router.on_send(request(1))
    with router.sending(lambda frame: None):
        router.on_send(request(2))
    assert "failed to apply the answer to session/set_config_option" in router.on_receive(answer(1, {}))
    assert router.on_receive(answer(2, {})) is None


def test_the_applier_travels_with_the_sending_task_not_across_tasks():
    """Concurrent senders: each frame carries the applier of the task that sends it."""
    router = ReplyRouter()
    applied = []

    async def main():
        all_inside = asyncio.Event()
        inside = []

        async def send(request_id):
            with router.sending(lambda frame, rid=request_id: applied.append(rid)):
                inside.append(request_id)
                if len(inside) == 3:
                    all_inside.set()
                await all_inside.wait()  # every sender is inside its block before any frame goes out
                router.on_send(request(request_id))

        await asyncio.gather(send(1), send(2), send(3))

    asyncio.run(main())
    for request_id in (3, 1, 2):
        router.on_receive(answer(request_id, {}))
    assert applied == [3, 1, 2]
