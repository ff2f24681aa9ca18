"""``%acp pending``: the permission requests this kernel waits on, listed and answered from any cell.

A notebook reopened (or a page reloaded) while its kernel still waits on a request (a kernel-tools
``run_code`` approval, an agent's ``session/request_permission``) shows the request with no buttons: the
cell that asked still runs, its widget view is gone. ``%acp pending`` lists every request that waits in
this kernel (number, agent and session, request, when it was asked) and shows each one's buttons
again, a new view of the same widget: a click there answers it, as in the cell that asked. That output is
a LiveDisplay like every view: when the request is settled (here, in the turn's cell, by its timeout or a
cancel) it turns into its outcome, so a saved notebook does not say it waits. ``%acp pending allow N`` /
``%acp pending reject N`` answer request N (its number as listed, or its id) in one line.

While a ``%%acp`` cell awaits its turn the kernel's main shell runs no other cell; a subshell does
(JupyterLab: New Subshell Console for Notebook, on the notebook's context menu, offered once JupyterLab
has the kernel's kernel_info, which a page reloaded during the cell never gets until the cell ends). So
the same answer has a command line, for a terminal: ``python -m acp_notebook.magics.pending --kernel ID
allow KEY`` connects to the kernel (its connection file under Jupyter's runtime directory), opens a
subshell and answers there (``main``); the saved output of a waiting request spells it out.

Threads: this command runs on whichever shell thread executes it (the main one, or a subshell's): it
reads the process-wide table of waiting prompts (widgets/permission.py, under its lock) and answers
through the prompt's ``choose`` (under the prompt's lock); it changes nothing of the magics.
"""

from __future__ import annotations

import argparse
import ast
import queue
import sys
import time
from collections.abc import Sequence
from html import escape
from typing import Any

from IPython.core.error import UsageError

from .._visible import visible
from ..widgets._html import widget_bundle
from ..widgets.display import ENDED, Bundle, LiveDisplay
from ..widgets.permission import PermissionPrompt, waiting_prompts

__all__ = ["command_text", "main", "run_pending"]

ANSWERS = {"allow": ("allow_once", "allow_always"), "reject": ("reject_once", "reject_always")}
MIN_KEY_PREFIX = 4  # hex digits of a request's id that name it
CODE_LINES = 3  # lines of a request's code shown in the list


def _asked(prompt: PermissionPrompt) -> str:
    """When the request came, in words that stay true in a saved notebook."""
    return time.strftime("%H:%M:%S", time.localtime(prompt.asked_at))


def listing_text(prompts: Sequence[PermissionPrompt]) -> str:
    """The waiting requests, one paragraph each, and how to answer them (in words that stay true once they are
    answered: this text is saved with the notebook, and is not brought up to date)."""
    now = time.strftime("%H:%M:%S")
    if not prompts:
        return f"No permission request was open in this kernel at {now}."
    lines = [f"Permission requests open in this kernel at {now}:"]
    for number, prompt in enumerate(prompts, 1):
        options = " | ".join(visible(str(o.get("name") or o.get("optionId"))) for o in prompt.options)
        lines.append(f"  {number}. {prompt.asker} asked at {_asked(prompt)}: {prompt.title} (request {prompt.key}; "
                     f"options: {options})")
        code = prompt.code.splitlines()
        lines.extend(f"       {line}" for line in code[:CODE_LINES])
        if len(code) > CODE_LINES:
            lines.append(f"       [... {len(code) - CODE_LINES} more lines]")
    lines.append("Answer with the buttons below, or %acp pending allow N / %acp pending reject N.")
    return "\n".join(lines)


def find_prompt(prompts: Sequence[PermissionPrompt], which: str) -> PermissionPrompt:
    """Request ``which``: its number in ``prompts`` (1-based) or its id (a prefix of at least 4 digits will do)."""
    if which.isdigit() and len(which) < MIN_KEY_PREFIX:
        number = int(which)
        if 1 <= number <= len(prompts):
            return prompts[number - 1]
        raise UsageError(f"%acp pending: no request {number}; {len(prompts)} wait (see %acp pending)")
    matches = [p for p in prompts if len(which) >= MIN_KEY_PREFIX and p.key.startswith(which.lower())]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(f"%acp pending: {which!r} names {len(matches)} requests; give more of its id")
    raise UsageError(f"%acp pending: no waiting request {visible(which)!r} (answered already, or withdrawn?); "
                     "%acp pending lists those that wait")


def answer(which: str, verb: str) -> str:
    """Answer request ``which`` with its allow or reject option; returns what was done, in words."""
    prompt = find_prompt(waiting_prompts(), which)
    option = prompt.option_of_kind(*ANSWERS[verb])
    if option is None:
        raise UsageError(f"%acp pending {verb}: request {prompt.key} offers no {verb} option")
    prompt.choose(option)
    if prompt.future.done() and not prompt.future.cancelled() and prompt.future.exception() is None \
            and prompt.future.result() == option:
        return f"Request {prompt.key} ({prompt.title}, asked by {prompt.asker}): {prompt.decision}"
    return f"Request {prompt.key} was settled before this answer: {prompt.decision}"


def show_prompt(prompt: PermissionPrompt) -> LiveDisplay:
    """The prompt's buttons in the running cell, turned into its outcome once it is settled."""

    def render(final: bool, reason: str) -> Bundle:
        if not final:
            return Bundle({**widget_bundle(prompt.widget), "text/html": prompt.static_html(),
                           "text/plain": prompt.pending_text()})
        if prompt.waiting:  # made final while it waits: the kernel is going away
            said = f"Not answered: {reason or ENDED}."
            return Bundle({"text/plain": f"{prompt.asker} asked: {prompt.title}. {said}",
                           "text/html": f"<div>{escape(prompt.asker)} asked: {escape(prompt.title)}. "
                                        f"{escape(said)}</div>"})
        return Bundle({"text/html": prompt.static_html(),
                       "text/plain": f"{prompt.asker} asked: {prompt.title}. {prompt.decision}"})

    live = LiveDisplay(render)
    live.show()
    prompt.future.add_done_callback(lambda _future: live.finalize())
    return live


def run_pending(command: Any) -> None:
    """``%acp pending [allow|reject N]`` (see the module docstring)."""
    if command.answer is None:
        if command.request is not None:
            raise UsageError("%acp pending: give allow or reject before the request, e.g. %acp pending allow 1")
        prompts = waiting_prompts()
        print(listing_text(prompts))
        for prompt in prompts:
            show_prompt(prompt)
        return
    if command.request is None:
        raise UsageError(f"%acp pending {command.answer} N: name the request (its number in %acp pending, or its id)")
    print(answer(command.request, command.answer))


def command_text(answer_with: str | None = None, which: str | None = None) -> str:
    """What ``%acp pending [allow|reject N]`` says, as text (the command line's answer; any shell thread)."""
    if answer_with is None:
        return listing_text(waiting_prompts())
    return answer(str(which), answer_with)


# --- the command line: a terminal's way in while the notebook's main shell is busy ------------------------------
KERNEL_WAIT_S = 30.0  # seconds each step with the kernel may take (its control and subshell answer while a cell runs)


def _control(client: Any, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    request = client.session.msg(msg_type, content)
    client.control_channel.send(request)
    while True:
        reply = client.get_control_msg(timeout=KERNEL_WAIT_S)
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            return reply["content"]


def connection_file(kernel: str) -> str:
    """The connection file of kernel ``kernel`` (an id, a unique part of one, or a connection file), searched where
    Jupyter keeps them. Only ``.json`` files are candidates: a kernel over ipc has its sockets beside its
    connection file, named after it, and jupyter_client's search for a part of a name would take one of those."""
    from jupyter_client import find_connection_file  # deferred with the rest of jupyter_client (ask_kernel)

    return find_connection_file(kernel if kernel.endswith(".json") or "*" in kernel else f"*{kernel}*.json")


def ask_kernel(kernel: str, answer_with: str | None, which: str | None) -> tuple[bool, str]:
    """Run ``command_text`` on a new subshell of kernel ``kernel`` (an id, a unique part of one, or a connection
    file); (whether it answered, its text or error). The answer comes back in the reply (``user_expressions``),
    not on iopub, which a client that has just connected may miss."""
    # Deferred: jupyter_client (zmq) is needed by this command line only, not by the magics.
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=connection_file(kernel))
    client.load_connection_file()
    client.start_channels()
    subshell = None
    try:
        subshell = _control(client, "create_subshell_request", {}).get("subshell_id")
        if subshell is None:
            return False, "this kernel has no subshells (ipykernel >= 7 has them)"
        call = f"__import__('acp_notebook.magics.pending', fromlist=['_']).command_text({answer_with!r}, {which!r})"
        request = client.session.msg("execute_request", {"code": "", "silent": True, "store_history": False,
                                                         "user_expressions": {"said": call}, "allow_stdin": False})
        request["header"]["subshell_id"] = subshell
        client.shell_channel.send(request)
        while True:
            reply = client.get_shell_msg(timeout=KERNEL_WAIT_S)
            if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
                break
        said = reply["content"].get("user_expressions", {}).get("said", {})
        if said.get("status") != "ok":
            return False, f"{said.get('ename', 'Error')}: {said.get('evalue', reply['content'])}"
        return True, str(ast.literal_eval(said["data"]["text/plain"]))  # the text's repr, as IPython shows a str
    finally:
        if subshell is not None:
            _control(client, "delete_subshell_request", {"subshell_id": subshell})
        client.stop_channels()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m acp_notebook.magics.pending --kernel ID [allow|reject N]``: list or answer from a terminal."""
    parser = argparse.ArgumentParser(prog="python -m acp_notebook.magics.pending",
                                     description="List or answer the permission requests a Jupyter kernel waits on.")
    parser.add_argument("--kernel", required=True, help="the kernel's id (a unique part will do) or connection file")
    parser.add_argument("answer", nargs="?", choices=sorted(ANSWERS), metavar="allow|reject")
    parser.add_argument("request", nargs="?", metavar="N", help="the request's number as listed, or its id")
    args = parser.parse_args(argv)
    if args.answer is not None and args.request is None:
        parser.error("name the request to answer (its number as listed, or its id)")
    try:
        answered, text = ask_kernel(args.kernel, args.answer, args.request)
    except OSError as error:  # no such kernel (find_connection_file)
        answered, text = False, f"kernel {args.kernel!r}: {error}"
    except queue.Empty:
        answered, text = False, f"kernel {args.kernel!r} did not answer within {KERNEL_WAIT_S:g} s"
    print(text, file=sys.stdout if answered else sys.stderr)
    return 0 if answered else 1


if __name__ == "__main__":
    sys.exit(main())
