"""run_code: the agent's code run in the user's namespace on the kernel thread, as a cell would be.

``run_code_here`` runs on the kernel thread: the code is parsed, refused if it spells out a call that ends
the process, then executed in the namespace with the ways to end the kernel refused at run time
(guards.py) and as the stop's region (``_loop.run_region``: a stop lands in the agent's code, also when
it swallows interrupts, never in our bookkeeping); printed output, display() data, the last expression's
value (formatted by IPython where it runs) and new matplotlib figures are captured in order into a
``Capture``; an exception becomes its traceback. ``run_code_tool`` runs on the background loop: it hands
the work to the kernel thread with the tool's timeout and turns a timeout, a cancellation or the user's
interrupt into an answer that keeps the output so far. It never says "stopped" while the code runs: code
that outlives its stop is reported as still running and holding the kernel (a ``run_code_held`` event),
and its real end follows as ``run_code_finished`` whenever it comes.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import sys
import time
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import _loop
from .answers import IMAGE_LIMIT, TEXT_LIMIT, Answer, busy_message, namespace_redactor
from .guards import ExitRefused, refusing
from .namespace import current_shell
from .pictures import figure_png, image_block
from .policy import KernelToolEvent

__all__ = ["Capture", "exit_refusal", "held_text", "refusal_text", "run_code_here", "run_code_tool", "stopped_text"]

FILENAME = "<agent code>"
_EXIT_CALLS = {("exit",), ("quit",), ("sys", "exit"), ("os", "_exit"), ("os", "abort"), ("posix", "_exit"),
               ("posix", "abort")}
WHAT = "code the agent ran (run_code)"  # how the pump names this work when it holds the kernel


def refusal_text(what: str) -> str:
    """The answer to code that tried to end the kernel, naming what was refused."""
    return (f"refused: run_code never ends the kernel: {what} was refused and the kernel is still running; "
            "the user restarts their kernel themselves")


def stopped_text(reason: str | None, timeout: float) -> str:
    """Why code that ended when stopped was stopped."""
    return {"timeout": f"stopped: the code ran over the {timeout:g} s limit",
            "cancelled": "stopped: the tool call was cancelled"}.get(reason or "",
                                                                    "interrupted: the user interrupted the kernel")


def held_text(reason: str | None, timeout: float) -> str:
    """The answer for code that did not end when stopped: it still runs, and holds the kernel."""
    why = {"timeout": f"it ran over the {timeout:g} s limit", "cancelled": "the tool call was cancelled"}.get(
        reason or "", "the user interrupted the kernel")
    return (f"the code is still running: it ignores interrupts (it was stopped because {why}, and did not end "
            f"within {_loop.INTERRUPT_GRACE_S:g} s; or it is stuck in a call that does not return on an interrupt). "
            "It holds the kernel until it ends: nothing else runs there and the kernel tools refuse meanwhile; "
            "the user can interrupt the kernel again, or restart it (its variables are then lost)")


class Capture:
    """What the code put out, in order: text blocks and images (kernel thread writes, the loop reads
    once the work is over; ``blocks`` is only appended to)."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        # Masks the namespace's secrets; built on the kernel thread when the code starts.
        self.redact: Callable[[str], str] = _unmasked

    def text(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            if self.blocks and self.blocks[-1]["type"] == "text":
                self.blocks[-1] = {"type": "text", "text": self.blocks[-1]["text"] + text}
            else:
                self.blocks.append({"type": "text", "text": text})

    def image(self, png: bytes) -> None:
        with self._lock:
            if len(png) > IMAGE_LIMIT:
                self.blocks.append({"type": "text", "text": f"[an image of {len(png):,} bytes was left out: "
                                                            f"over the {IMAGE_LIMIT:,}-byte limit]\n"})
            else:
                self.blocks.append(image_block(png))

    def bundle(self, data: Mapping[str, Any]) -> None:
        """A display/result mime bundle: its PNG if it has one, and its plain text."""
        png = data.get("image/png")
        if isinstance(png, str):
            png = base64.b64decode(png)
        if isinstance(png, (bytes, bytearray)):
            self.image(bytes(png))
        plain = data.get("text/plain")
        if isinstance(plain, str) and not (png and plain.startswith("<Figure")):
            self.text(plain if plain.endswith("\n") else plain + "\n")

    def answer(self, *, error: str | None = None) -> Answer:
        """The blocks so far, text masked and capped, with ``error`` appended (then it is a tool error)."""
        with self._lock:
            blocks = list(self.blocks)
        content, budget, redact = [], TEXT_LIMIT, self.redact
        for block in blocks:
            if block["type"] != "text":
                content.append(block)
                continue
            text = redact(block["text"])
            if len(text) > budget:
                text = text[:budget] + f"\n[cut: the output went over {TEXT_LIMIT:,} characters]\n"
            budget = max(0, budget - len(text))
            if text:
                content.append({"type": "text", "text": text})
        if error is not None:
            content.append({"type": "text", "text": redact(error)})
        if not content:
            content.append({"type": "text", "text": "(no output)"})
        return Answer(content, is_error=error is not None)


def _unmasked(text: str) -> str:
    return text


class _Stream:
    """sys.stdout / sys.stderr while the code runs: the kernel thread's writes are captured, other
    threads' (a user's own thread printing meanwhile) go where they went before."""

    def __init__(self, capture: Capture, before: Any) -> None:
        self._capture = capture
        self._before = before
        self._thread = threading.current_thread()

    def write(self, text: str) -> int:
        if threading.current_thread() is self._thread:
            self._capture.text(str(text))
            return len(text)
        return self._before.write(text)

    def flush(self) -> None:
        if threading.current_thread() is not self._thread:
            self._before.flush()

    def isatty(self) -> bool:
        return False


def exit_refusal(tree: ast.AST) -> str | None:
    """The call that ends the process the code spells out (``sys.exit()``, ``os._exit(0)``...), or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target = node.func
            if isinstance(target, ast.Name) and (target.id,) in _EXIT_CALLS:
                return f"{target.id}()"
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and (target.value.id, target.attr) in _EXIT_CALLS):
                return f"{target.value.id}.{target.attr}()"
    return None


@contextlib.contextmanager
def _captured(capture: Capture, shell: Any) -> Iterator[None]:
    """Output and displays routed away from the user's cell while the code runs."""
    saved = sys.stdout, sys.stderr
    publisher = getattr(shell, "display_pub", None)
    sys.stdout, sys.stderr = _Stream(capture, sys.stdout), _Stream(capture, sys.stderr)  # type: ignore[assignment]
    if publisher is not None:
        shell.display_pub = _publisher(capture, shell)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        if publisher is not None:
            shell.display_pub = publisher


def _publisher(capture: Capture, shell: Any) -> Any:
    from IPython.core.displaypub import CapturingDisplayPublisher  # IPython: only inside a kernel's shell

    class Publisher(CapturingDisplayPublisher):
        def publish(self, data: Any, metadata: Any = None, source: Any = None, **_kwargs: Any) -> None:
            capture.bundle(data or {})

    return Publisher(shell=shell)


def _figures() -> set[int]:
    pyplot = sys.modules.get("matplotlib.pyplot")
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def _take_new_figures(before: set[int], capture: Capture) -> None:
    """Figures the code made and left open come back as images and are closed, as a cell's would be."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in sorted(set(pyplot.get_fignums()) - before):
        figure = pyplot.figure(number)
        png = figure_png(figure)
        if png is not None:
            capture.image(png)
        pyplot.close(figure)


def _traceback(error: BaseException) -> str:
    """The traceback from the agent's code down (our own frames left out)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != FILENAME:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def run_code_here(code: str, namespace: Any, capture: Capture) -> Answer:
    """Run ``code`` in ``namespace`` (kernel thread). KeyboardInterrupt (a stop) passes through to the pump."""
    shell = current_shell()
    capture.redact = namespace_redactor(namespace).text
    try:
        tree = ast.parse(code, FILENAME)
    except SyntaxError as error:
        note = " (run_code does not take top-level await)" if "await" in str(error.msg) else ""
        return capture.answer(error="".join(traceback.format_exception_only(type(error), error)) + note)
    spelled = exit_refusal(tree)
    if spelled is not None:
        return Answer.error(refusal_text(spelled))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    before = _figures()
    error: str | None = None
    refused: list[str] = []
    try:
        with _captured(capture, shell), refusing(shell) as refused:
            _loop.run_region(lambda: _execute(tree, last, namespace, shell, capture))
    except SystemExit:
        error = refusal_text("SystemExit (sys.exit, exit)")
    except ExitRefused as exc:
        error = refusal_text(exc.what)
    except Exception as exc:  # noqa: BLE001 - the agent's error is its answer
        error = _traceback(exc)
    finally:
        _take_new_figures(before, capture)
    if error is None and refused:  # the code caught the refusal and went on
        error = refusal_text(refused[0]) + " (the code caught the refusal and went on)"
    return capture.answer(error=error)


def _execute(tree: ast.Module, last: ast.Expr | None, namespace: Any, shell: Any, capture: Capture) -> None:
    """The agent's code proper: its statements, then its last expression's value shown (the stop's region)."""
    exec(compile(tree, FILENAME, "exec"), namespace)  # noqa: S102 - running the agent's code is the tool
    if last is not None:
        value = eval(compile(ast.Expression(last.value), FILENAME, "eval"), namespace)  # noqa: S307
        if value is not None:
            _show_result(value, shell, capture)


def _show_result(value: Any, shell: Any, capture: Capture) -> None:
    if shell is not None:
        bundle, _metadata = shell.display_formatter.format(value)
        capture.bundle(bundle)
    else:
        capture.text(repr(value) + "\n")


async def run_code_tool(code: str, work: Callable[[Capture], Answer], timeout: float,
                        emit: Callable[[KernelToolEvent], None]) -> Answer:
    """Hand ``work`` to the kernel thread under ``timeout``; the answer, with events around it (loop).

    ``run_code_finished`` is emitted when the code has ended (or never ran); code that outlives its stop gets
    ``run_code_held`` first, and ``run_code_finished`` when it ends at last."""
    capture = Capture()
    emit(KernelToolEvent("run_code_started", "run_code", {"code": code}, code=code))
    job = _loop.KernelWork(lambda: work(capture), what=WHAT, in_region=True)
    answer: Answer | None = None
    try:
        answer = await job.run(wait_timeout=timeout, run_timeout=timeout)
    except _loop.KernelBusy:
        answer = Answer.error(busy_message(timeout))
    except _loop.KernelHeld as exc:
        answer = Answer.error(str(exc))
    except _loop.KernelWorkHeld as exc:
        answer = capture.answer(error=held_text(exc.reason, timeout))
    except _loop.KernelWorkInterrupted as exc:
        answer = capture.answer(error=stopped_text(exc.reason, timeout))
    finally:
        if job.running:  # held, or cancelled while it runs: its end is reported when it comes
            _follow(job, code, capture, timeout, emit)
        else:
            _finished(emit, code, answer or capture.answer(error="stopped: the tool call was cancelled"))
    return answer


def _finished(emit: Callable[[KernelToolEvent], None], code: str, answer: Answer) -> None:
    # An error answer ends with its error text (Capture.answer): shown once, as the error.
    failed = answer.is_error and bool(answer.content) and answer.content[-1].get("type") == "text"
    outputs = answer.content[:-1] if failed else answer.content
    emit(KernelToolEvent("run_code_finished", "run_code", {"code": code}, code=code, outputs=outputs,
                         error=answer.content[-1]["text"] if failed else None))


def _follow(job: _loop.KernelWork, code: str, capture: Capture, timeout: float,
            emit: Callable[[KernelToolEvent], None]) -> None:
    """Report work that still runs after its answer: held when its stop's grace runs out, finished when it ends."""
    held_at: list[float] = []

    def held(_future: Any) -> None:
        held_at.append(time.monotonic())
        answer = capture.answer(error=held_text(job.stop.reason, timeout))
        emit(KernelToolEvent("run_code_held", "run_code", {"code": code}, code=code, outputs=answer.content[:-1],
                             error=answer.content[-1]["text"]))

    def ended(future: Any) -> None:
        error = None if future.cancelled() else future.exception()
        if error is None and not future.cancelled():
            answer = future.result()
        elif isinstance(error, _loop.KernelWorkInterrupted):
            answer = capture.answer(error=stopped_text(error.reason, timeout))
        else:
            answer = capture.answer(error=f"failed: {type(error).__name__}: {error}")
        if held_at:
            note = (f"\n(it held the kernel {time.monotonic() - held_at[0]:.0f} s after it was reported still "
                    "running; it has ended and the kernel is free again)")
            if answer.is_error:
                answer = Answer([*answer.content[:-1], {"type": "text", "text": answer.content[-1]["text"] + note}],
                                is_error=True)
            else:
                answer = Answer([*answer.content, {"type": "text", "text": note.strip()}])
        _finished(emit, code, answer)

    if job.held.done():
        held(job.held)
    else:
        job.held.add_done_callback(held)
    job.done.add_done_callback(ended)
