"""Hints in magic syntax: the errors the client raises speak Python (``acpnb.start([...])``); in a
``%acp`` cell the same advice is given as magics (``%acp start -- python agent.py``).

``in_magic_terms(error)`` rewrites the hint of the errors whose advice is about how to
call the client, in place, and returns the error. Pure; kernel thread.
"""

from __future__ import annotations

from ..errors import AcpError, AcpTimeoutError, AgentExitedError, AgentStartError, CapabilityError

__all__ = ["in_magic_terms"]


def _known_agents() -> str:
    from ..launch import known_names

    return ", ".join(sorted(known_names()))


def _start_hint(error: AgentStartError) -> str | None:
    if error.message.startswith("unknown agent"):
        return (f"Use a registered name ({_known_agents()}), or run any ACP agent by its command: "
                "%acp start -- python agent.py (acp-notebook agents lists what is installed).")
    if "did not answer initialize within" in error.message:
        return ("Agents fetched by npx can take long on first start: give it longer with --timeout SECONDS, "
                "e.g. %acp start claude --timeout 180 (before the -- of a command line).")
    if "register the agent with its full command" in (error.hint or ""):
        return error.hint.replace("register the agent with its full command",
                                  "start it by its full command: %acp start -- /path/to/program")
    return None


def in_magic_terms(error: AcpError) -> AcpError:
    """``error`` with a hint that names magics instead of Python calls (when its hint was about calls)."""
    hint: str | None = None
    if isinstance(error, AgentStartError):
        hint = _start_hint(error)
    elif isinstance(error, AgentExitedError):
        hint = "Start it again with %acp start, then %acp resume reopens its last session."
    elif isinstance(error, AcpTimeoutError):
        hint = ("Give it longer (--timeout SECONDS, or %config AcpMagics.timeout = 120) and check with %acp log "
                "that the agent still answers.")
    elif isinstance(error, CapabilityError) and "agent.capabilities" in (error.hint or ""):
        hint = "%acp log --method initialize shows what the agent offers."
    if hint is not None:
        error.hint = hint
    return error
