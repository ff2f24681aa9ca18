"""CellAgent: agents written as a class in a cell, served in memory and driven through the client.

Each test defines its agent the way a learner would, starts it with ``acpnb.start(obj)`` and
checks what the client sees (config options, turns, titles, errors) and what went over the wire
(``agent.log``, checked against the official schema).
"""

from __future__ import annotations

import threading
import time

import pytest

import acp_notebook as acpnb
from acp_notebook.cellagent import CellAgent, TurnCancelled, boolean, select
from tests.schema_check import FrameLog


class Tutor(CellAgent):
    """The course's agent: a grouped model choice, a custom-category option, a boolean."""

    title = "A tutor"
    version = "1.2"
    options = [
        select("model", {"Everyday": ["fast"], "Deep thinking": ["smart"]}, category="model"),
        select("tone", ["plain", ("pirate", "Pirate talk")], category="_style"),
        boolean("verbose", description="Say more"),
    ]

    def set_config_option(self, option_id, value):
        if option_id == "model" and value == "smart":
            self.add_option(select("thought_level", ["low", "high"], category="thought_level"), after="model")
        elif option_id == "model":
            self.remove_option("thought_level")

    def prompt(self, text):
        if self.values["model"] == "smart":
            self.think("Let me think about ")
            self.think(repr(text))
        for word in text.split():
            self.say(word.upper() + " " if self.values["tone"] == "pirate" else word + " ")
        if text.startswith("fall back"):
            self.set_value("model", "fast")
            self.remove_option("thought_level")
            self.update_options()
        self.set_title(text[:30], meta={"lesson": 1})
        return "done"


def update_kinds(agent):
    """The kinds of the session/updates the agent sent, in order."""
    return [e["msg"]["params"]["update"]["sessionUpdate"] for e in agent.log
            if e["dir"] == "recv" and e["msg"].get("method") == "session/update"]


def validate(agent) -> None:
    log = FrameLog(local="client")
    for entry in agent.log:
        log.record("client" if entry["dir"] == "send" else "agent", entry["msg"])
    log.check()


@pytest.fixture
def tutor(tmp_path):
    with acpnb.start(Tutor(), cwd=tmp_path, timeout=10) as agent:
        yield agent


def test_initialize_and_session_new_come_from_the_class(tutor, tmp_path):
    assert tutor.info == {"name": "tutor", "title": "A tutor", "version": "1.2"}
    assert tutor.capabilities["sessionCapabilities"] == {"list": {}, "close": {}}
    session = tutor.new_session()
    assert session.id == "tutor-1"
    assert [(o.id, o.type, o.value, o.category) for o in session.config] == [
        ("model", "select", "fast", "model"), ("tone", "select", "plain", "_style"),
        ("verbose", "boolean", False, None)]
    assert [(c.value, c.group) for c in session.config["model"].choices] == [("fast", "Everyday"),
                                                                            ("smart", "Deep thinking")]
    assert session.config["tone"].choices[1].name == "Pirate talk"
    answer = next(e["msg"]["result"] for e in tutor.log if e["dir"] == "recv" and
                  (e["msg"].get("result") or {}).get("sessionId") == "tutor-1")
    assert answer["configOptions"][1]["category"] == "_style"  # custom categories travel unchanged
    validate(tutor)


def test_a_turn_streams_thoughts_chunks_a_title_and_ends(tutor):
    session = tutor.new_session()
    session.set("model", "smart")
    session.set("tone", "pirate")
    turn = session.prompt("hello world", timeout=10)
    assert turn.text == "HELLO WORLD done" and turn.thoughts == "Let me think about 'hello world'"
    assert turn.stop_reason == "end_turn"
    assert session.title == "hello world" and session.meta == {"lesson": 1}
    # The returned "done" is said after the hook returns, so after the title.
    assert update_kinds(tutor) == ["agent_thought_chunk"] * 2 + ["agent_message_chunk"] * 2 + [
        "session_info_update", "agent_message_chunk"]
    validate(tutor)


def test_a_dependent_option_follows_the_model(tutor):
    session = tutor.new_session()
    assert session.set("model", "smart").ids() == ["model", "thought_level", "tone", "verbose"]
    session.set("thought_level", "high")
    assert session.set("model", "fast").ids() == ["model", "tone", "verbose"]
    assert session.set("verbose", True)["verbose"].value is True


def test_config_option_update_pushed_during_a_turn_replaces_the_options(tutor):
    session = tutor.new_session()
    session.set("model", "smart")
    seen = []
    session.state.observe(lambda event: seen.append(event) if event.kind == "config" else None)
    session.prompt("fall back please", timeout=10)
    assert session.model == "fast" and "thought_level" not in session.config
    assert [e.data.ids() for e in seen] == [["model", "tone", "verbose"]]
    assert "config_option_update" in update_kinds(tutor)
    validate(tutor)


def test_values_the_agent_refuses_and_options_it_lacks(tutor):
    session = tutor.new_session()
    # Sent raw: Session.set would refuse an unknown value itself, without asking the agent.
    with pytest.raises(acpnb.RpcError) as refused:
        tutor.request("session/set_config_option", {"sessionId": session.id, "configId": "tone", "value": "loud"})
    assert refused.value.code == -32602 and "choices: plain, pirate" in str(refused.value)
    with pytest.raises(acpnb.RpcError) as unknown:
        tutor.request("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]})
    assert unknown.value.code == -32002 and "tutor-1" in str(unknown.value)


def test_a_hook_that_raises_is_the_agents_error_and_the_session_goes_on(tmp_path):
    class Clumsy(CellAgent):
        options = [select("tone", ["plain", "pirate"])]

        def prompt(self, text):
            if text == "fail":
                raise ValueError("no idea what to say")
            return f"tone is {self.values['tone']}"

        def set_config_option(self, option_id, value):
            if value == "pirate":
                raise RuntimeError("pirates are not allowed")

    with acpnb.start(Clumsy(), cwd=tmp_path, timeout=10) as agent:
        session = agent.new_session()
        with pytest.raises(acpnb.RpcError) as failed:
            session.prompt("fail", timeout=10)
        message = str(failed.value)
        assert "Clumsy.prompt raised ValueError: no idea what to say" in message
        assert 'raise ValueError("no idea what to say")' in message  # the learner's own line
        assert any("Clumsy.prompt raised ValueError" in line for line in agent.stderr_tail())
        with pytest.raises(acpnb.ConfigOptionError, match="pirates are not allowed"):
            session.set("tone", "pirate")
        assert session.config["tone"].value == "plain"
        # The agent restored its own list too: the next turn still sees the plain tone.
        assert session.prompt("which tone?", timeout=10).text == "tone is plain"


@pytest.mark.slow
def test_a_prompt_stuck_in_time_sleep_is_ended_by_the_turn_timeout(tmp_path):
    released = threading.Event()

    class Sleepy(CellAgent):
        def prompt(self, text):
            if text == "sleep":
                released.wait(3600)  # blocks like time.sleep(3600), but the test can end it
                self.say("too late")
            return "awake"

    with acpnb.start(Sleepy(), cwd=tmp_path, timeout=10) as agent:
        session = agent.new_session()
        turn = session.start_turn("sleep", timeout=1.0)
        assert turn.done.wait(10)  # the hook sleeps until the end of the test: the turn's timeout ended it
        assert turn.stop_reason == "cancelled"
        # The agent's loop was never blocked: the session answers at once while the hook still sleeps.
        assert session.prompt("are you there?", timeout=10).text == "awake"
        answers = [e["msg"]["result"]["stopReason"] for e in agent.log if e["dir"] == "recv" and "stopReason" in
                   (e["msg"].get("result") or {})]
        assert answers == ["cancelled", "end_turn"]  # the agent answered the cancel; the client did not give up alone
        released.set()
        assert session.prompt("and now?", timeout=10).text == "awake"
        assert "too late" not in "".join(t.text for t in session.turns)


def test_senders_refuse_after_the_turn_was_cancelled(tmp_path):
    outcome: list[str] = []
    talking, finished = threading.Event(), threading.Event()

    class Chatty(CellAgent):
        def prompt(self, text):
            while not self.cancelled:
                self.say(".")
                talking.set()
                time.sleep(0.01)
            try:
                self.say("after the end")
            except TurnCancelled as exc:
                outcome.append(str(exc))
            finished.set()

    with acpnb.start(Chatty(), cwd=tmp_path, timeout=10) as agent:
        session = agent.new_session()
        turn = session.start_turn("talk")
        assert talking.wait(10)
        session.cancel()
        assert turn.done.wait(10) and turn.stop_reason == "cancelled"
        assert finished.wait(10)
        assert outcome == ["the client cancelled this turn (it has been answered 'cancelled')"]
        assert "after the end" not in turn.text


@pytest.mark.parametrize("answer, expected", [
    ({"agentInfo": {"name": "x"}}, "invalid initialize result"),
    (None, "initialize returned None"),
    (ZeroDivisionError("no"), "initialize raised ZeroDivisionError: no"),
])
def test_an_agent_whose_initialize_is_wrong_fails_to_start_at_once(tmp_path, answer, expected):
    class Wrong(CellAgent):
        def initialize(self, client):
            if isinstance(answer, Exception):
                raise answer
            return answer

    # The error names the wrong answer: the start did not wait for its deadline, whose error says so instead.
    with pytest.raises(acpnb.AgentStartError, match=expected):
        acpnb.start(Wrong(), cwd=tmp_path, timeout=10)


def test_mistakes_in_the_class_show_where_it_is_defined():
    with pytest.raises(TypeError, match="not `async def`"):
        class Async(CellAgent):
            async def prompt(self, text):
                return text
    with pytest.raises(ValueError, match="'b' is not one of its choices"):
        class BadDefault(CellAgent):
            options = [select("model", ["a"], default="b")]
    with pytest.raises(ValueError, match="repeated: model"):
        class Twice(CellAgent):
            options = [select("model", ["a"]), boolean("model")]
    with pytest.raises(RuntimeError, match="inside the hooks"):
        Tutor().say("hello")


def test_a_class_starts_too_and_sessions_list_and_close(tmp_path):
    class Plain(CellAgent):
        pass

    with acpnb.start(Plain, cwd=tmp_path, timeout=10) as agent:
        assert agent.info["name"] == "plain" and agent.name == "plain"
        first, second = agent.new_session(), agent.new_session()
        assert first.prompt("hi", timeout=10).text == "You said: hi"
        assert [s["sessionId"] for s in agent.list_sessions()] == [first.id, second.id]
        first.close()
        assert [s["sessionId"] for s in agent.list_sessions()] == [second.id]
        validate(agent)


def test_boolean_options_only_for_clients_that_advertise_them():
    """The protocol sends boolean options only to clients that say they can show them (driven without a client)."""
    import asyncio

    from acp_notebook.cellagent import _Wire

    async def options_for(capabilities: dict) -> list[str]:
        wire = _Wire(Tutor())  # what agent_side serves: its methods take the params' JSON values
        await wire.initialize(1, capabilities)
        answer = await wire.new_session("/tmp")
        return [o["id"] for o in answer["configOptions"]]

    assert asyncio.run(options_for({})) == ["model", "tone"]
    assert asyncio.run(options_for({"session": {"configOptions": {"boolean": {}}}})) == ["model", "tone", "verbose"]


def test_a_cell_agent_speaks_acp_on_stdio_through_the_sdk(tmp_path):
    """The same class in a script, served on stdio by run_stdio(): what the course says any ACP client can use."""
    import sys

    script = tmp_path / "tutor.py"
    script.write_text(
        "from acp_notebook.cellagent import CellAgent, select\n\n\n"
        "class Tutor(CellAgent):\n"
        "    options = [select('model', ['fast', 'smart'])]\n\n"
        "    def prompt(self, text):\n"
        "        print('a hook prints: stdout is the protocol pipe, so this goes to stderr')\n"
        "        if text == 'fail':\n"
        "            raise ValueError('no')\n"
        "        self.say('hello ')\n"
        "        return text\n\n\n"
        "Tutor().run_stdio()\n")
    with acpnb.start([sys.executable, str(script)], cwd=tmp_path, timeout=30) as agent:
        session = agent.new_session()
        assert agent.info["name"] == "tutor" and session.config.ids() == ["model"]
        assert session.prompt("there", timeout=10).text == "hello there"
        with pytest.raises(acpnb.RpcError, match=r"Tutor.prompt raised ValueError: no \(line 10, in prompt: raise"):
            session.prompt("fail", timeout=10)
        assert "ValueError: no" in agent.stderr_tail(5)  # logged on the agent's stderr, as a subprocess does
        assert any("a hook prints" in line for line in agent.stderr_tail(40))
        validate(agent)


def test_the_sdks_run_agent_is_refused_with_the_way_that_works():
    """acp.run_agent calls the object as an agent factory; its typed side would drop `_custom` fields, so the
    call says what to use instead rather than serving a CellAgent half right."""
    with pytest.raises(TypeError, match=r"Tutor\(\)\.run_stdio\(\).*not with acp\.run_agent"):
        Tutor()(None)
