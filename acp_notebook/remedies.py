"""What fixes an error, as a fact, and the words for it on each surface: the one place hints are written.

An error raised in the protocol layer (client, session, connection) carries a ``Remedy``: which action
fixes it and that action's arguments ("pass an existing directory", "pick one of these auth methods").
It never carries magic syntax. The surface that shows the error phrases the remedy in its own terms
with ``phrase(remedy, surface)``: Python names the API (``acpnb.start(...)``, ``agent.capabilities``),
the magics name ``%acp`` commands and ``%config AcpMagics`` settings, the command line names
``acp-notebook`` options. A surface with no words for an action (the command line cannot pick an auth
method) gets None and shows the Python words. Constant tables and frozen values: any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ACTIONS", "SURFACES", "Facts", "Remedy", "phrase"]

SURFACES = ("python", "magic", "cli")  # where an error is shown: the API, the %acp magics, the command line


@dataclass(frozen=True)
class Remedy:
    """An action that fixes an error (one of ``ACTIONS``) and its arguments, in no surface's syntax."""

    action: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"no remedy action {self.action!r}; known: {', '.join(sorted(ACTIONS))}")
        object.__setattr__(self, "args", Facts(self.args))


class Facts(dict):  # type: ignore[type-arg]
    """A remedy's arguments: read-only once made (an error's facts do not change when it is shown), and
    picklable, so an error still crosses a process boundary (a sweep's Ray workers)."""

    def _refuse(self, *_args: Any, **_kwargs: Any) -> None:
        raise TypeError("a remedy's facts do not change once made")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore

    def __reduce__(self) -> tuple[Any, ...]:
        return (Facts, (dict(self),))


def phrase(fix: Remedy, surface: str) -> str | None:
    """The hint for ``fix`` in ``surface``'s syntax ("python", "magic", "cli"); None where that surface has none."""
    if surface not in SURFACES:
        raise ValueError(f"surface must be one of {', '.join(SURFACES)}, not {surface!r}")
    words = ACTIONS[fix.action].get(surface)
    return None if words is None else words(fix.args).strip() or None


def _methods(ids: Sequence[Any]) -> str:
    return ", ".join(map(str, ids))


def _authenticate(how: str | None) -> Callable[[Mapping[str, Any]], str]:
    """The "needs a key or a login" hint: what the agent's registry entry says it needs, the methods it offered
    (``how`` names the call that picks one on this surface) and its terminal logins' command lines."""
    def words(args: Mapping[str, Any]) -> str:
        ids, agent, needs = list(args.get("methods", ())), args.get("agent"), args.get("needs")
        offered = f"Its auth methods: {_methods(ids)} ({how} picks one)." if ids and how else ""
        if agent and needs:
            text = f"Agent '{agent}' needs a key or a login: {needs}. {offered}"
        else:
            text = f"The agent needs authentication; its auth methods: {_methods(ids)} ({how} picks one)." \
                if ids and how else ""
        terminal = list(args.get("terminal", ()))
        if terminal:
            text = text.strip()
            text += f" {'Or log in' if text else 'Log in'} from a terminal, then start the agent again: " \
                    + " ; ".join(terminal)
        return text
    return words


def _directory(surface: str) -> Callable[[Mapping[str, Any]], str]:
    def words(args: Mapping[str, Any]) -> str:
        session = args.get("what") == "session"
        if surface == "python":
            where = "" if session else " as cwd="
        elif surface == "magic":
            where = " with --cwd DIR (%acp new --cwd DIR)" if session else " with --cwd DIR (%acp start ... --cwd DIR)"
        else:
            where = " with --cwd DIR"
        return f"Pass an existing directory{where}, or create it first."
    return words


def _terminal_login(surface: str) -> Callable[[Mapping[str, Any]], str]:
    def words(args: Mapping[str, Any]) -> str:
        again = "run the command again" if surface == "cli" else "start the agent again"
        text = f"Run this in a terminal, then {again}: {args['command']}"
        if surface == "magic":
            text += (f" (in a notebook, %acp auth {args['method']} runs it in the cell for an agent started as a "
                     "program)")
        return text
    return words


def _capabilities(surface: str) -> Callable[[Mapping[str, Any]], str]:
    def words(args: Mapping[str, Any]) -> str:
        part = args.get("part")
        if surface == "python":
            return f"agent.capabilities[{part!r}] shows what it offers." if part else \
                "agent.capabilities shows what this agent offers."
        if surface == "magic":
            return "%acp log --method initialize shows what the agent offers."
        return "`acp-notebook agents --check NAME` starts it and shows what it offers."
    return words


def _system_prompt(surface: str) -> Callable[[Mapping[str, Any]], str]:
    def words(args: Mapping[str, Any]) -> str:
        mode = args.get("mode", "append")
        if surface == "cli":  # no option sets the mode here: say what the agent takes
            return f"This agent takes a system prompt in {mode!r} mode only."
        how = {"python": f"Use system_prompt_mode={mode!r}",
               "magic": f"Set %config AcpMagics.system_prompt_mode = {mode!r}"}[surface]
        return f"{how}, which adds to the agent's own instructions." if mode == "append" else f"{how}."
    return words


def _slow_start(surface: str) -> Callable[[Mapping[str, Any]], str]:
    def words(args: Mapping[str, Any]) -> str:
        if args.get("npx"):
            return {"python": "Agents fetched by npx can take long on first start: pass a larger timeout.",
                    "magic": "Agents fetched by npx can take long on first start: give it longer with --timeout "
                             "SECONDS, e.g. %acp start claude --timeout 180 (before the -- of a command line).",
                    "cli": "Agents fetched by npx can take long on first start: `acp-notebook agents --check "
                           "NAME --timeout 180` lets the download finish once."}[surface]
        question = "Is it an ACP agent (it must answer initialize on stdin/stdout)? Its stderr, if any, is above."
        return question + {"python": " A slow one needs a larger timeout=.",
                           "magic": " Give a slow one longer: %acp start --timeout SECONDS -- COMMAND.",
                           "cli": " Give a slow one longer with --timeout SECONDS where the command has it."}[surface]
    return words


def _fixed(text: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda _args: text


# action -> surface -> words. A surface missing from an action's row has no words of its own for it.
ACTIONS: Mapping[str, Mapping[str, Callable[[Mapping[str, Any]], str]]] = {
    "start_agent": {
        "python": _fixed("Start one with acpnb.start('demo') (or another agent) first."),
        "magic": _fixed("Run `%acp start demo` (or another agent) first."),
        "cli": _fixed("Name an agent with --agent NAME; `acp-notebook agents` lists them."),
    },
    "start_again": {
        "python": _fixed("Start the agent again with acpnb.start(...); its last stderr lines are above."),
        "magic": _fixed("Start it again with %acp start, then %acp resume reopens its last session."),
        "cli": _fixed("Run the command again; the agent's last stderr lines are above."),
    },
    "start_new": {
        "python": _fixed("Start a new agent with acpnb.start(...) or open a new session."),
        "magic": _fixed("Start it again with %acp start, or open a new session with %acp new."),
        "cli": _fixed("Run the command again: it starts the agent anew."),
    },
    "longer_timeout": {
        "python": _fixed("Pass a larger timeout=, or check that the agent is still running (agent.log shows the "
                         "frames)."),
        "magic": _fixed("Give it longer (--timeout SECONDS, or %config AcpMagics.timeout = 120) and check with "
                        "%acp log that the agent still answers."),
        "cli": _fixed("Give it longer with --timeout SECONDS."),
    },
    "slow_start": {surface: _slow_start(surface) for surface in SURFACES},
    "existing_directory": {surface: _directory(surface) for surface in SURFACES},
    "pick_auth_method": {
        "python": lambda a: f"Its auth methods are: {_methods(a['methods'])} (agent.authenticate(METHOD) uses one).",
        "magic": lambda a: f"Its auth methods are: {_methods(a['methods'])} (%acp auth METHOD uses one).",
        "cli": lambda a: f"Its auth methods are: {_methods(a['methods'])}.",
    },
    "list_auth_methods": {
        "python": _fixed("agent.auth_methods lists each method's type."),
        "magic": _fixed("%acp auth lists each method and how to use it."),
        "cli": _fixed("`acp-notebook agents --check NAME` says how the agent logs in."),
    },
    "terminal_login": {surface: _terminal_login(surface) for surface in SURFACES},
    # An "authentication required" answer. Without facts about the agent (no args) it names the way in only.
    "authenticate": {
        "python": lambda a: _authenticate("agent.authenticate(method_id)")(a) if a else
        "The agent needs authentication: see agent.auth_methods and call agent.authenticate(method_id).",
        "magic": lambda a: _authenticate("%acp auth METHOD")(a) if a else
        "The agent needs authentication: %acp auth lists its methods, %acp auth METHOD uses one.",
        "cli": lambda a: _authenticate(None)(a) if a else
        "The agent needs a key or a login: acp-notebook agents says which.",
    },
    "show_capabilities": {surface: _capabilities(surface) for surface in SURFACES},
    "system_prompt_mode": {surface: _system_prompt(surface) for surface in SURFACES},
    "list_sessions": {
        "python": _fixed("The agent does not know that session (any more): list them with agent.list_sessions()."),
        "magic": _fixed("The agent does not know that session (any more): %acp sessions lists them."),
        "cli": _fixed("The agent does not know that session (any more): it was deleted, or opened by another "
                      "agent or in another directory."),
    },
    "make_a_recording": {  # a file that is no recording: where one comes from
        "python": _fixed("A recording is the JSON-lines file written by acpnb.start(..., record=FILE)."),
        "magic": _fixed("A recording is the JSON-lines file written by %acp start ... --record FILE."),
        "cli": _fixed("A recording is the JSON-lines file written in a notebook by %acp start ... --record FILE "
                      "(or acpnb.start(..., record=FILE))."),
    },
    "program_on_path": {  # a registered agent whose program is not installed and has no npm package
        "python": lambda a: f"Put '{a['program']}' on PATH, or register the agent with its full command.",
        "magic": lambda a: f"Put '{a['program']}' on PATH, or start it by its full command: %acp start -- "
                           f"/path/to/{a['program']}",
        "cli": lambda a: f"Put '{a['program']}' on PATH, or give its full command line instead of '{a['name']}'.",
    },
    "known_agent": {  # a one-word spec that is neither a registered name nor a program; "proxy_name" in a proxy
        "python": lambda a: (f"Give {a['proxy_name']!r} a registered name ({a['known']}), a command list such as "
                             "['python', 'agent.py'], or an AgentSpec.") if a.get("proxy_name") else
        (f"Use a registered name ({a['known']}), a command list such as ['python', 'agent.py'], or "
         "acpnb.register(name, command)."),
        "magic": lambda a: (f"Give {a['proxy_name']} a registered name ({a['known']}) or a quoted command line: "
                            f"%acp proxy {a['proxy_name']}='python agent.py'.") if a.get("proxy_name") else
        (f"Use a registered name ({a['known']}), or run any ACP agent by its command: %acp start -- python agent.py "
         "(acp-notebook agents lists what is installed)."),
        "cli": lambda a: (f"Use a registered name ({a['known']}) or an ACP agent's command line; "
                          "`acp-notebook agents` lists the registered agents and what each needs."),
    },
    "see_log": {  # an answer the agent was not allowed to send; the frame is in the log
        "python": _fixed("Nothing was changed by this answer; the agent's log (agent.log) notes the frame. Try "
                         "again, or report it to the agent's authors."),
        "magic": _fixed("Nothing was changed by this answer; %acp log shows the frame. Try again, or report it to "
                        "the agent's authors."),
        "cli": _fixed("Nothing was changed by this answer. Try again, or report it to the agent's authors."),
    },
}
