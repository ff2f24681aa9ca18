"""SharedStart (acp_notebook/_once.py): one start shared by concurrent callers, and the owner's retry policy; and
MadeOnFirstUse: a process-wide object made once, by whichever thread asks first."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from acp_notebook._once import MadeOnFirstUse, SharedStart

TIMEOUT = 10.0


class Starter:
    """Counts starts; each start waits for ``release`` and then returns (or raises) what ``outcome`` says."""

    def __init__(self, outcome: Callable[[int], Any]) -> None:
        self.outcome = outcome
        self.calls = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def start(self) -> Any:
        self.calls += 1
        self.started.set()
        number = self.calls
        await self.release.wait()
        result = self.outcome(number)
        if isinstance(result, BaseException):
            raise result
        return result


def run(test: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(test(), TIMEOUT))


def test_concurrent_callers_share_one_start_and_a_cancelled_caller_does_not_abort_it():
    async def test() -> None:
        starter = Starter(lambda n: f"agent {n}")
        shared: SharedStart[str] = SharedStart(lambda _ended: False)
        callers = [asyncio.ensure_future(shared.get(starter.start)) for _ in range(5)]
        # The start's task was made by the first caller, after the others were scheduled: all have asked.
        await starter.started.wait()
        assert shared.running and starter.calls == 1
        callers[0].cancel()  # one caller gives up (its deadline)
        await asyncio.wait([callers[0]])
        assert shared.running
        starter.release.set()
        assert await asyncio.gather(*callers[1:]) == ["agent 1"] * 4
        assert callers[0].cancelled() and starter.calls == 1
        assert await shared.get(starter.start) == "agent 1"  # reused: renew said no
        assert starter.calls == 1 and shared.failure() is None

    run(test)


def test_a_failed_start_is_every_callers_error_and_not_retried_when_the_policy_says_so():
    async def test() -> None:
        starter = Starter(lambda n: RuntimeError(f"start {n} failed"))
        shared: SharedStart[str] = SharedStart(lambda ended: ended.exception() is None and ended.result() == "dead")
        callers = [asyncio.ensure_future(shared.get(starter.start)) for _ in range(3)]
        starter.release.set()
        errors = await asyncio.gather(*callers, return_exceptions=True)
        assert [str(e) for e in errors] == ["start 1 failed"] * 3
        with pytest.raises(RuntimeError, match="start 1 failed"):
            await shared.get(starter.start)  # the same failure, no second start
        assert starter.calls == 1 and str(shared.failure()) == "start 1 failed"

    run(test)


def test_the_policy_renews_a_failed_start_or_one_whose_outcome_went_stale():
    async def test() -> None:
        outcomes = {1: RuntimeError("no"), 2: "dead", 3: "alive"}
        starter = Starter(outcomes.__getitem__)
        starter.release.set()
        renew = SharedStart(lambda ended: ended.exception() is not None or ended.result() == "dead")
        with pytest.raises(RuntimeError):
            await renew.get(starter.start)
        assert await renew.get(starter.start) == "dead"  # the failure was retried
        assert await renew.get(starter.start) == "alive"  # the outcome went stale: started anew
        assert await renew.get(starter.start) == "alive" and starter.calls == 3

    run(test)


def test_a_cancelled_start_is_renewed_and_settle_waits_for_a_running_one():
    async def test() -> None:
        starter = Starter(lambda n: f"agent {n}")
        shared: SharedStart[str] = SharedStart(lambda _ended: False)
        first = shared.begin(starter.start)
        await starter.started.wait()
        shared.cancel()  # the owner shut down meanwhile
        with pytest.raises(asyncio.CancelledError):
            await first
        starter.started.clear()
        second = shared.begin(starter.start)
        assert second is not first
        settled = asyncio.ensure_future(shared.settle())
        await starter.started.wait()
        assert not settled.done() and starter.calls == 2
        starter.release.set()
        await settled
        assert second.result() == "agent 2"

    run(test)


def test_made_on_first_use_makes_one_object_for_threads_that_ask_at_once():
    made: list[object] = []
    entered, go = threading.Event(), threading.Event()

    def make() -> object:
        entered.set()
        assert go.wait(TIMEOUT)  # the other threads ask while this one makes it
        made.append(object())
        return made[-1]

    holder = MadeOnFirstUse(make)
    assert not holder.made
    got: list[object] = []
    first = threading.Thread(target=lambda: got.append(holder.get()))
    first.start()
    assert entered.wait(TIMEOUT)
    others = [threading.Thread(target=lambda: got.append(holder.get())) for _ in range(3)]
    for thread in others:
        thread.start()
    go.set()
    for thread in [first, *others]:
        thread.join(TIMEOUT)
    assert len(made) == 1 and holder.made and got == [made[0]] * 4 and holder.get() is made[0]
