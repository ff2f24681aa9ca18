"""The public surface: pinned so that a rename or removal is a deliberate, visible change."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.demo.agent import DemoAgent

PUBLIC = {
    "AcpError", "AcpTimeoutError", "Agent", "AgentClosedError", "AgentExitedError", "AgentSpec", "AgentStartError",
    "CapabilityError", "CellAgent", "Choice", "ConfigOption", "ConfigOptionError", "ConfigOptions", "KernelApproval",
    "PermissionDenied", "PermissionRequest", "ProtocolError", "ProtocolInspector", "ReplayMismatch", "RpcError", "Session",
    "SessionState", "SweepResult", "ToolCall", "Turn", "__version__", "abranch_sweep", "agents", "areplay", "astart", "branch_sweep", "current",
    "load_ipython_extension", "load_run", "register", "replay", "resume", "start", "start_proxy", "sweep",
}


def test_all_is_pinned_and_every_name_exists():
    assert set(acpnb.__all__) == PUBLIC
    assert len(acpnb.__all__) == len(PUBLIC), "no duplicates in __all__"
    for name in acpnb.__all__:
        assert getattr(acpnb, name) is not None


def test_error_tree():
    for name in ("AgentStartError", "AgentExitedError", "AgentClosedError", "ProtocolError", "RpcError",
                 "AcpTimeoutError", "ConfigOptionError", "CapabilityError", "PermissionDenied", "ReplayMismatch"):
        assert issubclass(getattr(acpnb, name), acpnb.AcpError), name
    assert issubclass(acpnb.AcpTimeoutError, TimeoutError)
    assert issubclass(acpnb.ConfigOptionError, ValueError)
    assert issubclass(acpnb.ReplayMismatch, acpnb.RpcError)  # a replay's divergence is answered as an error


def test_errors_render_as_one_short_block_in_ipython():
    error = acpnb.ConfigOptionError("'genius' is not a choice of 'model'", hint="Valid values: fast, smart.")
    lines = error._render_traceback_()
    assert len(lines) == 2 and "genius" in lines[0] and "fast, smart" in lines[1]


def test_importing_the_package_does_not_import_widgets_or_ipython():
    code = ("import sys, acp_notebook; "
            "print(sorted(m for m in ('ipywidgets', 'IPython', 'pandas', 'matplotlib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_current_without_a_session_says_what_to_do():
    from acp_notebook import client

    with client.current_session.override(None), pytest.raises(acpnb.AcpError) as info:
        acpnb.current()
    assert "acpnb.start(" in info.value.hint and "%acp start" in info.value.hint_for("magic")


@pytest.mark.parametrize("owner, core, twins", [
    (acpnb.Session, "_set", ("set", "aset")),
    (acpnb.Session, "_prompt", ("prompt", "aprompt")),
    (acpnb.Agent, "_new_session", ("new_session", "anew_session")),
    (acpnb.Agent, "_authenticate", ("authenticate", "aauthenticate")),
])
def test_the_twins_carry_their_cores_signature_and_docstring(owner, core, twins):
    """help() shows the same parameters (plus timeout) and the same text for both halves of a pair."""
    import inspect

    core_fn = getattr(owner, core)
    expected = [name for name in inspect.signature(core_fn).parameters if name != "kwargs"]
    for twin in (getattr(owner, name) for name in twins):
        params = inspect.signature(twin).parameters
        assert [name for name in params if name not in ("timeout", "kwargs")] == expected, twin.__name__
        assert params["timeout"].kind is inspect.Parameter.KEYWORD_ONLY and params["timeout"].default is None
        assert twin.__doc__.startswith(inspect.cleandoc(core_fn.__doc__)), twin.__name__
        assert "timeout" in twin.__doc__.split(inspect.cleandoc(core_fn.__doc__), 1)[1]
    blocking, awaitable = (getattr(owner, name) for name in twins)
    assert not inspect.iscoroutinefunction(blocking) and inspect.iscoroutinefunction(awaitable)
    assert (blocking.__name__, awaitable.__name__) == twins


def test_a_wrong_call_of_a_twin_names_the_public_method_and_shows_its_parameters():
    """Python's own message would name the private core (``_set() got an unexpected keyword argument``)."""
    import asyncio

    with acpnb.start(DemoAgent()) as agent:
        session = agent.new_session()
        with pytest.raises(TypeError, match=re.escape("Session.set(config_id, value, *, timeout=None): got an "
                                                      "unexpected keyword argument 'model'")):
            session.set(model="smart")
        with pytest.raises(TypeError, match=re.escape("Session.aset(config_id, value, *, timeout=None): missing "
                                                      "a required argument: 'value'")):
            asyncio.run(session.aset("model"))
        with pytest.raises(TypeError, match=r"Agent\.new_session\(.*\): got an unexpected keyword argument 'cdw'"):
            agent.new_session(cdw="/tmp")
        assert session.set("model", "smart")  # nothing was sent by the wrong calls; the session still works
        assert session.prompt("hi").text.startswith("[smart]")


def test_a_prompt_of_the_wrong_shape_says_which_part_is_wrong():
    with acpnb.start(DemoAgent()) as agent:
        session = agent.new_session()
        with pytest.raises(TypeError, match="a prompt is a string or a list of content blocks .dicts., not NoneType"):
            session.prompt(None)
        with pytest.raises(TypeError, match=r"a prompt's list holds content blocks .*; item 1 is int"):
            session.prompt([{"type": "text", "text": "hi"}, 2])
        # Checked against the schema's content blocks before anything is sent: the agent would have made up a reply.
        with pytest.raises(ValueError, match=r"item 0 of the prompt is no ACP content block: a block of type 'text' "
                                             r"needs 'text'"):
            session.prompt([{"type": "text"}])
        with pytest.raises(ValueError, match=r"item 1 .*: a block of type 'image' needs 'data' and 'mimeType'"):
            session.prompt([{"type": "text", "text": "hi"}, {"type": "image"}])
        with pytest.raises(ValueError, match=r"its type is 'txt'; a content block's type is one of 'text', 'image', "
                                             r"'audio', 'resource_link', 'resource'"):
            session.prompt([{"type": "txt", "text": "hi"}])
        with pytest.raises(ValueError, match=r"it has no 'type'"):
            session.prompt([{"text": "hi"}])
        assert not session.turns  # nothing was queued
        assert session.prompt([{"type": "text", "text": "hi"}]).text.startswith("[fast]")


def test_no_public_name_is_also_a_submodule():
    """Importing a submodule sets the package's attribute of that name to the module, hiding a public function of
    the same name (``acpnb.branch_sweep(...)`` became "'module' object is not callable" once the sweep module had
    been imported); ``sweep`` is the one such name, and the package keeps it the function on purpose."""
    package = Path(acpnb.__file__).parent
    clashing = [name for name in acpnb.__all__ if name != "sweep"
                and ((package / f"{name}.py").exists() or (package / name / "__init__.py").exists())]
    assert clashing == []
