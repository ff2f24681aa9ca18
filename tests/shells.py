"""An IPython shell with the extension loaded, for tests that run magics without a kernel; and the namespace
the kernel tools serve in a test process.

IPython's globalipapp keeps one shell per process (started by the first test that asks); each test gets it in
its own working directory, with the extension loaded, and leaves it unloaded with no %config of ours behind.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.testing import globalipapp
from IPython.utils.capture import CapturedIO, capture_output


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    globalipapp.start_ipython()  # once per process; later calls do nothing
    ip = globalipapp.get_ipython()
    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("load_ext", "acp_notebook")
    yield ip
    ip.run_line_magic("unload_ext", "acp_notebook")
    ip.config.pop("AcpMagics", None)  # %config lands in the shell's config, which the next load would read


def served_namespace() -> dict[str, Any]:
    """The namespace the kernel tools serve here: an IPython shell's (once a test of this worker started one),
    else ``__main__``'s."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell.user_ns if shell is not None else vars(sys.modules["__main__"])


def run_captured(ip: Any, source: str) -> CapturedIO:
    """Run ``source`` as a cell; what it printed and displayed; its error raised, not printed."""
    with capture_output() as captured:
        result = ip.run_cell(source)
    for error in (result.error_before_exec, result.error_in_exec):
        if error is not None:
            raise error
    return captured


@pytest.fixture
def quiet_comms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Widgets made outside a kernel: their comm messages go nowhere."""
    import comm
    from comm.base_comm import BaseComm

    class QuietComm(BaseComm):
        def publish_msg(self, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: QuietComm(**kwargs))
