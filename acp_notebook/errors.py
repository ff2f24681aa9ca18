"""The AcpError tree, and how its members render in a notebook.

An error carries facts: its message and, where something fixes it, a ``remedy`` (remedies.Remedy: an
action and its arguments, in no surface's syntax). The words for a remedy are written once per surface
in remedies.py: Python (``acpnb.start([...])``), the magics (``%acp start -- python agent.py``), the
command line (``acp-notebook agents``). ``hint`` is the Python words, what ``str()`` shows; the
surface that shows an error asks for its own words with ``hint_for(surface)``, or gets a copy in its
terms with ``in_terms_of(surface)`` (what it raises or prints). The error itself is never changed,
so the same error can be shown on two surfaces. ``hint=`` is a plain hint the same on every surface
("Did you mean 'model'?"); ``hints=`` gives a surface its own words where no remedy fits (launch.py's
install advice). A surface without words of its own shows the Python ones. Plain data; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ._protocol import AUTH_REQUIRED, INTERNAL_ERROR, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND
from ._term import colour_on
from .remedies import SURFACES, Remedy, phrase

__all__ = [
    "AcpError",
    "AcpTimeoutError",
    "AgentClosedError",
    "AgentExitedError",
    "AgentStartError",
    "CapabilityError",
    "ConfigOptionError",
    "PermissionDenied",
    "ProtocolError",
    "ReplayMismatch",
    "Remedy",
    "RpcError",
    "SURFACES",
    "data_details",
]

E = TypeVar("E", bound="AcpError")


class AcpError(Exception):
    """Base of every error acp-notebook raises on purpose.

    ``remedy`` says what fixes it, as a fact; ``hint`` says it in Python's words. In IPython the error
    renders as one short block (message + hint) instead of a traceback into asyncio.
    """

    hint: str = ""
    # What fixes every error of the class unless the raiser says otherwise (remedies.py words it per surface).
    remedy: Remedy | None = None

    def __init__(self, message: str, *, hint: str | None = None, hints: Mapping[str, str] | None = None,
                 remedy: Remedy | None = None) -> None:
        super().__init__(message)
        self.message = message
        if remedy is not None:
            self.remedy = remedy
        self.surface = "python"
        worded = {} if self.remedy is None or hint is not None else \
            {s: text for s in SURFACES if (text := phrase(self.remedy, s)) is not None}
        if hint is not None:
            self.hint = hint
        elif "python" in worded:
            self.hint = worded["python"]
        self.hints = {**worded, "python": self.hint, **(hints or {})}

    def hint_for(self, surface: str) -> str:
        """The hint in ``surface``'s syntax ("python", "magic", "cli"); the Python form where it has none."""
        hints = {**getattr(self, "hints", {}), getattr(self, "surface", "python"): self.hint}
        return hints.get(surface, hints.get("python", self.hint))

    def shown_elsewhere(self, where: str) -> AcpError:
        """A copy of this error (same type and fields) that IPython renders as one line pointing ``where``
        the error is already shown in full (the turn view of a ``%%acp`` cell). Raising it still fails
        the cell, so "Run all" stops there, without the message appearing a second time."""
        copy = self._copy()
        copy.shown_in = where
        return copy

    def in_terms_of(self, surface: str) -> AcpError:
        """A copy of this error (same type and fields) whose ``hint`` is in ``surface``'s syntax: what
        ``str()`` and IPython show of it. This error is left as it is."""
        if surface not in SURFACES:
            raise ValueError(f"surface must be one of {', '.join(SURFACES)}, not {surface!r}")
        current = getattr(self, "surface", "python")
        copy = self._copy()
        # A hint assigned since (error.hint = ...) is kept as the form of the surface the error was in.
        copy.hints = {**getattr(self, "hints", {}), current: self.hint}
        copy.hint = self.hint_for(surface)
        copy.surface = surface
        return copy

    def reworded(self: E, message: str | None = None, *, hint: str | None = None) -> E:
        """A copy of this error with another message and/or hint (on every surface: words a surface composed
        for the copy it shows, e.g. the magics' "%acp set applied a=1, then stopped"). This error is left as it is."""
        copy = self._copy()
        if message is not None:
            copy.message, copy.args = message, (message,)
        if hint is not None:
            copy.hint = hint
            copy.hints = {surface: hint for surface in SURFACES}
        return copy

    def _copy(self: E) -> E:
        copy = type(self).__new__(type(self), *self.args)
        copy.__dict__.update(self.__dict__)
        return copy

    def __str__(self) -> str:
        return f"{self.message}\nHint: {self.hint}" if self.hint else self.message

    # IPython calls this instead of formatting a traceback (see IPython's
    # InteractiveShell.showtraceback); a user gets one screen, not 40 frames. Coloured only where
    # colours are wanted: not with NO_COLOR, IPython's NoColor scheme, or output to a file.
    def _render_traceback_(self) -> list[str]:
        red, dim, plain = ("\x1b[31m", "\x1b[2m", "\x1b[0m") if colour_on() else ("", "", "")
        if getattr(self, "shown_in", None):
            return [f"{red}{type(self).__name__}{plain}: {dim}shown {self.shown_in}{plain}"]
        lines = [f"{red}{type(self).__name__}{plain}: {self.message}"]
        if self.hint:
            lines.append(f"{dim}Hint: {self.hint}{plain}")
        return lines


class AgentStartError(AcpError):
    """The agent process could not be started or did not complete ``initialize``."""

    def __init__(
        self,
        message: str,
        *,
        command: Sequence[str] = (),
        exit_code: int | None = None,
        stderr_tail: Sequence[str] = (),
        hint: str | None = None,
        hints: Mapping[str, str] | None = None,
        remedy: Remedy | None = None,
    ) -> None:
        self.command = list(command)
        self.exit_code = exit_code
        self.stderr_tail = list(stderr_tail)
        super().__init__(_with_stderr(message, self.stderr_tail), hint=hint, hints=hints, remedy=remedy)


class AgentExitedError(AcpError):
    """The agent process ended while a request or turn was waiting on it."""

    remedy = Remedy("start_again")

    def __init__(
        self,
        message: str,
        *,
        exit_code: int | None = None,
        stderr_tail: Sequence[str] = (),
        hint: str | None = None,
        hints: Mapping[str, str] | None = None,
        remedy: Remedy | None = None,
    ) -> None:
        self.exit_code = exit_code
        self.stderr_tail = list(stderr_tail)
        super().__init__(_with_stderr(message, self.stderr_tail), hint=hint, hints=hints, remedy=remedy)


class AgentClosedError(AcpError):
    """The agent or session was closed by the user and cannot be used any more."""

    remedy = Remedy("start_new")


class ProtocolError(AcpError):
    """The agent sent something the protocol does not allow."""


class RpcError(AcpError):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, *, method: str = "", hint: str | None = None,
                 hints: Mapping[str, str] | None = None, remedy: Remedy | None = None):
        self.code = code
        self.rpc_message = message
        self.data = data
        self.method = method
        text = f"{method}: " if method else ""
        text += f"the agent answered error {code}: {message}"
        details = data_details(data)
        if details:
            text += f" ({details})"
        if hint is None and remedy is None:
            remedy = {AUTH_REQUIRED: Remedy("authenticate"), RESOURCE_NOT_FOUND: Remedy("list_sessions")}.get(code)
        if hint is None and remedy is None and code == METHOD_NOT_FOUND:
            hint = "This agent does not implement that method."
        super().__init__(text, hint=hint, hints=hints, remedy=remedy)

    @property
    def auth_required(self) -> bool:
        """The agent wants ``authenticate`` first (ACP's -32000)."""
        return self.code == AUTH_REQUIRED

    @property
    def not_found(self) -> bool:
        """The agent does not know the resource, e.g. the session id (-32002)."""
        return self.code == RESOURCE_NOT_FOUND

    @property
    def method_not_found(self) -> bool:
        return self.code == METHOD_NOT_FOUND


class ReplayMismatch(RpcError):
    """A replayed session diverged from its recording: the client sent something the recording does
    not have at that point (another prompt, a config value never recorded, a request too many).

    ``data["replayMismatch"]`` says where: the recording's file and line, what it expected, what came.
    """

    DATA_KEY = "replayMismatch"
    hint = ("A recording answers only what was asked when it was made: run the same cells with the same "
            "inputs, or record the session again against the real agent.")

    def __init__(self, message: str, *, where: dict[str, Any] | None = None, method: str = "") -> None:
        AcpError.__init__(self, message)
        self.code = INTERNAL_ERROR
        self.rpc_message = message
        self.data = {self.DATA_KEY: dict(where or {})}
        self.method = method

    @property
    def where(self) -> dict[str, Any]:
        return self.data[self.DATA_KEY]


class AcpTimeoutError(AcpError, TimeoutError):
    """A request or turn did not finish within its timeout."""

    remedy = Remedy("longer_timeout")


class ConfigOptionError(AcpError, ValueError):
    """A config option id or value was refused, locally or by the agent. Session state is unchanged."""

    def __init__(
        self,
        message: str,
        *,
        config_id: str | None = None,
        value: Any = None,
        valid: Sequence[Any] = (),
        hint: str | None = None,
        hints: Mapping[str, str] | None = None,
        remedy: Remedy | None = None,
    ) -> None:
        self.config_id = config_id
        self.value = value
        self.valid = list(valid)
        super().__init__(message, hint=hint, hints=hints, remedy=remedy)


class CapabilityError(AcpError):
    """The agent did not advertise the capability a call needs."""


class PermissionDenied(AcpError):
    """An agent request was refused: a path outside the session's directories, or a denied permission."""


def _with_stderr(message: str, stderr_tail: Sequence[str]) -> str:
    if not stderr_tail:
        return message
    shown = "\n".join(f"  | {line}" for line in stderr_tail)
    return f"{message}\nLast lines of the agent's stderr:\n{shown}"


def data_details(data: Any) -> str:
    """The readable part of an error answer's ``data`` (its message or details), or a short repr of it."""
    if data is None:
        return ""
    if isinstance(data, dict):
        for key in ("message", "details", "detail", "reason"):
            if isinstance(data.get(key), str):
                return data[key]
    return str(data)[:300]
