"""The event loop of our own forwarding processes (the proxy): uvloop's where installed, asyncio's otherwise."""

from __future__ import annotations

import asyncio
import sys

import pytest

from acp_notebook._loop import run_main


async def _loop_module(answer: int) -> tuple[str, int]:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__, answer


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is a dependency only where it builds")
def test_the_proxy_loop_is_uvloop_where_it_is_a_dependency() -> None:
    module, answer = run_main(_loop_module(7))
    assert module.startswith("uvloop") and answer == 7


def test_without_uvloop_the_proxy_runs_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # an import of it now raises ImportError
    module, answer = run_main(_loop_module(8))
    assert module.startswith("asyncio") and answer == 8

