"""The proxy's pure parts: the namespaced model option, option rewriting, and SPEC encoding on its command line."""

from __future__ import annotations

import argparse
import copy

import pytest

from acp_notebook._protocol import find_model_option, split_agent_model
from acp_notebook.launch import AgentSpec
from acp_notebook.proxy.cli import decode_spec, encode_spec, parse_agent
from acp_notebook.proxy.launcher import proxy_command
from acp_notebook.proxy.models import (
    META_KEY,
    agent_models,
    model_option,
    rewrite_options,
)
from tests.schema_check import _validator

MARKER = "test-marker"

GROUPED_MODEL = {
    "id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "fast",
    "options": [
        {"group": "everyday", "name": "Everyday", "options": [{"value": "fast", "name": "Fast"}]},
        {"group": "deep", "name": "Deep", "options": [{"value": "smart", "name": "Smart", "description": "thinks"}]},
    ],
}
ODD_MODEL = {
    "id": "llm", "name": "LLM", "category": "model", "type": "select", "currentValue": "org:m:latest",
    "_meta": {"vendor": 1},
    "options": [{"value": "vendor/m-a", "name": "A"}, {"value": "org:m:latest", "name": "B", "_meta": {"x": 2}}],
}
MODE = {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "ask",
        "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}]}
TONE = {"id": "tone", "name": "Tone", "category": "_demo_style", "type": "select", "currentValue": "plain",
        "options": [{"value": "plain", "name": "Plain"}]}
TOGGLE = {"id": "show", "name": "Show", "type": "boolean", "currentValue": False}


def valid_option(option: dict) -> None:
    errors = list(_validator("stable", "SessionConfigOption").iter_errors(option))
    assert not errors, errors[0].message


def test_agent_models_flattens_groups_and_keeps_odd_ids():
    demo = agent_models("a", [GROUPED_MODEL, MODE])
    assert demo.option_id == "model" and demo.current == "fast"
    assert demo.values == ["fast", "smart"]
    assert [c.backend_group for c in demo.choices] == ["Everyday", "Deep"]
    odd = agent_models("q", [MODE, ODD_MODEL])
    assert odd.option_id == "llm" and odd.values == ["vendor/m-a", "org:m:latest"]
    assert odd.prefixed("org:m:latest") == "q:org:m:latest"


def test_agent_without_model_option_is_agent_default():
    models = agent_models("n", [MODE, TOGGLE])
    assert models.option_id is None and models.values == ["default"] and models.current == "default"
    assert find_model_option([MODE, TOGGLE]) is None
    # an id-"model" select counts when no option has category "model"
    assert find_model_option([{**MODE, "id": "model", "category": None}])["id"] == "model"


def test_union_option_groups_per_agent_labelled_with_its_name():
    groups = [agent_models("a", [GROUPED_MODEL]), agent_models("q", [ODD_MODEL]), agent_models("n", [MODE])]
    option = model_option(groups, "a:fast", marker=MARKER)
    valid_option(option)
    assert option["id"] == "model" and option["category"] == "model" and option["type"] == "select"
    assert option["currentValue"] == "a:fast"
    assert [(g["group"], g["name"]) for g in option["options"]] == [("a", "a"), ("q", "q"), ("n", "n")]
    values = [[o["value"] for o in g["options"]] for g in option["options"]]
    assert values == [["a:fast", "a:smart"], ["q:vendor/m-a", "q:org:m:latest"], ["n:default"]]
    smart = option["options"][0]["options"][1]
    assert smart["description"] == "thinks"
    assert smart["_meta"][META_KEY] == {"agent": "a", "value": "smart", "group": "Deep"}
    assert option["options"][1]["options"][1]["_meta"]["x"] == 2  # the agent's own _meta survives


def test_rewrite_prefixes_the_model_option_and_passes_the_rest_through():
    options = [MODE, ODD_MODEL, TONE, TOGGLE]
    before = copy.deepcopy(options)
    rewritten = rewrite_options(options, "q", marker=MARKER)
    assert options == before  # the input is not modified
    assert [o["id"] for o in rewritten] == ["mode", "model", "tone", "show"]  # the agent's order
    model = rewritten[1]
    valid_option(model)
    assert model["currentValue"] == "q:org:m:latest" and model["name"] == "LLM"
    assert model["_meta"]["vendor"] == 1 and model["_meta"][META_KEY]["agentOptionId"] == "llm"
    assert [o["value"] for o in model["options"][0]["options"]] == ["q:vendor/m-a", "q:org:m:latest"]
    assert rewritten[0] == MODE and rewritten[2] == TONE and rewritten[3] == TOGGLE


def test_rewriting_is_idempotent_but_a_different_proxy_prefixes_again():
    once = rewrite_options([GROUPED_MODEL, MODE], "a", marker=MARKER)
    twice = rewrite_options(once, "a", marker=MARKER)
    assert twice == once
    # a proxy in front of this proxy (another marker) namespaces once more, unambiguously
    outer = rewrite_options(once, "p", marker="outer-proxy")
    assert outer[0]["currentValue"] == "p:a:fast"
    assert split_agent_model("p:a:fast", ["p"]) == ("p", "a:fast")


def test_rewrite_adds_agent_default_first_and_other_agents_groups_in_order():
    others = [agent_models("a", [GROUPED_MODEL]), agent_models("q", [ODD_MODEL])]
    rewritten = rewrite_options([MODE], "n", marker=MARKER, others=others, order=["a", "n", "q"])
    model = rewritten[0]
    valid_option(model)
    assert model["currentValue"] == "n:default"
    assert [g["group"] for g in model["options"]] == ["a", "n", "q"]
    assert rewritten[1:] == [MODE]


def test_split_agent_model():
    agents = ["a", "q"]
    assert split_agent_model("q:org:m:latest", agents) == ("q", "org:m:latest")
    assert split_agent_model("a:vendor/x", agents) == ("a", "vendor/x")
    assert split_agent_model("zz:fast", agents) is None
    assert split_agent_model("fast", agents) is None
    assert split_agent_model("a:", agents) is None
    assert split_agent_model(True, agents) is None


@pytest.mark.parametrize("spec", [
    "demo",
    "python agent.py --flag 'two words'",
    ["python", "my agent.py", "--x=1", "[not json]"],
    '["looks", "like", "json"]',
])
def test_specs_survive_the_command_line(spec):
    decoded, env = decode_spec(encode_spec(spec))
    assert env == {}
    assert decoded == (spec if not isinstance(spec, list) else list(spec))


def test_agent_spec_and_env_survive_the_command_line():
    spec = AgentSpec(name="mine", command=("my-agent", "--acp"), env={"K": "v"}, npm_package="pkg@1")
    decoded, _ = decode_spec(encode_spec(spec))
    assert decoded == spec
    decoded, env = decode_spec(encode_spec({"command": ["x", "y"], "env": {"A": "1"}}))
    assert decoded == ["x", "y"] and env == {"A": "1"}


def test_bad_agent_arguments_are_refused_with_a_reason():
    for text, reason in [("demo", "NAME=SPEC"), ("a:b=demo", "without ':'"), ("a=", "empty"),
                         ("a=[1, 2]", "argv of strings"), ("a={\"x\": 1}", "command")]:
        with pytest.raises(argparse.ArgumentTypeError, match=reason):
            parse_agent(text)
    assert parse_agent("q=python -m x").spec == "python -m x"


def test_proxy_command_resolves_registry_names_here_and_rejects_bad_names():
    argv = proxy_command({"a": "demo", "b": ["python", "x y.py"]}, probe_timeout=2)
    assert argv[1:3] == ["-m", "acp_notebook.proxy"]
    agents = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--agent"]
    assert agents[1] == 'b=["python", "x y.py"]'
    decoded, _ = decode_spec(agents[0].partition("=")[2])
    assert isinstance(decoded, AgentSpec) and decoded.command[1:] == ("-m", "acp_notebook.demo")
    assert argv[-2:] == ["--probe-timeout", "2"]
    for bad in ({"a:b": "demo"}, {"": "demo"}, {}):
        with pytest.raises(ValueError):
            proxy_command(bad)
    with pytest.raises(ValueError, match="twice"):
        proxy_command([("a", "demo"), ("a", "demo")])
