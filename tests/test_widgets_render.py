"""Views draw on the render thread, never on the protocol loop: a view that is slow to draw holds up no
agent's frames, a cell still ends, and the kernel's flush and exit never wait long for it.

The slow view is real: a TurnView whose renders on the render thread wait for an event (with a
timeout), against the real demo agent; what a notebook would get is IPython's capturing publisher.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from acp_notebook.widgets import render_thread
from acp_notebook.widgets.chat import TurnView
from acp_notebook.widgets.display import Bundle, LiveDisplay, finalize_all, flush_all, open_displays
from tests.test_widgets import TIMEOUT, comms, demo, outputs_of, run_turn, shown  # noqa: F401 - fixtures

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class Gate:
    """Holds the render thread inside a render until ``release``; ``entered`` says it is held."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def hold(self) -> None:
        if render_thread.in_render_thread() and not self.released.is_set():
            self.entered.set()
            self.released.wait(TIMEOUT)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def gate() -> Any:
    held = Gate()
    yield held
    held.release()  # whatever the test did, the render thread goes on


def stuck_view(gate: Gate, turn: Any) -> TurnView:
    class StuckView(TurnView):
        final_render_wait = 600.0  # the cell waits for the static output however long the thread is held

        def render(self) -> None:
            gate.hold()
            super().render()

    return StuckView(turn)


def render_thread_caught_up() -> None:
    """Everything handed to the render thread so far has run (it runs what is due in order)."""
    render_thread.submit(lambda: None).result(TIMEOUT)


def test_a_view_slow_to_draw_holds_up_no_frame_and_ends_static_once_drawn(comms, demo, shown, gate):
    view = stuck_view(gate, demo.new_session().start_turn("new topic: Slow views"))
    view.show()
    assert gate.entered.wait(TIMEOUT)  # the render thread is inside the view's render
    # The agent goes on streaming and its turn ends: the loop handled every frame meanwhile.
    turn = view.turn.future.result(TIMEOUT)
    assert turn.stop_reason == "end_turn" and len(turn.updates) > 1 and turn.text
    # Another session's whole turn, sent and answered while the view is still held.
    other = demo.new_session().prompt("new topic: Meanwhile")
    assert other.text
    assert not view.finished.done()  # its cell waits for the static output, not sent yet
    assert WIDGET_MIME in outputs_of(shown, view.live)[-1].data

    gate.release()
    assert view.finished.result(TIMEOUT) is turn
    final = outputs_of(shown, view.live)[-1]
    assert WIDGET_MIME not in final.data and turn.text in final.data["text/plain"]
    assert ">Slow views<" in final.data["text/html"] and "acpnb-status-done" in final.data["text/html"]
    assert view.live.final and view.live not in open_displays()


def test_a_cell_ends_when_the_render_thread_is_held_up_and_its_output_turns_static_later(comms, demo, shown, gate):
    stuck = stuck_view(gate, demo.new_session().start_turn("hello"))
    assert gate.entered.wait(TIMEOUT)

    class Impatient(TurnView):
        final_render_wait = 0.0  # resolve `finished` at once if the render thread cannot draw the end

    patient_turn = demo.new_session().start_turn("new topic: Patience")
    view = Impatient(patient_turn)
    view.show()
    turn = view.finished.result(TIMEOUT)  # the cell would end here
    assert turn.text and not view.live.final
    gate.release()
    stuck.finished.result(TIMEOUT)
    render_thread_caught_up()
    final = outputs_of(shown, view.live)[-1]
    assert view.live.final and WIDGET_MIME not in final.data and turn.text in final.data["text/plain"]


def test_flush_and_kernel_exit_do_not_wait_for_a_publish_stuck_on_the_render_thread(shown, gate):
    said = ["first"]

    def render(final: bool, reason: str) -> Bundle:
        gate.hold()
        text = said[-1] + (f" (final: {reason})" if final else "")
        return Bundle({"text/plain": text, "text/html": f"<p>{text}</p>", "text/markdown": text})

    live = LiveDisplay(render, interval=0.0)
    live.show()  # on this thread: not held
    live.refresh()  # published on the render thread, which the render holds
    assert gate.entered.wait(TIMEOUT)
    said.append("second")
    live.refresh()

    def kernel_thread_after_cell_and_at_exit() -> None:
        flush_all(wait=0.05)
        finalize_all("the kernel shut down", wait=0.05)

    kernel = threading.Thread(target=kernel_thread_after_cell_and_at_exit)
    kernel.start()
    kernel.join(TIMEOUT)
    assert not kernel.is_alive(), "flush_all or finalize_all waited for the stuck render"
    assert not live.final and live.published == 0

    gate.release()
    render_thread_caught_up()  # the held publish, then the finalize handed over at exit
    final = outputs_of(shown, live)[-1]
    assert live.final and live not in open_displays()
    assert final.data["text/plain"] == "second (final: the kernel shut down)"
