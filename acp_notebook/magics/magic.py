"""AcpMagics: the ``%acp`` / ``%%acp`` magics and their settings; the extension's load and unload hooks.

Thin on purpose: a line is parsed by the grammar (grammar.py), carried out by the Runner
(commands.py), and a ``%%acp`` cell waits as cells.py says. What lives here is what IPython
needs: the magic function, the ``%config AcpMagics.*`` traits, the input transformer, and the
hooks that keep saved outputs true (``post_run_cell`` publishes stale outputs while the cell
is still the kernel's current request; at interpreter exit every output becomes static).

Each shell the extension is loaded in has its own AcpMagics, and so its own agents and current
session: ``acpnb.current()`` asks the running shell's (current_scope.py's CurrentSession, told how to find
it with ``follow_shells`` at load).

Process-wide: ``_registered``, the AcpMagics of each shell by ``id(shell)``. One per process because
IPython's extension hooks and the exit hook are process-wide too: they get a shell (or none) and find
its magics here. An entry is added when the extension loads in a shell and removed when it unloads;
the dict lives as long as the interpreter (its exit hook is registered with the first entry and
unregistered with the last). Changed only on the kernel thread.

Threads: IPython calls everything here on the kernel thread; the exit hook runs on the main
thread at interpreter exit, while the background loop still runs (its own exit hook was
registered earlier, so it runs later).
"""

from __future__ import annotations

import atexit
import contextlib
import difflib
from typing import TYPE_CHECKING, Any

from IPython import get_ipython
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import CaselessStrEnum, Dict, Float, TraitError, Unicode, Union, observe, validate
from traitlets.config import Configurable

from .. import _loop
from ..current_scope import process_current
from ..errors import AcpError
from ..kernel_tools.policy import POLICIES, parse_policy
from ..widgets.display import finalize_all, flush_all
from . import cells
from .commands import Runner
from .grammar import CellPrompt, help_text, parse_cell_line, parse_line

if TYPE_CHECKING:
    from .registry import NotebookAgents

__all__ = ["AcpMagics", "acp_cell", "load_ipython_extension", "magics_for", "magics_for_current_shell",
           "unload_ipython_extension"]


def _documented(doc: str) -> Any:
    """Give the magic its help (what ``%acp?`` prints) before IPython wraps it."""

    def apply(function: Any) -> Any:
        function.__doc__ = doc
        return function

    return apply


def _choice_error(name: str | None, value: Any, choices: list[str], extra: str = "") -> TraitError:
    """A refused setting in our words: the choices, and the closest one as a line to type."""
    close = difflib.get_close_matches(str(value).strip().lower(), choices, n=1, cutoff=0.5)
    example = close[0] if close else choices[0]
    return TraitError(f"AcpMagics.{name}: {value!r} is not one of {', '.join(repr(c) for c in choices)}{extra}"
                      + (f"; did you mean {example!r}?" if close else "")
                      + f" (e.g. %config AcpMagics.{name} = {example!r})")


class Choice(CaselessStrEnum):
    """A word among a few (any case), refused in our words with the closest choice, not traitlets'."""

    def error(self, obj: Any, value: Any, error: Exception | None = None, info: str | None = None) -> Any:
        raise _choice_error(self.name, value, [str(v) for v in self.values or ()])


class ChoiceOrDict(Union):
    """A Choice or a dict (AcpMagics.elicitation), refused in our words."""

    def error(self, obj: Any, value: Any, error: Exception | None = None, info: str | None = None) -> Any:
        words = [str(v) for t in self.trait_types for v in getattr(t, "values", None) or ()]
        raise _choice_error(self.name, value, words, " or a dict of answers")


@magics_class
class AcpMagics(Magics, Configurable):
    """The ``%acp`` / ``%%acp`` magics; configure with ``%config AcpMagics.<option> = value``."""

    default_agent = Unicode("demo", help="The agent `%acp start` starts when no NAME is given.").tag(config=True)
    permission = Choice(
        ["ask", "allow", "deny"], default_value="ask",
        help="Answer to the agent's permission requests in %%acp cells: 'ask' shows buttons and waits for a "
             "click; 'allow' or 'deny' answer at once (for unattended runs such as nbclient or CI).",
    ).tag(config=True)
    permission_timeout = Float(
        0.0, min=0.0,
        help="With permission='ask': seconds to wait for a click before rejecting (0 waits until the turn is "
             "cancelled).",
    ).tag(config=True)
    elicitation = ChoiceOrDict(
        [CaselessStrEnum(["ask", "decline", "cancel"]), Dict()], default_value="ask",
        help="Answer to the agent's forms (elicitation) in %%acp cells: 'ask' shows the form and waits for Submit, "
             "Decline or Cancel; 'decline' or 'cancel' answer at once, and a dict of answers (checked against each "
             "form; a form they do not fit is declined) fills every form, for unattended runs (nbclient, CI).",
    ).tag(config=True)
    elicitation_timeout = Float(
        0.0, min=0.0,
        help="With elicitation='ask': seconds to wait for an answer before declining (0 waits until the turn is "
             "cancelled).",
    ).tag(config=True)
    wait = Choice(
        ["auto", "always", "never"], default_value="auto",
        help="Whether a %%acp cell waits for the turn to end. 'auto' waits where the kernel keeps widgets "
             "clickable meanwhile (ipykernel >= 7.4) or has no widgets (terminal), else returns at once and "
             "the reply keeps streaming into the cell.",
    ).tag(config=True)
    stream_interval = Float(
        0.1, min=0.0, help="Seconds between two renders of a streaming reply: chunks arriving faster are coalesced.",
    ).tag(config=True)
    timeout = Float(60.0, help="Seconds to wait for an agent to start and for each request.").tag(config=True)
    turn_timeout = Float(0.0, min=0.0, help="Seconds a %%acp turn may take before it is cancelled (0: no limit).").tag(
        config=True)
    cwd = Unicode("", help="Working directory for agents and sessions (default: the kernel's).").tag(config=True)
    switch_interval = Float(
        _loop.switch_interval.target, min=0.0,
        help="The interpreter's thread switch interval (seconds) while a turn streams, so that cells run "
             "meanwhile answer quickly (Python's default is 0.005; 0: leave it as it is).",
    ).tag(config=True)

    kernel_tools = Unicode(
        "ask", help="What agents may do in this kernel through the MCP server 'kernel' offered to their sessions: "
                    "'ask' (reading tools run; run_code asks with Allow / Reject in the running %%acp cell, answered "
                    "by AcpMagics.permission when that is 'allow' or 'deny'), 'read-only' (run_code is refused), "
                    "'allow' (run_code runs), 'off' (no server). Applies at once to agents started without "
                    "--kernel-tools.",
    ).tag(config=True)

    system_prompt = Unicode(
        None, allow_none=True,
        help="What agents started here are told when each session opens, where they take a system prompt "
             "(unstable ACP): None (the default) a short note that they run in a Jupyter notebook and what their "
             "kernel tools allow; '' nothing; any other text: that text.",
    ).tag(config=True)
    system_prompt_mode = Choice(
        ["append", "override"], default_value="append",
        help="How the system prompt joins the agent's own instructions: 'append' (every agent that takes one) or "
             "'override' (replaces them, where the agent offers it). Read when an agent starts.",
    ).tag(config=True)

    rerun = Choice(
        ["branch", "append"], default_value="branch",
        help="Running a %%acp cell that already holds a turn of the conversation: 'branch' answers it from the "
             "conversation just before that turn, on a new branch (a checkpoint is kept before each prompt: a "
             "session/fork where the agent offers it, else the conversation above is handed to a new session); "
             "'append' sends it as a new turn at the end and keeps no checkpoints.",
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        _loop.switch_interval.target = self.switch_interval
        self.runner = Runner(self)
        self._in_async_cell = False

    @validate("timeout")
    def _check_timeout(self, proposal: dict[str, Any]) -> float:
        value = proposal["value"]
        if not value > 0:  # 0 would fail every start ("did not answer initialize within 0 s"); NaN too
            raise TraitError(f"AcpMagics.timeout: seconds to wait for a start and each request, more than 0, "
                             f"not {value!r} (e.g. %config AcpMagics.timeout = 60)")
        return value

    @validate("kernel_tools")
    def _check_kernel_tools(self, proposal: dict[str, Any]) -> str:
        value = proposal["value"]
        try:
            policy = parse_policy(value)
        except ValueError:
            close = difflib.get_close_matches(str(value).strip().lower(), list(POLICIES), n=1, cutoff=0.5)
            raise TraitError(f"AcpMagics.kernel_tools: {value!r} is not a policy; use one of "
                             f"{', '.join(repr(w) for w in POLICIES)}"
                             + (f"; did you mean {close[0]!r}?" if close else "")
                             + f" (e.g. %config AcpMagics.kernel_tools = {close[0] if close else 'ask'!r})") from None
        if isinstance(value, str) and value.strip().lower() != policy:  # 'readonly', 'read_only': said, not silent
            print(f"AcpMagics.kernel_tools: {value!r} taken as {policy!r}")
        return policy

    @observe("kernel_tools")
    def _kernel_tools_changed(self, change: dict[str, Any]) -> None:
        runner = getattr(self, "runner", None)  # None while the configuration is applied in __init__
        if runner is not None:
            runner.follow_kernel_tools(change["new"])
            # Every panel's note follows at once (those of sessions with a server also hear it from their link).
            for entry in list(self.agents.values()):
                for panel in list(entry.panels.values()):
                    panel.kernel_tools_changed()

    @observe("switch_interval")
    def _switch_interval_changed(self, change: dict[str, Any]) -> None:
        _loop.switch_interval.target = change["new"]

    # Kept as attributes of the magics: tests and notebooks reach the registry through them.
    @property
    def agents(self) -> dict[str, Any]:
        return self.runner.agents.agents

    @property
    def last_view(self) -> Any:
        return self.runner.agents.last_view

    def entry(self, alias: str | None = None) -> Any:
        return self.runner.agents.entry(alias)

    def panel(self, session: Any) -> Any:
        entry = self.runner.agents.entry_of(session)
        if entry is None:
            raise UsageError(f"session {session.id} was not opened by these magics")
        return self.runner.agents.panel(entry, session)

    # --- the magic ---------------------------------------------------------------
    @line_cell_magic
    @_documented(help_text())
    def acp(self, line: str, cell: str | None = None) -> None:
        try:
            if cell is None:
                return self.runner.run(parse_line(line))
            return self.run_cell(parse_cell_line(line), cell)
        except AcpError as error:
            raise error.in_terms_of("magic") from None

    def should_wait(self, command: CellPrompt) -> bool:
        if command.wait is not None:
            return command.wait
        if self.wait != "auto":
            return self.wait == "always"
        has_kernel = getattr(self.shell, "kernel", None) is not None
        return self._in_async_cell or not has_kernel

    def run_cell(self, command: CellPrompt, body: str) -> None:
        """The blocking path (no async cells here): wait, and turn Ctrl-C into session/cancel."""
        view = self.runner.begin_turn(command, body)
        if view is not None and self.should_wait(command):
            cells.wait_for_view(view)

    async def run_cell_async(self, line: str, body: str) -> None:
        """The awaiting path: widgets stay clickable; a kernel interrupt cancels the turn."""
        try:
            command = parse_cell_line(line)
            self._in_async_cell = True
            try:
                view = self.runner.begin_turn(command, body)
                wait = self.should_wait(command)
            finally:
                self._in_async_cell = False
            if wait and view is not None:
                await cells.await_view(view)
        except AcpError as error:
            raise error.in_terms_of("magic") from None

    # --- the cell transformer --------------------------------------------------------
    def async_cells_supported(self) -> bool:
        return cells.async_cells_supported(self.shell)

    def transform_cell(self, lines: list[str]) -> list[str]:
        """IPython input transformer: a ``%%acp`` cell becomes ``await acp_cell(line, body)`` where supported."""
        if not lines or not cells.CELL_MAGIC.match(lines[0]):
            return lines
        return cells.transform_cell(lines, self.async_cells_supported())

    # --- teardown ---------------------------------------------------------------------
    def close_all(self, reason: str = "the acp_notebook extension was unloaded") -> None:
        self.runner.agents.close_all(reason)


# --- extension hooks -------------------------------------------------------------------
_registered: dict[int, AcpMagics] = {}


def magics_for(shell: Any) -> AcpMagics:
    """The AcpMagics of ``shell``, loading the extension first if needed."""
    magics = _registered.get(id(shell))
    if magics is None:
        shell.extension_manager.load_extension("acp_notebook")
        magics = _registered[id(shell)]
    return magics


def magics_for_current_shell() -> AcpMagics:
    magics = _magics_of_running_shell()
    if magics is None:
        raise UsageError("the acp_notebook extension is not loaded: %load_ext acp_notebook")
    return magics


async def acp_cell(line: str, body: str) -> None:
    """What a ``%%acp`` cell runs as when the kernel supports awaiting cells (see cells.py)."""
    await magics_for_current_shell().run_cell_async(line, body)


def _magics_of_running_shell() -> AcpMagics | None:
    return _registered.get(id(get_ipython()))


def _agents_of_running_shell() -> NotebookAgents | None:
    """Where ``acpnb.current()`` looks first: the running shell's NotebookAgents, or None (no magics there)."""
    magics = _magics_of_running_shell()
    return magics.runner.agents if magics is not None else None


def _at_exit() -> None:
    """The kernel is going away: every output of the package becomes static and its agents stop."""
    finalize_all("the kernel shut down")
    for magics in list(_registered.values()):
        with contextlib.suppress(Exception):
            magics.close_all("the kernel shut down")


def _zmq_exits_after_us() -> None:
    """Have pyzmq's garbage collector registered before ``_at_exit``, so that its exit handler runs after ours.

    A message part of 64 KiB or more goes out zero-copy through that collector, which is created (with an
    exit handler that refuses such sends from then on) by the first such message. Made after ours, its
    handler would run first (exit handlers run last-registered first), and a large output made static at
    exit (a long session list, an inspector) would be lost, with a traceback in the server's log.
    """
    with contextlib.suppress(ImportError):
        # pyzmq is there only in a kernel (no dependency of ours); imported here for its exit handler alone.
        import zmq.utils.garbage  # noqa: F401


def load_ipython_extension(ipython: Any) -> None:
    magics = AcpMagics(shell=ipython, parent=ipython)
    ipython.register_magics(magics)
    ipython.configurables.append(magics)
    ipython.input_transformers_cleanup.append(magics.transform_cell)
    ipython.events.register("post_run_cell", _flush_after_cell)
    if not _registered:
        _zmq_exits_after_us()
        atexit.register(_at_exit)
    _registered[id(ipython)] = magics
    process_current().follow_shells(_agents_of_running_shell)


def _flush_after_cell(_result: Any = None) -> None:
    flush_all()


def unload_ipython_extension(ipython: Any) -> None:
    magics = _registered.pop(id(ipython), None)
    if magics is None:
        return
    magics.close_all()
    with contextlib.suppress(ValueError):
        ipython.input_transformers_cleanup.remove(magics.transform_cell)
    with contextlib.suppress(ValueError):
        ipython.configurables.remove(magics)
    with contextlib.suppress(ValueError):
        ipython.events.unregister("post_run_cell", _flush_after_cell)
    if not _registered:
        atexit.unregister(_at_exit)
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        manager.magics[kind].pop("acp", None)
    manager.registry.pop(type(magics).__name__, None)
