"""The interpreter's switch interval while turns stream (`_loop.switch_interval`, `AcpMagics.switch_interval`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from IPython.testing import globalipapp
from traitlets import TraitError

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook._loop import _SwitchInterval
from acp_notebook.magics.magic import AcpMagics

PYTHON_DEFAULT = 0.005


@pytest.fixture
def interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(PYTHON_DEFAULT)
    yield
    sys.setswitchinterval(before)


def test_lowered_while_turns_stream_and_put_back_when_the_last_ends(interval: None) -> None:
    guard = _SwitchInterval(0.001)
    with guard.streaming():
        assert sys.getswitchinterval() == pytest.approx(0.001)
        with guard.streaming():  # a second turn at once (a sweep)
            assert sys.getswitchinterval() == pytest.approx(0.001)
        assert sys.getswitchinterval() == pytest.approx(0.001)  # the first still streams
    assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT)


def test_put_back_after_a_turn_that_failed(interval: None) -> None:
    guard = _SwitchInterval(0.001)
    with pytest.raises(RuntimeError), guard.streaming():
        raise RuntimeError("the agent died")
    assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT)


def test_a_value_set_by_someone_else_meanwhile_is_left_alone(interval: None) -> None:
    guard = _SwitchInterval(0.001)
    with guard.streaming():
        sys.setswitchinterval(0.002)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_never_raised_and_zero_leaves_it_alone(interval: None) -> None:
    sys.setswitchinterval(0.0005)
    with _SwitchInterval(0.001).streaming():
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    sys.setswitchinterval(PYTHON_DEFAULT)
    with _SwitchInterval(0.0).streaming():
        assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT)


def test_a_real_turn_streams_at_the_lowered_interval(interval: None) -> None:
    seen: list[float] = []

    def decide(request: acpnb.PermissionRequest) -> str:
        seen.append(sys.getswitchinterval())  # asked on the loop thread, mid-turn
        return request.option_for("allow_once")

    with acpnb.start("demo") as agent:
        turn = agent.new_session(permission=decide).prompt("read nothing-here.txt")
    assert turn.permissions and seen == [pytest.approx(_loop.switch_interval.target)]
    assert sys.getswitchinterval() == pytest.approx(PYTHON_DEFAULT)


def test_the_magics_option_sets_the_target_and_refuses_a_negative_one() -> None:
    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "acp_notebook")
    try:
        magics = ip.magics_manager.registry["AcpMagics"]
        ip.run_line_magic("config", "AcpMagics.switch_interval = 0")
        assert _loop.switch_interval.target == 0
        with pytest.raises(TraitError):
            magics.switch_interval = -1.0
        assert _loop.switch_interval.target == 0
    finally:
        ip.run_line_magic("unload_ext", "acp_notebook")
        ip.config.pop("AcpMagics", None)
        _loop.switch_interval.target = AcpMagics.switch_interval.default_value
