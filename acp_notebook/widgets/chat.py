"""TurnView: what a ``%%acp`` cell shows: header with a running clock (ticking in the browser: parts.py) and, in a
branched conversation, the turn's branch line (widgets/branches.py; a finished view's static output is sent again
when the current branch changes), the latest thought, thoughts,
plan, tool calls with their progress (and the tool's name), the agent's notices and context compactions (as they
come; notices.py draws them), permission prompts, the agent's forms, the reply, usage (the context meter, which
follows the turn's latest compaction).

The view observes one ``Turn`` (``turn.observe``): the turn exists before its prompt is sent, so
nothing has to be matched or armed. What the turn recorded before the view subscribed (a permission
or a form a policy answered at once) is read from the turn when the view starts, each record once.
When the turn ends the view renders once more, freezes its
header (later titles belong to later cells; the session panel shows the live one), replaces its
output with the static form (``LiveDisplay.finalize``: a saved notebook shows the reply with no
kernel) and resolves ``finished``.

Threads: turn events arrive on the background loop thread, inside the connection's handling of
frames, so there the view only notes what it needs (under its lock) and asks for a render; clicks
(Cancel, permission buttons, form buttons) come on the kernel thread and ask the same way. Renders
run on the render thread (``render_thread``): the coalesced ones of a ``Throttle`` (a flood of
chunks costs a few widget messages a second, not one per chunk), the one-second tick, and the
turn's last render with its static output; only the constructor draws once on its own thread,
before the view can be seen. Every widget is written under the view's lock; the children of the
permission and form boxes are added where prompts and forms arrive (the askers, on the loop).
``finished`` is resolved on the render thread after the static output, or, should that thread be
held up elsewhere for ``FINAL_RENDER_WAIT_S``, on the loop without it.

The output is published live when shown, again when the turn's shape changes (its status, tool
calls, kernel calls, the plan's number of rows, a permission request or form answered: not for text
chunks, the clock, or a plan row's status or words, which reach the plan's widget as a delta of the
rows that changed; on the render thread), and static when the turn ends. A request, its answer, an
error or a branch change is published at once; the rest waits until the output was last published
``REPUBLISH_GAP_S`` ago, within a budget (turn_sections.Republishes). So a notebook saved mid-turn
holds the turn about as it stood (at most that long before, its plan as of the last such change),
marked as live in a running kernel; one whose kernel ends mid-turn says it was interrupted.

Each update of the output makes JupyterLab build the widget's view anew, and a click or keystrokes
landing on the old view meanwhile are lost. So nothing is republished while a permission prompt or a
form waits for the person: the output takes a request (its pending form) at once, on the thread that
shows it, before its buttons or fields are added to the widget (the frontend gets the two in that order,
both on iopub), and catches up with the rest of the turn once the person has answered. A notebook saved
while a request waits shows the turn as it stood when the request came, and the request.

Process-wide: ``_FOLLOWING``, the finished turn views that follow their conversation's branch, by
``id(turn)``: only the flag that stops each one, so the table keeps no turn, session or agent alive.
One per process because ``output_replaced`` is called with a turn from any shell or thread. An entry
is added when a finished view starts following and removed when its output is replaced or its turn
is freed (a weakref finalizer); empty at import.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from html import escape
from typing import Any

import ipywidgets as widgets

from .. import _loop
from ..errors import AcpError
from ..turn import Turn, TurnEvent
from . import render_thread
from .branches import branch_line, with_branch
from ._html import MUTED, clock, error_html, header_html, seconds, tool_call_html, usage_html, widget_bundle
from .comms import handled_in_order
from .display import Bundle, LiveDisplay, close_widget_tree
from .forms import FormPrompt, automatic_form_html
from .kernel import (card_state, kernel_call_html, kernel_call_markdown, kernel_call_text, kernel_decisions,
                     pair_kernel_calls)
from .labels import session_header_info, session_title, value_label
from .notices import tool_name_html, tool_name_text
from .permission import PermissionPrompt
from .render_thread import Throttle
from .static import LIVE_WORDS, ToolSnapshot, TurnSnapshot, attached_html, sent_label, turn_forms
from .turn_sections import THOUGHTS_STYLE, Republishes, TurnSections, stopped_clocks, ticking, tool_ticking

__all__ = ["Throttle", "TurnView", "branch_outputs_sent", "markdown_output", "output_replaced"]

DEFAULT_INTERVAL = 0.1
CLOCK_TICK = 1.0  # seconds between two renders while the turn runs (see _tick)
# How long a cell waits for its turn's static output when the render thread is held up elsewhere (a
# view that renders for ever): after that, `finished` is resolved anyway and the static form follows.
FINAL_RENDER_WAIT_S = 20.0
SHOWN_TOOL_TIME = 0.1  # a finished tool call shows how long it took from this many seconds on


def markdown_output(text: str) -> dict[str, Any]:
    """An Output widget entry that the frontend renders as Markdown."""
    return {"output_type": "display_data", "data": {"text/markdown": text, "text/plain": text}, "metadata": {}}


def _decision_words(record: Any) -> str:
    """How an automatic permission decision reads under its tool call."""
    if not record.options:
        return f"refused: {record.tool_call.get('path', 'the path')} is outside the session's directories"
    kind = next((o.get("kind") for o in record.options if o.get("optionId") == record.chosen), None)
    if record.chosen is None:
        return "cancelled"
    return "allowed" if str(kind).startswith("allow") else "rejected"


def _model_label(session: Any) -> str | None:
    option = session.model_option if session is not None else None
    return value_label(option) if option is not None else None


def _assign(target: Any, name: str, value: Any) -> None:
    """Assign only on change: each assignment is a message to the frontend."""
    if getattr(target, name) != value:
        setattr(target, name, value)


class _Completion:
    """A view's ``finished``: resolved once, with the turn or its error, by whichever comes first: the render
    thread once the turn's static output was sent, or a timer on the loop should the render thread be held
    up elsewhere. It holds the turn, not the view, and its timer is cancelled once it is resolved."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.future: concurrent.futures.Future[Turn] = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()

    def arm_backstop(self, wait: float, error: BaseException | None) -> None:
        """Loop thread: resolve in ``wait`` seconds unless the render thread does it first."""
        timer = _loop.get_loop().call_later(wait, self.resolve, error)
        self.future.add_done_callback(lambda _finished: _loop.call_soon(timer.cancel))

    def resolve(self, error: BaseException | None) -> None:
        """Any thread; the first call counts."""
        if self.future.done():
            return
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # the other one came first
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(self.turn)


def _resend_when_held_calls_end(turn: Turn, live: LiveDisplay) -> None:
    """Code the agent ran that still holds the kernel as the turn ends: once it ends, the final output is sent
    again, so the cell stops saying the kernel is held (events on the loop, sent from the render thread)."""
    held: set[str] = set()

    def on_event(event: TurnEvent) -> None:
        call = event.data
        if event.kind == "kernel" and call.id in held and call.status != "held":
            held.discard(call.id)
            render_thread.call_later(0.0, live.resend_final)
            if not held:
                unobserve()

    unobserve = turn.observe(on_event)  # first, so an end that comes meanwhile is not missed
    held.update(call.id for call in list(turn.kernel_calls) if call.status == "held")
    if not held:
        unobserve()


# id(turn) -> stop its finished view from following the branch (output_replaced); an entry goes with its turn.
_FOLLOWING: dict[int, Callable[[], None]] = {}


def _resend_on_branch_change(turn: Turn, live: LiveDisplay) -> None:
    """A finished turn's output says which branch it is on and whether that is the current one: when the
    conversation's current branch changes, its static form is sent again (events on the loop, sent from the
    render thread, in order with the turns' own last renders), until ``output_replaced``."""
    gone = threading.Event()

    def on_event(event: TurnEvent) -> None:
        if event.kind == "branch" and not gone.is_set():
            render_thread.call_later(0.0, lambda: None if gone.is_set() else live.resend_final())

    turn.observe(on_event)  # for the turn's life: its branch may change whenever a cell is run again
    # Only the flag is kept here: the table is module-wide, and anything in it that led back to the turn (its
    # observer, the view) would keep the turn, its session and its agent alive after the agent is stopped.
    _FOLLOWING[id(turn)] = gone.set
    weakref.finalize(turn, _FOLLOWING.pop, id(turn), None)


def branch_outputs_sent(timeout: float | None) -> None:
    """Wait (kernel thread) until the finished views told of a branch change just made have sent their outputs
    again: the loop emits the turns' branch events in order, each queues its send on the render thread, which
    runs in order too; so a cell that changed the branch ends with every cell's output up to date."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def after_events() -> None:
        render_thread.submit(lambda: None).add_done_callback(lambda _sent: done.set_result(None))

    _loop.call_soon(after_events)
    with contextlib.suppress(concurrent.futures.TimeoutError):  # a held-up render thread does not hold the cell
        done.result(timeout)


def output_replaced(turn: Any) -> None:
    """The output that showed ``turn`` is gone (its cell was run again; any thread): its view sends nothing more,
    as an update would name an output no longer there (or, in some frontends, overwrite the new one)."""
    forget = _FOLLOWING.pop(id(turn), None)
    if forget is not None:
        forget()


def _header_with_branch(info: Any, turn: Turn) -> str:
    """The live header: the title bar, then the turn's branch line (nothing while the conversation has one branch)."""
    return header_html(info, live=True) + branch_line(turn.branch_state)[1]


class TurnView:
    """The widgets of one ``%%acp`` cell, following ``turn``.

    ``asker``: the turn's PermissionAsker (its requests become buttons here); ``permission_note``
    says who answered when nobody was asked (e.g. "AcpMagics.permission = 'allow'"); ``form_asker``
    and ``elicitation_note`` are the same for the agent's forms (FormAsker, "AcpMagics.elicitation = 'decline'");
    ``title_hint`` stands in until the agent names the session; ``metadata()`` is put on the
    output (the notebook's record of its sessions). ``place_cell(code)`` puts a cell the agent proposed
    (kernel tools' propose_cell) below the running one; it is used only while the cell waits for the turn
    (``cell_waiting``, set by the cell machinery), and for the turn's first proposal only (JupyterLab makes
    one cell of an execute reply).
    """

    final_render_wait = FINAL_RENDER_WAIT_S  # seconds; a class attribute, so a subclass (a test) may change it

    def __init__(self, turn: Turn, *, interval: float = DEFAULT_INTERVAL, asker: Any = None,
                 permission_note: str = "", form_asker: Any = None, elicitation_note: str = "",
                 title_hint: str | None = None, metadata: Callable[[], Mapping[str, Any]] | None = None,
                 place_cell: Callable[[str], None] | None = None, filled: Any = ()) -> None:
        self.turn = turn
        self._filled = list(filled)  # {name} references of the cell and the text each put in the prompt
        self._place_cell = place_cell
        self.cell_waiting = False  # True while the %%acp cell that shows this view waits for the turn
        self._placed: set[str] = set()  # ids of proposed cells put below the running cell
        self._proposals_seen: set[str] = set()
        self.session = turn.session
        self.prompt = turn.prompt
        self.permission_note = permission_note
        self.elicitation_note = elicitation_note
        self.title_hint = title_hint
        self._metadata = metadata
        self._final_status: str | None = None  # done / cancelled / error, set when the view has finished
        self.error_message = ""
        self._lock = threading.RLock()
        self._frozen_title: tuple[str, str] | None = None  # (title, source) at the end of the turn
        self._clock_since: float | None = None  # the turn's start (epoch seconds) the live header's clock counts from
        self._model = _model_label(self.session)
        self._prompts: list[PermissionPrompt] = []
        self._forms: list[FormPrompt] = []
        # The forms in the order they came: a FormPrompt, or (text, HTML) of one a policy answered.
        self._form_items: list[FormPrompt | tuple[str, str]] = []
        self._seen: set[int] = set()  # ids of the permission and form records already noted
        self._decisions: dict[str, list[str]] = {}  # the agent's tool call id -> its permission lines
        self._kernel_decisions: dict[str, list[str]] = {}  # kernel call id -> its approval's lines (a KernelApproval)
        # call id -> [first seen, ended] (perf_counter) and when first seen (epoch seconds: its browser clock's start)
        self._tool_times: dict[str, list[float]] = {}
        self._paired: dict[str, str] = {}  # kernel call id -> the agent's tool call id: one card (kernel.py)
        self._widgets_closed = False
        self._republishes = Republishes()  # when the output is published again while the turn runs
        self._completion = _Completion(turn)
        self.finished = self._completion.future
        self._build_widgets()
        self.live = LiveDisplay(self._bundle)
        self._throttle = Throttle(self.render, interval)
        # Askers first: a form waiting in one must be on screen before its record can arrive.
        for waiting in (asker, form_asker):
            if waiting is not None:
                waiting.attach(self)
        self._unobserve = turn.observe(self._on_event)
        self._catch_up()
        self.render()  # drawn here once, before anyone can see the view; then on the render thread
        render_thread.call_later(CLOCK_TICK, self._tick)
        # Last: if the turn already ended this runs now, with every field above in place.
        turn.future.add_done_callback(self._on_done)

    def _build_widgets(self) -> None:
        # The sections that grow with the turn send only what changed (turn_sections.py).
        self.sections = TurnSections()
        self.header = self.sections.header
        self.attached = widgets.HTML(attached_html(self._attachment_labels()))
        self.latest_thought = widgets.HTML()
        self.latest_thought.add_class("acpnb-latest-thought")
        self.thoughts_text = self.sections.thoughts_text
        self.thoughts = widgets.Accordion(children=[self.thoughts_text], titles=("Thoughts",),
                                          selected_index=None, layout=widgets.Layout(display="none"))
        self.plan = self.sections.plan
        self.tools = self.sections.tools
        self.kernel = self.sections.kernel
        self.kernel.add_class("acpnb-kernel")
        self.notices = self.sections.notices  # the agent's notices and compactions, in the order they came
        self.permissions = widgets.VBox()
        self.forms = widgets.VBox()
        self.reply = self.sections.reply
        self.reply.layout.padding = "0 4px"
        self.footer = widgets.HTML()
        self.cancel_button = widgets.Button(description="Cancel turn", icon="stop",
                                            tooltip="Stop the agent's turn (sends session/cancel)",
                                            layout=widgets.Layout(width="auto"))
        self.cancel_button.add_class("acpnb-cancel")
        handled_in_order(self.cancel_button)
        self.cancel_button.on_click(lambda _button: self.cancel())
        self.error = widgets.HTML()
        self.widget = widgets.VBox(
            [self.header, self.attached, self.latest_thought, self.thoughts, self.plan, self.tools, self.kernel,
             self.notices, self.permissions, self.forms,
             self.reply,
             self.error, widgets.HBox([self.footer, self.cancel_button],
                                      layout=widgets.Layout(justify_content="space-between", align_items="center"))],
            layout=widgets.Layout(width="100%", margin="4px 0"),
        )
        self.widget.add_class("acpnb-turn")
        self.widget.add_class("acpnb-live")
        self.reply.add_class("acpnb-reply")

    # --- display -----------------------------------------------------------------
    def show(self) -> None:
        """Display the view in the running cell; it turns into its static form when the turn ends."""
        self.live.show()
        with self._lock:
            self._republishes.published()
        if self.live.final:  # the turn ended before the view was shown: it was shown static
            self._close_widgets()

    def _bundle(self, final: bool, reason: str) -> Bundle:
        with self._lock:
            forms = turn_forms(self.saved_snapshot(reason if final else None))
        metadata = with_branch(self._metadata() if self._metadata is not None else {}, self.turn)
        live = {} if final else widget_bundle(self.widget)
        return Bundle({**live, **forms}, metadata)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self._bundle(self.finished.done(), "")
        return bundle.data, bundle.metadata

    def snapshot(self) -> TurnSnapshot:
        """What the view shows now, as plain data (for the saved forms)."""
        with self._lock:
            turn = self.turn
            running = self._is_running()
            pending = [(p.pending_text(), p.static_html()) for p in self._prompts if not p.future.done()]
            merged = pair_kernel_calls(turn.tool_calls, list(turn.kernel_calls), self._paired)
            tools = [ToolSnapshot(str(c.title or c.id), str(c.kind or "other"), str(c.status or "pending"),
                                  stopped_clocks(self._tool_html(c, merged.get(c.id))), tool_name_text(c))
                     for c in turn.tool_calls]
            forms = [(item.plain_text(), item.static_html()) if isinstance(item, FormPrompt) else item
                     for item in self._form_items]
            paired = set(self._paired)  # their HTML is their tool call's card; their text stays with the others
            kernel = [(text, md, "" if call.id in paired else html)
                      for call in list(turn.kernel_calls) for text, md, html in [self._kernel_forms(call)]]
            return TurnSnapshot(header=self._header_info(), text=turn.text, thoughts=turn.thoughts,
                                plan=list(turn.plan), tools=tools, kernel=kernel, notes=self._unmatched_decisions(),
                                pending=pending,
                                forms=forms, error=self.error_message, usage=turn.usage,
                                stop_reason=None if running else turn.stop_reason,
                                attachments=self._attachment_labels(), notices=list(turn.notices),
                                compactions=[replace(c) for c in list(turn.compactions)],
                                branch=branch_line(turn.branch_state))

    def _attachment_labels(self) -> list[str]:
        """What the prompt carried, as sent: each attachment and each {name} filled in, with its text (capped)."""
        return [*(sent_label(item.label, _first_text(item.blocks)) for item in self.turn.attachments),
                *(sent_label(f"{{{reference}}}", text) for reference, text in self._filled)]

    def saved_snapshot(self, ended: str | None = None) -> TurnSnapshot:
        """The snapshot the output's static forms show. A running turn says it is live in a running kernel
        (a notebook saved now reopens with this); ``ended``: the output is made final while the turn still
        runs (the kernel is going away): it says the turn was interrupted, and why."""
        with self._lock:
            snapshot = self.snapshot()
            if not self._is_running():
                return snapshot
            if ended is None:
                return replace(snapshot, header=replace(snapshot.header, extra=LIVE_WORDS))
            unanswered = [f"Not answered: {text.split(' (waiting')[0]}" for text, _html in snapshot.pending]
            return replace(snapshot, header=replace(snapshot.header, status="interrupted", extra=""), pending=(),
                           notes=(*snapshot.notes, *unanswered, f"interrupted: {ended or 'the view was closed'}"))

    def _structure(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """What the saved form shows of the turn's structure (under the lock): (what it must show at once: the
        requests for the person and their answers, an error, the branch; what may wait, see REPUBLISH_GAP_S)."""
        turn = self.turn
        urgent = (tuple(p.future.done() for p in self._prompts), tuple(f.waiting for f in self._forms),
                  len(self._form_items), self.error_message, branch_line(turn.branch_state)[0])
        return urgent, (self.status, tuple((c.id, c.status) for c in turn.tool_calls),
                        tuple((c.id, c.status) for c in list(turn.kernel_calls)),
                        # The plan's rows, not their statuses or words: an agent may update its plan thousands of
                        # times, and each republish carries the whole turn; the live plan gets each change as a
                        # delta (turn_sections).
                        len(turn.plan), len(turn.notices), tuple((c.id, c.status) for c in list(turn.compactions)))

    def _republish_due(self) -> bool:
        """Whether the output should be published again: the turn runs, no request waits for the person (see the
        module docstring), and its structure changed as ``Republishes`` (turn_sections.py) says; under the lock."""
        if not self._is_running() or self.status == "waiting":
            return False
        return self._republishes.due(self._structure(), self.live.sent_bytes, self.sections.sent_bytes)

    def _publish_request(self) -> None:
        """A request for the person's input is about to be shown: the output takes it now, while nobody can act
        on it yet (loop thread; the caller holds no lock, as publishing takes the view's lock)."""
        with self._lock:
            if not self._is_running():
                return
            self._republishes.published(self._structure())
        self.live.publish_now()

    # --- following the turn (loop thread) -----------------------------------------
    def _on_event(self, event: TurnEvent) -> None:
        if event.kind == "status":
            with self._lock:
                self._model = _model_label(self.session)  # the model the prompt is sent with
        elif event.kind == "update":
            self._note_tool_progress(event.data)
        elif event.kind == "permission":
            self._note_permission(event.data)
        elif event.kind == "elicitation":
            self._note_elicitation(event.data)
        elif event.kind == "kernel":
            self._note_kernel_call(event.data)
        if event.kind != "done":
            self._throttle.request()

    def _catch_up(self) -> None:
        """Note what the turn recorded before this view subscribed: a policy may answer a permission
        request or a form at once, before the cell's view exists (kernel thread; the loop may be
        noting newer records meanwhile, hence ``_first_sight``)."""
        for record in list(self.turn.permissions):
            self._note_permission(record)
        for record in list(self.turn.elicitations):
            self._note_elicitation(record)
        self._throttle.request()

    def _first_sight(self, record: Any) -> bool:
        """True the first time a record is seen (the catch-up and an event may both bring it); under the lock."""
        if id(record) in self._seen:
            return False
        self._seen.add(id(record))
        return True

    def _note_tool_progress(self, update: Mapping[str, Any]) -> None:
        if update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return
        now = time.perf_counter()
        with self._lock:
            times = self._tool_times.setdefault(str(update.get("toolCallId")), _first_seen())
            if update.get("status") in ("completed", "failed") and not times[1]:
                times[1] = now

    def _note_permission(self, record: Any) -> None:
        call_id = str(record.tool_call.get("toolCallId") or "")
        with self._lock:
            if not self._first_sight(record):
                return
            if any(p.call_id == call_id and p.future.done() for p in self._prompts) and call_id:
                return  # answered by a prompt in this view, which says so itself
            words = _decision_words(record)
            if record.options and self.permission_note and words in ("allowed", "rejected"):
                words = f"{words} automatically ({self.permission_note})"
            self._decisions.setdefault(call_id, []).append(f"permission: {words}")

    def _note_elicitation(self, record: Any) -> None:
        """A form the client answered: it goes to the form shown for it, or, when a policy answered
        without asking, becomes a line saying so."""
        with self._lock:
            if not self._first_sight(record):
                return
            unmatched = [f for f in self._forms if f.record is None]
            # The client records the very schema object it gave the policy; equal content is the fallback.
            form = next((f for f in unmatched if f.request.schema is record.schema), None) or next(
                (f for f in unmatched if not f.waiting and f.message == record.message
                 and f.request.schema == record.schema), None)
            if form is None:
                text, html = automatic_form_html(record, self.elicitation_note)
                self._form_items.append((text, html))
                line = widgets.HTML(html)
                self.forms.children = (*self.forms.children, line)
        if form is not None:
            form.note_record(record)

    def _note_kernel_call(self, call: Any) -> None:
        """A cell the agent proposed goes below the running cell, once, while that cell still runs."""
        if call.tool != "propose_cell" or not call.code:
            return
        with self._lock:
            if call.id in self._proposals_seen:
                return
            self._proposals_seen.add(call.id)
            first = len(self._proposals_seen) == 1
            place = self._place_cell if first and self.cell_waiting and self._is_running() else None
        if place is None:
            return
        try:
            place(call.code)
        except Exception:  # noqa: BLE001 - the proposal still shows in the view, with its copy note
            return
        with self._lock:
            self._placed.add(call.id)

    def _kernel_forms(self, call: Any) -> tuple[str, str, str]:
        """(text, Markdown, HTML) of one kernel call; under the lock."""
        decisions = kernel_decisions(call, self._kernel_decisions, self.permission_note)
        below = call.id in self._placed
        return (kernel_call_text(call, decisions, below=below), kernel_call_markdown(call, decisions, below=below),
                kernel_call_html(call, decisions, below=below))

    def _tick(self) -> None:
        """Render once a second until the turn ends (render thread), so a change of the turn's structure held back
        by ``REPUBLISH_GAP_S`` is published in a silent stretch too. The running clocks (the header's, a tool
        call's) tick in the browser and cost nothing here; a render that finds nothing changed sends nothing."""
        if not self._is_running():
            return
        self.render()
        render_thread.call_later(CLOCK_TICK, self._tick)

    def _on_done(self, future: concurrent.futures.Future[Turn]) -> None:
        """The turn ended: on the loop, inside the connection's handling of the prompt's answer (or at once, on
        the constructing thread, for a turn that had ended). The last render, the static form and the closing
        of the widgets go to the render thread, so a slow view never holds up the connection's frames."""
        error = future.exception() if not future.cancelled() else None
        render_thread.call_later(0.0, lambda: self._end(error))
        # Should the render thread be held up elsewhere, the cell still ends (see FINAL_RENDER_WAIT_S).
        _loop.call_soon(self._completion.arm_backstop, self.final_render_wait, error)

    def _end(self, error: BaseException | None) -> None:
        """Render thread: the turn's last render and static output, then ``finished``."""
        try:
            self._finish(error)
        finally:
            # Resolved after the static form was sent: a cell waiting on `finished` ends only once its
            # output is final (headless runners record only messages sent while the cell runs). And
            # always resolved, so a failing view never leaves a cell waiting forever.
            self._completion.resolve(error)

    def _finish(self, error: BaseException | None) -> None:
        with self._lock:
            self._unobserve()
            if error is not None:
                self._final_status = "error"
                self.error_message = _error_text(error)
            else:
                self._final_status = "cancelled" if self.turn.stop_reason == "cancelled" else "done"
            self._frozen_title = session_title(self.session, self.title_hint)
            prompts = list(self._prompts)
            forms = list(self._forms)
        for prompt in prompts:
            prompt.choose(None)  # nobody can answer a prompt of a finished turn
        for form in forms:
            form.withdraw()  # nor fill in its form: the inputs and buttons are disabled
        if not self.live.shown:
            self.render()  # the static form below is drawn from what a render records (tool call end times)
        self.live.finalize()
        # Read again after finalizing: the display's show and finalize take turns on its send lock, so of this
        # check and show()'s check of `final` at least one sees the other. (Read only before, a show made
        # in between left the widgets open for good.)
        if self.live.shown:
            # The output is static now; the widgets, closed, are brought up to date without a message.
            self._close_widgets()
            self.render()
            _resend_when_held_calls_end(self.turn, self.live)
        _resend_on_branch_change(self.turn, self.live)

    def _close_widgets(self) -> None:
        """The output is static now: free the widget models (the kernel and a saved notebook keep none).
        Called by whichever of show() and the end of the turn comes second; runs once."""
        with self._lock:
            if self._widgets_closed:
                return
            self._widgets_closed = True
        close_widget_tree(self.widget)  # the prompts are children of self.permissions

    # --- actions (kernel thread: clicks; loop thread: the asker) --------------------
    def cancel(self) -> None:
        """Ask the agent to stop (the Cancel button); returns at once."""
        with self._lock:
            if self.finished.done():
                return
            self.cancel_button.disabled = True
            self.cancel_button.description = "Cancelling..."
        _loop.submit(self.session.acancel())

    def add_prompt(self, prompt: PermissionPrompt) -> None:
        """Show a permission request as buttons (called by the turn's PermissionAsker)."""
        with self._lock:
            self._prompts.append(prompt)
        self._publish_request()
        with self._lock:
            self.permissions.children = (*self.permissions.children, prompt.widget)

        def settled(_future: concurrent.futures.Future[str | None]) -> None:
            # A kernel approval's answer goes to its kernel call's card; a permission's to the agent's tool call.
            kernel = prompt.kernel_call
            decisions, key = ((self._kernel_decisions, kernel.id) if kernel is not None
                              else (self._decisions, prompt.call_id))
            with self._lock:
                decisions.setdefault(key, []).append(f"permission: {prompt.decision}")
            self._throttle.request()

        prompt.future.add_done_callback(settled)
        self._throttle.request()

    def add_form(self, form: FormPrompt) -> None:
        """Show one of the agent's forms (called by the turn's FormAsker)."""
        with self._lock:
            self._forms.append(form)
            self._form_items.append(form)
        self._publish_request()
        with self._lock:
            self.forms.children = (*self.forms.children, form.widget)
        form.future.add_done_callback(lambda _future: self._throttle.request())
        self._throttle.request()

    # --- rendering -------------------------------------------------------------------
    @property
    def status(self) -> str:
        """queued, working, waiting (for a permission answer), then done, cancelled or error.

        Read from the turn each time rather than kept in step with its events: the view subscribes
        after the turn was queued, and may have missed the moment it was sent."""
        with self._lock:
            if self._final_status is not None:
                return self._final_status
            if any(not p.future.done() for p in self._prompts) or any(f.waiting for f in self._forms):
                return "waiting"
            return "queued" if self.turn.status == "queued" else "working"

    def _is_running(self) -> bool:
        return self._final_status is None

    def _header_info(self, ticking: bool = False) -> Any:
        """What the header shows; ``ticking``: the live header, whose running clock the browser redraws (the text
        stays put here, so the header does not change each second; see ``_live_header``)."""
        turn = self.turn
        if self.status in ("working", "waiting"):
            extra = clock(0 if ticking else turn.elapsed_s)
        elif turn.duration_s is not None and self.status != "queued":
            extra = seconds(turn.duration_s)
        else:
            extra = ""
        title, source = self._frozen_title or session_title(self.session, self.title_hint)
        return session_header_info(self.session, title=title, title_source=source, status=self.status, detail="",
                                   model=self._model, extra=extra)

    def _tool_html(self, call: Any, kernel: Any = None) -> str:
        """The agent's tool call as a card; with ``kernel`` (the kernel's record of the same call) one merged card.
        A running call's clock ticks in the browser (``tool_ticking``); the saved forms stop it (``stopped_clocks``)."""
        # A call seen first here (its update came before this view subscribed) starts its clock now.
        times = self._tool_times.setdefault(call.id, _first_seen())
        timing, since = _tool_timing(times, call.status, self._is_running())
        decisions = tuple(self._decisions.get(call.id, ()))
        if kernel is not None:
            decisions = (*decisions, *kernel_decisions(kernel, self._kernel_decisions, self.permission_note))
            below = kernel.id in self._placed
            return self.sections.card(call.id, (call, len(call.updates), call.status, decisions, card_state(kernel),
                                                below), lambda: kernel_call_html(kernel, decisions, below=below,
                                                                                 agent=call))
        # Made again only when the call, its decisions or its time changed (a render does not rebuild every card).
        def make() -> str:
            card = tool_call_html(call, decisions, timing=timing, name_html=tool_name_html(call))
            return card if since is None else tool_ticking(card, since)

        return self.sections.card(call.id, (call, len(call.updates), call.status, decisions, timing), make)

    def _unmatched_decisions(self) -> list[str]:
        calls = self.turn.tool_calls_by_id
        return [d for call_id, ds in self._decisions.items() if call_id not in calls for d in ds]

    def render(self) -> None:
        """Bring every widget up to date with the turn (any thread; cheap when nothing changed: each section sends
        only what changed, see turn_sections.py)."""
        with self._lock:
            turn = self.turn
            running = self._is_running()
            thoughts = turn.thoughts
            latest = _last_line(thoughts) if running else ""
            _assign(self.latest_thought, "value",
                      f'<div style="color:{MUTED};padding:2px 4px"><span style="font-weight:600">Thinking:</span> '
                      f'<i>{escape(latest)}</i></div>' if latest else "")
            if thoughts:
                _assign(self.thoughts.layout, "display", "")
            merged = pair_kernel_calls(turn.tool_calls, list(turn.kernel_calls), self._paired)
            header = _header_with_branch(self._header_info(ticking=True), turn)
            if self.status in ("working", "waiting"):  # the header's clock ticks in the browser from the start
                if self._clock_since is None:
                    self._clock_since = turn.wall_started_at or time.time() - turn.elapsed_s
                header = ticking(header, self._clock_since)
            self.sections.draw(header=header, thoughts=thoughts, plan=turn.plan,
                               cards=[(call.id, self._tool_html(call, merged.get(call.id))) for call in turn.tool_calls],
                               notes=self._unmatched_decisions(),
                               kernel=[(call.id, self._kernel_forms(call)[2]) for call in list(turn.kernel_calls)
                                       if call.id not in self._paired],
                               text=turn.text, notices=list(turn.notices), compactions=list(turn.compactions),
                               send=not self._widgets_closed, hold=running)
            _assign(self.error, "value", error_html(self.error_message))
            # The context meter follows usage_update and the turn's latest compaction while the turn runs; the
            # stop reason comes at the end.
            compactions = turn.compactions
            _assign(self.footer, "value", usage_html(turn.usage, stop_reason=None if running else turn.stop_reason,
                                                     compaction=compactions[-1] if compactions else None))
            _assign(self.cancel_button.layout, "display", "" if running else "none")
            republish = self._republish_due()
        if republish:
            self.live.refresh()  # the saved form follows the turn's structure (see the module docstring)

    @property
    def renders(self) -> int:
        """How many coalesced renders ran (for tests and benchmarks)."""
        return self._throttle.renders


def _first_seen() -> list[float]:
    """A tool call's times as it is first seen: [now (perf_counter), not ended, now (epoch seconds)]."""
    return [time.perf_counter(), 0.0, time.time()]


def _tool_timing(times: list[float], status: Any, running: bool) -> tuple[str, float | None]:
    """What a tool card's time chip shows, from its ``[first seen, ended, first seen in epoch seconds]``; for a running
    call also the time its clock counts from in the browser."""
    start, end, since = times
    if not end and status not in ("completed", "failed") and running:
        return clock(0), since
    if end and end - start >= SHOWN_TOOL_TIME:
        return f"took {seconds(end - start)}", None
    return "", None


def _first_text(blocks: Any) -> str:
    """The text an attachment sent, without the line that introduces it or its fences (an image sends none)."""
    texts = [str((b.get("resource") or {}).get("text") or "") if b.get("type") == "resource" else str(b.get("text") or "")
             for b in blocks or () if isinstance(b, Mapping) and b.get("type") in ("text", "resource")]
    lines = "\n".join(texts).splitlines()
    return "\n".join(line for line in lines if not line.startswith(("Attached `", "```")))


def _last_line(text: str) -> str:
    """The last line of ``text`` with something in it, stripped (read from the end: the text may be long)."""
    end = len(text)
    while end > 0:
        start = text.rfind("\n", 0, end - 1) + 1
        line = text[start:end].strip()
        if line:
            return line
        end = start - 1 if start > 0 else 0
    return ""


def _error_text(error: BaseException) -> str:
    """A failed turn's error as the view shows it: the only place a %%acp cell shows it in full (the cell's own
    error output points here), so with its hint, in magic syntax."""
    if not isinstance(error, AcpError):
        return f"{type(error).__name__}: {error}"
    hint = error.hint_for("magic")
    return f"{type(error).__name__}: {error.message}" + (f"\nHint: {hint}" if hint else "")
