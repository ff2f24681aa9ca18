"""%acp and %%acp: start agents, show live session panels, chat in cells, resume a notebook's sessions.

The package, by job:

- ``grammar``: the command table; text -> command dataclasses, the help (no I/O);
- ``commands``: the Runner that carries the commands out;
- ``cells``: the %%acp cell machinery (awaiting cells, interrupts, the input transformer);
- ``registry``: the notebook's agents, sessions, panels and session records;
- ``records`` / ``store`` / ``resume`` / ``resumable`` / ``restore``: what the saved notebook and the local
  session store remember, reopening a session after a restart, listing them, and putting back lost settings;
- ``entry``: ``acpnb.resume()``, the Python face of ``%acp resume`` (light to import);
- ``session_ids``: ids or their prefixes in resume, load and sessions --delete;
- ``settings``: ``%acp set`` of several options, all or nothing;
- ``context``: the notebook's variables in a ``%%acp`` cell (``--attach``, ``{name}``); ``system_prompt``:
  what a new session is told; ``starting``: the line a slow start shows; ``login``: a terminal login;
- ``listing``: ``%acp sessions`` and ``%acp load``; ``branches``: a re-run cell's branch, ``%acp branches`` /
  ``checkout``;
- ``magic``: the thin AcpMagics class, the extension's load/unload hooks, and ``acp_cell`` (what an awaiting
  ``%%acp`` cell runs).

Names are imported on first use (PEP 562): ``import acp_notebook`` imports this package for
``acpnb.resume`` and must not load IPython's magic machinery or ipywidgets with it.
"""

from __future__ import annotations

from .._lazy import lazy_names

__all__ = [
    "AcpMagics", "Authenticate", "Cancel", "CellPrompt", "Help", "ListSessions", "LoadSession", "Logout",
    "NewSession", "Proxy", "Resume", "SessionTable", "SetOptions", "ShowLog", "ShowPanel", "Start", "Stop",
    "TurnInterrupted", "Use", "acp_cell", "default_alias", "load_ipython_extension", "parse_bool", "parse_cell_line", "parse_line",
    "resume", "unload_ipython_extension",
]

__getattr__, __dir__ = lazy_names(__name__, globals(), {
    **dict.fromkeys(("Authenticate", "Cancel", "CellPrompt", "Help", "ListSessions", "LoadSession", "Logout",
                     "NewSession", "Proxy", "Resume", "SetOptions", "ShowLog", "ShowPanel", "Start", "Stop", "Use",
                     "default_alias", "parse_bool", "parse_cell_line", "parse_line", "COMMANDS", "help_text"),
                    ".grammar"),
    **dict.fromkeys(("AcpMagics", "acp_cell", "load_ipython_extension", "unload_ipython_extension", "magics_for",
                     "magics_for_current_shell"), ".magic"),
    **dict.fromkeys(("TurnInterrupted", "kernel_takes_comms_while_awaiting"), ".cells"),
    "SessionTable": "..widgets.sessions",
    "resume": ".entry",
})
