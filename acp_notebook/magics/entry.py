"""``acpnb.resume()``: ``%acp resume`` called from Python, through the running shell's AcpMagics.

Apart from resume.py (what resuming does, used by the Runner) so that the magics import nothing that
imports them back. ``acpnb.resume`` is read from here: importing this module loads neither IPython nor
the magics; a call does. Runs on the calling thread (the kernel thread in a notebook).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import AcpError

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["resume"]


def resume(session_id: str | None = None, *, notebook: str | None = None, name: str | None = None,
           env: Mapping[str, str] | None = None, timeout: float | None = None) -> Session:
    """Reopen this notebook's last session (or ``session_id``) after a kernel restart: the agent is
    started again as it was, and the session reopened with session/resume (else session/load).

    In a notebook this is ``%acp resume``: the session panel shows and the magics use the session.
    ``notebook``: the .ipynb to read the records from (default: the notebook this kernel runs for).
    """
    # IPython, and the magics with ipywidgets, load on the first call: `import acp_notebook` stays cheap.
    from IPython import get_ipython

    # The grammar and the magics import IPython at module level, the magics ipywidgets too.
    from .grammar import Resume
    from .magic import magics_for

    shell = get_ipython()
    if shell is None:
        raise AcpError("acpnb.resume() reopens a notebook's session: run it in a notebook",
                       hint="Outside Jupyter, reopen a session with agent.resume_session(session_id).")
    command = Resume(session_id=session_id, notebook=notebook, alias=name,
                     env=tuple((env or {}).items()), timeout=timeout)
    return magics_for(shell).runner.resume(command)
