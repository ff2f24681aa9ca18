"""Several models from the same point: ``acpnb.branch_sweep(session, prompt, models=[...])``.

The conversation is branched once per model at its current point (a ``session/fork`` for a model of the
session's own agent, set to that model; for a model of another agent, a new session of that agent handed the
conversation, marked as a handover: see branching.py), the same prompt goes to each at once, and the answers come
back as a sweep result (``acp_notebook.sweep``'s ``SweepResult``: ``to_pandas``, scorers, ``compare``), one row
per model, shown side by side with time, tokens and cost (widgets/branches.py). Each branch's session stays open
(``result.sessions``): the conversation can go on from any of them.

A model is a value of the session's model option (``"smart"``; through the proxy ``"a:fast"``), or
``AGENT:VALUE`` where AGENT is the session's agent's name or a key of ``agents=``. Tokens and cost in the rows are
what the turn added to its session's usage (a fork starts with its source's context).

Threads: everything runs on the background loop thread (the core coroutine); the result is plain data.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._facade import twins
from .branching import Handover, exchanges_of
from .errors import AcpError, AgentClosedError, ConfigOptionError
from .sweep.result import SweepResult
from .sweep.scorers import ModelGraded, as_scorers, to_score
from .widgets.branches import sweep_forms

if TYPE_CHECKING:
    from .client import Agent
    from .session import Session

__all__ = ["BranchSweepResult", "abranch_sweep", "branch_sweep"]


@dataclass(frozen=True)
class _Target:
    model: str  # as asked
    agent: Agent
    value: str  # the model option's value on that agent


def _resolve(session: Session, model: str, agents: Mapping[str, Agent]) -> _Target:
    option = session.model_option
    if option is not None and model in option.values:
        return _Target(model, session.agent, model)
    name, sep, value = model.partition(":")
    if sep and name in agents:
        return _Target(model, agents[name], value)
    if sep and name == session.agent.name:
        return _Target(model, session.agent, value)
    offered = ", ".join(str(v) for v in option.values) if option is not None else "none"
    raise ConfigOptionError(f"{model!r} is neither a model of this session ({offered}) nor AGENT:MODEL of an agent "
                            f"named {', '.join([session.agent.name, *agents])}", config_id="model", value=model,
                            valid=list(option.values) if option is not None else [])


def _usage_point(session: Session) -> tuple[Any, Any]:
    usage = session.usage or {}
    cost = usage.get("cost") if isinstance(usage.get("cost"), Mapping) else {}
    return usage.get("used"), cost.get("amount")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


async def _open(session: Session, target: _Target) -> Session:
    """The branch for one model: a fork where it is the same agent, else a new session handed the conversation."""
    if target.agent is session.agent:
        branch = await session.afork()
    else:
        branch = await target.agent.anew_session(session.cwd)
        branch.permission = session.permission
        branch.handover = Handover(exchanges_of(list(session.turns)), f"{session.agent.name}:{session.model}",
                                   reason="asked from the same point")
    option = branch.model_option
    if option is None:
        raise ConfigOptionError(f"agent '{target.agent.name}' offers no model option", config_id="model",
                                value=target.value, valid=[])
    if option.value != target.value:
        await branch.aset(option.id, target.value)
    return branch


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


async def _ask(session: Session, target: _Target, prompt: str, timeout: float | None,
               row: dict[str, Any]) -> Session | None:
    """One model's row, filled as its turn went; never raises but for cancellation."""
    branch = None
    try:
        branch = await _open(session, target)
        row["session_id"] = branch.id
        used, cost = _usage_point(branch)
        turn = await branch.aprompt(prompt, timeout=timeout)
        _fill(row, turn, used, cost, _usage_point(branch))
    except asyncio.CancelledError:
        raise
    except AcpError as exc:
        row.update(status="timeout" if "within" in str(exc) and "no answer" in str(exc) else "error",
                   error=str(exc).splitlines()[0])
    row["ended_at"] = _iso(time.time())
    return branch


def _fill(row: dict[str, Any], turn: Any, used: Any, cost: Any, after: tuple[Any, Any]) -> None:
    usage = turn.usage or {}
    row.update(text=turn.text, thoughts=turn.thoughts, stop_reason=turn.stop_reason, duration_s=turn.duration_s,
               ttft_s=turn.ttft_s, tool_calls=len(turn.tool_calls), model_at_end=turn.model)
    for wire, column in (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens"),
                         ("totalTokens", "total_tokens")):
        if _number(usage.get(wire)):
            row[column] = int(usage[wire])
    if row.get("total_tokens") is None and _number(after[0]):
        row["total_tokens"] = int(after[0]) - (int(used) if _number(used) else 0)
    if _number(after[1]):
        row["cost"] = float(after[1]) - (float(cost) if _number(cost) else 0.0)
        money = usage.get("cost")
        row["currency"] = money.get("currency") if isinstance(money, Mapping) else None


def _score(row: dict[str, Any], scorers: Sequence[Any]) -> None:
    for scorer in scorers:
        if row["status"] != "ok":
            row[f"score_{scorer.name}"] = None
            continue
        score = to_score(scorer.score(row), scorer.name)
        row[f"score_{scorer.name}"] = score.value
        row[f"explanation_{scorer.name}"] = score.explanation


class BranchSweepResult(SweepResult):
    """A sweep result whose rows are the models' answers from one point of a conversation; ``sessions`` maps each
    model to the session its answer is in (the conversation goes on from there), and it shows side by side."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any],
                 sessions: Mapping[str, Session]) -> None:
        super().__init__(rows, metadata)
        self.sessions = dict(sessions)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return sweep_forms(self.rows)


async def _branch_sweep(session: Session, prompt: str, models: Sequence[str], *,
                        agents: Mapping[str, Agent] | None = None, scorers: Any = None, target: Any = None,
                        turn_timeout: float | None = None) -> BranchSweepResult:
    """Ask several models the same ``prompt`` from ``session``'s current point: a fork per model of the session's
    agent (``"smart"``, or ``"a:fast"`` through the proxy), a handover to a new session for ``AGENT:MODEL`` of
    another agent in ``agents`` ({name: Agent}); each answer stays in its own session (``result.sessions``), the
    session goes on unchanged. Returns a sweep result (``to_pandas()``, ``compare``, ``scorers=`` as for
    ``acpnb.sweep``, ``target=`` for them) shown side by side with time, tokens, cost. ``turn_timeout`` cancels
    a model's turn that runs longer."""
    timeout = turn_timeout
    if session.closed:
        raise AgentClosedError(f"session {session.id} is closed")
    if isinstance(models, str) or not models:
        raise ValueError("branch_sweep: models is a list of model ids, e.g. ['fast', 'smart']")
    if len(set(models)) != len(models):
        raise ValueError("branch_sweep: a model is named more than once")
    chosen = as_scorers(scorers)
    if any(isinstance(s, ModelGraded) for s in chosen):
        raise ValueError("branch_sweep: model-graded scorers need acpnb.sweep (a grader model); score the result's "
                         "rows with a text scorer here")
    targets = [_resolve(session, model, dict(agents or {})) for model in models]
    started = time.time()
    rows = [{"trial_id": f"branch-{i}", "model": t.model, "sample_id": "prompt", "sample_index": 0, "repeat": 0,
             "status": "ok", "prompt": prompt, "target": target, "agent": t.agent.name, "model_value": t.value,
             "attempts": 1, "started_at": _iso(started)} for i, t in enumerate(targets)]
    opened = await asyncio.gather(*(_ask(session, t, prompt, timeout, row) for t, row in zip(targets, rows)))
    for row in rows:
        _score(row, chosen)
    metadata = {"kind": "branch_sweep", "models": list(models), "from_session": session.id,
                "from_turns": len(session.turns), "scorers": [s.describe() for s in chosen], "prompt": prompt}
    return BranchSweepResult(rows, metadata, {t.model: s for t, s in zip(targets, opened) if s is not None})


branch_sweep, abranch_sweep = twins(_branch_sweep, what="the branch sweep")
