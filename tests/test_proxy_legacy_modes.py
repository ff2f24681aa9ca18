"""An agent with only the old `modes`/`models` fields (the demo agent with --legacy, like gemini-cli)
behind the proxy, driven by our client: once bound, the proxy shows its modes as a `mode` config
option that our client sets with set_config_option and the proxy forwards as session/set_mode; the
agent's current_mode_update passes through and keeps the option in step. Every frame on every pipe
is schema-checked."""

from __future__ import annotations

import json
import sys

import pytest

import acp_notebook as acpnb
from tests.proxy_agents.harness import FrameWaiter, is_update, start_proxies

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

LEGACY = [sys.executable, "-m", "acp_notebook.demo", "--legacy"]


def sent_to_backend(proxy: acpnb.Agent, link: str, method: str) -> list[dict]:
    """Params of the `method` requests the proxy sent to agent `link` (after the proxy closed)."""
    records = [json.loads(line) for line in proxy.trace_path.read_text(encoding="utf-8").splitlines()]
    return [r["msg"]["params"] for r in records
            if r["link"] == link and r["dir"] == "out" and r["msg"].get("method") == method]


@pytest.mark.slow
def test_old_modes_become_a_settable_mode_option_after_binding(proxy_factory):
    proxy = proxy_factory({"d": LEGACY, "e": "demo"})
    session = proxy.new_session()
    assert session.config.ids() == ["model"]
    assert session.config["model"].values == ["d:default", "e:fast", "e:smart"]

    options = session.set("model", "d:default")  # binds to the old agent
    assert options.ids() == ["model", "mode"]
    mode = options["mode"]
    assert (mode.category, mode.value, mode.values, mode.read_only) == ("mode", "ask", ["ask", "code"], False)
    assert session.model == "d:default"

    mode_update = FrameWaiter(proxy, is_update(session.id, "current_mode_update"))
    assert session.set("mode", "code")["mode"].value == "code"
    assert mode_update.wait()["params"]["update"]["currentModeId"] == "code"  # passed through, id translated
    turn = session.prompt("hi there")
    assert "```python" in turn.text  # the agent is in code mode
    assert session.config["mode"].value == "code" and session.config.ids() == ["model", "mode"]

    with pytest.raises(acpnb.RpcError) as bad:
        proxy.request("session/set_config_option", {"sessionId": session.id, "configId": "mode", "value": "yolo"})
    assert bad.value.code == -32602 and "ask, code" in str(bad.value)

    # Lazily bound by its first prompt: the mode option arrives with the options update.
    lazy = proxy.new_session()
    assert lazy.prompt("x").stop_reason == "end_turn"
    assert lazy.config.ids() == ["model", "mode"] and lazy.config["mode"].value == "ask"
    # The client's own session/set_mode goes through too, and the option follows the agent.
    follow = FrameWaiter(proxy, lambda m: is_update(lazy.id, "config_option_update")(m) and any(
        o["id"] == "mode" and o["currentValue"] == "code" for o in m["params"]["update"]["configOptions"]))
    assert proxy.request("session/set_mode", {"sessionId": lazy.id, "modeId": "code"}) == {}
    follow.wait()
    assert lazy.config["mode"].value == "code"

    # An agent with configOptions keeps its own mode option (set_config_option, not set_mode).
    modern = proxy.new_session()
    modern.set("model", "e:smart")
    assert modern.set("mode", "code")["mode"].value == "code"
    proxy.close()
    assert [p["modeId"] for p in sent_to_backend(proxy, "d", "session/set_mode")] == ["code", "code"]
    assert sent_to_backend(proxy, "d", "session/set_config_option") == []
    assert [p["configId"] for p in sent_to_backend(proxy, "e", "session/set_config_option")] == ["model", "mode"]


@pytest.mark.slow
def test_clients_that_know_only_modes_and_set_model_get_them_from_the_proxy(proxy_factory):
    """Older clients (only the `modes` field, the unstable session/set_model) against a modern agent."""
    proxy = proxy_factory({"e": "demo"})
    session = proxy.new_session()
    # session/set_model picks an agent:model like the model option would, and says so by an update.
    changed = FrameWaiter(proxy, is_update(session.id, "config_option_update"))
    assert proxy.request("session/set_model", {"sessionId": session.id, "modelId": "e:smart"}) == {}
    changed.wait()
    assert session.model == "e:smart" and "thought_level" in session.config
    with pytest.raises(acpnb.RpcError) as bad:
        proxy.request("session/set_model", {"sessionId": session.id, "modelId": "e:genius"})
    assert bad.value.code == -32602 and "e:smart" in str(bad.value)

    # session/set_mode becomes the mode option's set_config_option; the mode change is announced
    # both ways (config_option_update for new clients, current_mode_update for old ones).
    announced = FrameWaiter(proxy, is_update(session.id, "current_mode_update"))
    assert proxy.request("session/set_mode", {"sessionId": session.id, "modeId": "code"}) == {}
    assert announced.wait()["params"]["update"]["currentModeId"] == "code"
    assert session.config["mode"].value == "code"
    session.prompt("hello")

    # Reopened, the answer carries the old `modes` field in step with the mode option.
    session_id = session.id
    session.close()
    reopened = proxy.resume_session(session_id)
    assert reopened.config["mode"].value == "code"
    answers = [e["msg"].get("result") for e in proxy.log if e["dir"] == "recv" and "method" not in e["msg"]]
    modes = answers[-1]["modes"]
    assert modes["currentModeId"] == "code" and [m["id"] for m in modes["availableModes"]] == ["ask", "code"]
    proxy.close()
    assert [p["configId"] for p in sent_to_backend(proxy, "e", "session/set_config_option")][:2] == ["model", "mode"]
