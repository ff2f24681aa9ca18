"""A proxy session's phase and its one table of transitions; the backend sessions it may use.

A session as the proxy's client knows it (``ProxySession``) is in one ``Phase``:

- ``UNBOUND``: no agent session receives its frames; its probes (one agent session per agent,
  opened by session/new or a reopen) are held, and any agent's model may be picked.
- ``BOUND``: one agent session (a ``Candidate``) is bound: its frames reach the client. Before the
  first prompt the session may still move to another agent's session (``BOUND -> BOUND``).
- ``PROMPTED``: bound and prompted (or reopened with its history on one agent): its conversation is on
  that agent; a move to another agent hands it over (handover.py, ``PROMPTED -> PROMPTED``).
- ``CLOSED``: closed or deleted by the client, or no agent could reopen it. Final: a later reopen
  of the same id makes a new ``ProxySession``.

``TRANSITIONS`` is the whole table; a move not in it is a bug in the proxy and raises
``IllegalTransition``. The agent ending sends ``BOUND``/``PROMPTED`` back to ``UNBOUND`` (the next
prompt binds again).

A ``Candidate`` is one agent session of a proxy session: ``HELD`` (a probe: its updates are kept
until it is bound), ``BOUND`` (it is the session's bound one) or ``RELEASED`` (no longer routed;
final). ``granted``: it was opened with the client's MCP servers (a probe is not: those servers are
for the agent the user picks); its ``relay`` (relay.py), its own way to the kernel, closes when it
is released.

Threads: the proxy's one event loop mutates all of it.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._early import EarlyUpdates
from .models import AgentModels, agent_models, legacy_mode_option
from .transcript import Transcript

if TYPE_CHECKING:
    from .backend import Backend
    from .relay import KernelRelay

__all__ = ["TRANSITIONS", "Candidate", "CandidatePhase", "IllegalTransition", "Phase", "ProbeOutcome",
           "ProxySession"]

HELD_UPDATES_KEPT = 1000


class Phase(enum.Enum):
    UNBOUND = "unbound"
    BOUND = "bound"
    PROMPTED = "prompted"
    CLOSED = "closed"


TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    # A reopen on the agent that has the session's history ties it at once (UNBOUND -> PROMPTED).
    Phase.UNBOUND: frozenset({Phase.BOUND, Phase.PROMPTED, Phase.CLOSED}),
    # BOUND -> BOUND: moved to another agent before the first prompt; -> UNBOUND: its agent ended,
    # or a failed move put it back with nothing bound.
    Phase.BOUND: frozenset({Phase.BOUND, Phase.PROMPTED, Phase.UNBOUND, Phase.CLOSED}),
    # PROMPTED -> PROMPTED: reopened again (load/resume) on its agent, or handed over to another agent;
    # -> UNBOUND: its agent ended.
    Phase.PROMPTED: frozenset({Phase.PROMPTED, Phase.UNBOUND, Phase.CLOSED}),
    Phase.CLOSED: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A move the transition table does not allow: a bug in the proxy, never the client's doing."""


class CandidatePhase(enum.Enum):
    HELD = "held"
    BOUND = "bound"
    RELEASED = "released"


@dataclass
class ProbeOutcome:
    """What probing one agent for one session gave: its models, or why it is left out."""

    agent: str
    models: AgentModels | None = None
    error: str | None = None
    pending: bool = False  # still starting when session/new answered; it may join later

    def describe(self) -> dict[str, Any]:
        if self.models is not None:
            return {"ok": True, "models": [self.models.prefixed(v) for v in self.models.values]}
        return {"ok": False, "error": self.error, **({"pending": True} if self.pending else {})}


class Candidate:
    """One backend session a proxy session can use: a probe's, or the one it is bound to."""

    def __init__(self, session: ProxySession, backend: Backend[Candidate], result: dict[str, Any],
                 backend_session_id: str, *, granted: bool, relay: KernelRelay | None = None) -> None:
        self.session = session
        self.backend = backend
        self.agent = backend.name
        self.backend_session_id = backend_session_id
        # Opened with the client's mcpServers (or the client gave none): it may be bound as it is.
        self.granted = granted
        self.relay = relay
        self.options: list[dict[str, Any]] | None = None
        # agent_models(self.options), kept until the list is replaced (absorb swaps it whole, never edits it):
        # every set_config_option and option update through the proxy reads it two or three times.
        self._models: tuple[Any, AgentModels] | None = None
        self.modes: Any = None
        # Updates kept while HELD (the client does not know this agent session yet), forwarded when it is bound.
        self.held: EarlyUpdates[dict[str, Any]] = EarlyUpdates(per_session=HELD_UPDATES_KEPT)
        self._released = False
        self.absorb(result)

    @property
    def phase(self) -> CandidatePhase:
        if self._released:
            return CandidatePhase.RELEASED
        return CandidatePhase.BOUND if self.session.bound is self else CandidatePhase.HELD

    @property
    def released(self) -> bool:
        return self._released

    @property
    def bound(self) -> bool:
        return self.session.bound is self

    def release(self) -> bool:
        """Move to RELEASED, its way to the kernel shut at once; False when it was already (releasing is
        final and done once)."""
        if self._released:
            return False
        self._released = True
        if self.relay is not None:
            self.relay.close_soon()
        return True

    def hold(self, params: dict[str, Any]) -> None:
        """Keep an update that arrived while HELD (forwarded when it is bound; the oldest are kept)."""
        self.held.hold(self.backend_session_id, params)

    def absorb(self, result: Any) -> None:
        """Take the agent's state from a session/new, load, resume or set_config_option result."""
        if not isinstance(result, dict):
            return
        if isinstance(result.get("configOptions"), list):
            self.options = result["configOptions"]
        if result.get("modes") is not None:
            self.modes = result["modes"]
        if self.bound:  # the agent may change its model by itself (a fallback): follow it
            self.session.selected = (self.agent, self.models.current)

    def set_mode(self, mode_id: Any) -> None:
        """Follow a mode change (current_mode_update, or a session/set_mode the agent accepted)."""
        if isinstance(mode_id, str) and isinstance(self.modes, dict):
            self.modes = {**self.modes, "currentModeId": mode_id}

    @property
    def legacy(self) -> bool:
        """The agent sends only the old `modes` field (no configOptions): the proxy shows them as `mode`."""
        return self.options is None and legacy_mode_option(self.modes) is not None

    @property
    def effective_options(self) -> list[dict[str, Any]] | None:
        """The agent's options, or for an agent with only the old `modes` field, the `mode` option built from it."""
        if self.legacy:
            return [legacy_mode_option(self.modes)]  # type: ignore[list-item]
        return self.options

    def mode_ids(self) -> list[str]:
        option = legacy_mode_option(self.modes)
        return [entry["value"] for entry in option["options"]] if option is not None else []

    @property
    def models(self) -> AgentModels:
        cached = self._models
        if cached is None or cached[0] is not self.options:
            cached = self._models = (self.options, agent_models(self.agent, self.options))
        return cached[1]


@dataclass
class ProxySession:
    """A session as the proxy's client knows it: its phase, its probes and agent sessions, its model pick.

    ``phase`` and ``bound`` change only through ``bind``, ``unbind``, ``tie`` and ``close``, each
    checked against ``TRANSITIONS``."""

    id: str
    params: dict[str, Any]
    probes: dict[str, ProbeOutcome] = field(default_factory=dict)
    candidates: dict[str, Candidate] = field(default_factory=dict)
    selected: tuple[str, str] | None = None  # (agent, bare model) picked, or the default
    cancels: int = 0  # session/cancel notifications seen: a prompt checks whether one came while it bound
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_backend: tuple[str, str] | None = None  # (agent, backend session id) of the last binding
    shown_mode: str | None = None  # the mode clients that only know the old `modes` field were told
    transcript: Transcript = field(default_factory=Transcript)  # its conversation, for a handover (handover.py)
    # A conversation handed over to the agent it moved to, sent with its next prompt: (text, _meta marker).
    pending_handover: tuple[str, dict[str, Any]] | None = None
    _phase: Phase = Phase.UNBOUND
    _bound: Candidate | None = None

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def bound(self) -> Candidate | None:
        return self._bound

    @property
    def prompted(self) -> bool:
        return self._phase is Phase.PROMPTED

    @property
    def closed(self) -> bool:
        return self._phase is Phase.CLOSED

    def _move(self, phase: Phase) -> None:
        if phase not in TRANSITIONS[self._phase]:
            raise IllegalTransition(f"proxy session {self.id}: {self._phase.value} -> {phase.value}")
        self._phase = phase

    def bind(self, candidate: Candidate, *, tie: bool = False) -> bool:
        """Bind `candidate` (tied to its agent too when `tie`); True when it is another agent session than
        the last one bound (the binding is then worth remembering)."""
        self._move(Phase.PROMPTED if tie or self._phase is Phase.PROMPTED else Phase.BOUND)
        self._bound = candidate
        place = (candidate.agent, candidate.backend_session_id)
        moved, self.last_backend = self.last_backend != place, place
        return moved

    def tie(self) -> None:
        """The first prompt: from here on the session stays with the agent it is bound to."""
        if self._bound is None:
            raise IllegalTransition(f"proxy session {self.id}: prompted with nothing bound")
        self._move(Phase.PROMPTED)

    def unbind(self) -> None:
        """Nothing bound any more (its agent ended, or a failed move or reopen): any agent may be picked again."""
        self._move(Phase.UNBOUND)
        self._bound = None

    def close(self) -> None:
        self._move(Phase.CLOSED)
        self._bound = None

    @property
    def asks_servers(self) -> bool:
        """The client gave MCP servers for this session: only the agent session it is bound to gets them."""
        return bool(self.params.get("mcpServers"))

    @property
    def asks_grant(self) -> bool:
        """What the client gave is for the bound agent session only (MCP servers, a system prompt): a probe,
        opened without them, is replaced by a session opened with them when it is bound."""
        return self.asks_servers or self.params.get("systemPrompt") is not None

    @property
    def available(self) -> list[str]:
        return [agent for agent, probe in self.probes.items() if probe.models is not None]

    def failures(self) -> dict[str, str]:
        return {agent: probe.error or "unknown" for agent, probe in self.probes.items()
                if probe.models is None and not probe.pending}

    def probes_meta(self) -> dict[str, Any]:
        """What the client is told of the probes (``_meta`` of session/new and of a reopen): each agent's
        outcome, those that failed, those still starting."""
        meta: dict[str, Any] = {"agents": {name: outcome.describe() for name, outcome in self.probes.items()}}
        failed = self.failures()
        if failed:
            meta["failed"] = failed
        waiting = [name for name, outcome in self.probes.items() if outcome.pending]
        if waiting:
            meta["pending"] = waiting
        return meta
