"""The Allow / Reject prompt against an agent that hides what its code does, and a prompt that must say who asks.

An agent can send code whose characters reorder or hide themselves on screen (U+202E turns the rest of a
line around, U+2066 opens an isolate, an escape sequence, a zero-width space): the prompt, live and saved,
must show each as an escape and say that such characters are there, so what the person reads is what runs.
And every prompt names the agent and the session that asks; through the multi-agent proxy, the agent the
session is bound to. The asking agents are the demo agent, started for real, asking through the kernel tools.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook._permission import KernelApproval
from acp_notebook.turn import KernelCall
from acp_notebook.widgets.kernel import HELD_NOTE, code_html, kernel_call_html, kernel_call_markdown, kernel_call_text
from acp_notebook.widgets.permission import (HIDDEN_NOTE, KernelApprovalPrompt, PermissionAsker, PermissionPrompt,
                                             describe_request)
from tests.shells import quiet_comms  # noqa: F401 - fixture

TIMEOUT = 30.0
# Reads as a harmless check; runs as an rm. U+202E reverses what follows it on screen.
TRICK = "access_level = 'user\u202e \u2066# admin only\u2069 '\nimport os; os.remove('data.csv')\u200b\x1b[2K"
HIDDEN = ("\u202e", "\u2066", "\u2069", "\u200b", "\x1b")
ESCAPES = ("\\u202e", "\\u2066", "\\u2069", "\\u200b", "\\x1b")
RUN_OPTIONS = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
               {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]


def shows_no_hidden_character(text: str) -> bool:
    return not any(char in text for char in HIDDEN)


def test_the_run_code_prompt_shows_hidden_characters_as_escapes_live_and_saved(quiet_comms: None) -> None:
    prompt = PermissionPrompt({"toolCallId": "kernel-1", "title": "Run code in your kernel\u202e", "kind": "execute",
                               "rawInput": {"code": TRICK}}, RUN_OPTIONS, asker="agent 'demo' (session 'Sales')")
    for shown in (prompt.label.value, prompt.static_html(), prompt.pending_text()):
        assert shows_no_hidden_character(shown)
        assert all(escape in shown for escape in ESCAPES)
        assert "remove(" in shown and "data.csv" in shown and "holds control, bidirectional or invisible characters" in shown
    assert "agent &#x27;demo&#x27; (session &#x27;Sales&#x27;) asks permission:" in prompt.static_html()
    assert "Asked by agent 'demo' (session 'Sales')." in prompt.pending_text()
    prompt.choose("reject")
    assert "You chose: Reject." in prompt.static_html() and shows_no_hidden_character(prompt.static_html())


def test_a_kernel_approval_shows_hidden_characters_in_its_code_as_escapes_live_and_saved(quiet_comms: None) -> None:
    call = KernelCall(id="k1", tool="run_code", arguments={"code": TRICK}, code=TRICK, status="asking")
    prompt = KernelApprovalPrompt(KernelApproval(None, None, call, TRICK, RUN_OPTIONS),  # type: ignore[arg-type]
                                  asker="agent 'demo' (session 'Sales')")
    for shown in (prompt.label.value, prompt.static_html(), prompt.pending_text(), prompt.code):
        assert shows_no_hidden_character(shown)
        assert all(escape in shown for escape in ESCAPES)
        assert "remove(" in shown and "data.csv" in shown
    for shown in (prompt.label.value, prompt.static_html(), prompt.pending_text()):
        assert "holds control, bidirectional or invisible characters" in shown
    assert "agent &#x27;demo&#x27; (session &#x27;Sales&#x27;) asks to run code in your kernel:" in prompt.static_html()
    prompt.choose("reject")
    assert "You chose: Reject." in prompt.static_html() and shows_no_hidden_character(prompt.static_html())


def test_a_plain_request_has_no_hidden_note_and_paths_are_shown_visibly() -> None:
    plain = describe_request({"title": "Read notes.txt", "locations": [{"path": "/work/notes.txt"}]})
    assert HIDDEN_NOTE not in plain and "The agent asks permission:" in plain
    tricky = describe_request({"title": "Read notes", "locations": [{"path": "/work/\u202etxt.exe"}]})
    assert "/work/\\u202etxt.exe" in tricky and "\u202e" not in tricky and "invisible characters" in tricky
    assert "\\u202e" in code_html("x = '\u202e'") and "\u202e" not in code_html("x = '\u202e'")


def test_the_saved_kernel_call_shows_its_code_visibly_and_a_held_call_says_how_to_get_the_kernel_back() -> None:
    call = KernelCall(id="kernel-2", tool="run_code", arguments={"code": TRICK}, code=TRICK, status="held",
                      outputs=[{"type": "text", "text": "printed \u202e"}], error="the code is still running\u2066")
    for shown in (kernel_call_html(call), kernel_call_text(call), kernel_call_markdown(call)):
        assert shows_no_hidden_character(shown) and "\\u202e" in shown and "\\u2066" in shown
        assert "Restart Kernel" in shown and "Interrupt" in shown
    assert "still running: holds the kernel" in kernel_call_text(call)
    done = KernelCall(id="kernel-3", tool="run_code", code="x = 1", status="failed", error="stopped")
    assert HELD_NOTE not in kernel_call_text(done)


class Collector:
    """A turn view's stand-in for a PermissionAsker: keeps each prompt and answers it with ``answer``."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[PermissionPrompt] = []

    def add_prompt(self, prompt: PermissionPrompt) -> None:
        self.prompts.append(prompt)
        prompt.choose(self.answer)


def asked(start: Any, prompt: str) -> tuple[Any, PermissionPrompt]:
    view = Collector("reject")
    asker = PermissionAsker()
    asker.attach(view)
    session = start()
    session.prompt(prompt, timeout=TIMEOUT, permission=asker)
    (shown,) = view.prompts
    return session, shown


@pytest.mark.slow
def test_the_prompt_names_the_agent_and_the_session_that_asks(quiet_comms: None, tmp_path: Any) -> None:
    agent = acpnb.start([sys.executable, "-m", "acp_notebook.demo"], name="claude", kernel_tools="ask",
                        cwd=tmp_path, timeout=TIMEOUT)
    try:
        session, prompt = asked(agent.new_session, "run x_from_the_prompt_test = 1")
        # The session is named by its title as it asked (here the one made from the prompt), else by its id's start.
        named = prompt.asker.removeprefix("agent 'claude' (session ").removesuffix(")")
        assert prompt.asker.startswith("agent 'claude' (session ") and named
        assert "x_from_the_prompt_test" in named or session.id.startswith(named.removesuffix("..."))
        assert "agent &#x27;claude&#x27; (session " in prompt.static_html()
        assert "x_from_the_prompt_test" in prompt.static_html()
    finally:
        agent.close()


@pytest.mark.slow
def test_through_the_proxy_the_prompt_names_the_agent_the_session_is_bound_to(quiet_comms: None,
                                                                             tmp_path: Any) -> None:
    with acpnb.start_proxy({"a": "demo", "b": "demo"}, name="multi", kernel_tools="ask", cwd=tmp_path,
                           timeout=TIMEOUT) as proxy:

        def bound_to_b() -> Any:
            session = proxy.new_session()
            session.set("model", "b:fast")
            return session

        _session, prompt = asked(bound_to_b, "run y_from_the_proxy_test = 2")
        assert prompt.asker.startswith("agent 'b' through the proxy 'multi' (session ")
        assert "agent &#x27;b&#x27; through the proxy &#x27;multi&#x27;" in prompt.static_html()
