"""An IPython shell with the extension loaded, for tests that run magics without a kernel.

IPython's globalipapp keeps one shell per process (started by the first test that asks); each test gets it in
its own working directory, with the extension loaded, and leaves it unloaded with no %config of ours behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.testing import globalipapp


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    globalipapp.start_ipython()  # once per process; later calls do nothing
    ip = globalipapp.get_ipython()
    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("load_ext", "acp_notebook")
    yield ip
    ip.run_line_magic("unload_ext", "acp_notebook")
    ip.config.pop("AcpMagics", None)  # %config lands in the shell's config, which the next load would read
