"""A check function for the Ray workspace test, in a module the Ray workers can import (a test module is not)."""

from __future__ import annotations

import os


def made_in(row, workspace):
    """Passes when the workspace is where the row says; the explanation names the process that graded it."""
    return str(workspace) == row["workspace_path"], f"pid {os.getpid()}"
