"""Execute a notebook in a real kernel and save the result beside it as NAME.out.ipynb (used by `make demo`).

`jupyter execute --output` in nbclient 0.11 writes over the input notebook, so we drive nbclient directly.

nbclient owns the kernel manager: it starts the kernel, shuts it down when the notebook is done (or
when this script is interrupted) and removes the kernel's connection file. A manager handed to
nbclient stays the caller's, and a kernel left running outlives `make`, prints "Parent appears to
have exited" into the terminal after the prompt is back, and leaves its connection file behind.

The demo agent started by the notebook keeps its sessions in a temporary directory removed at the
end (``ACP_NOTEBOOK_DEMO_STATE``, which the kernel and the agents inherit), not in the user's own
list of demo sessions; ``--keep-sessions`` leaves that variable as the caller set it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat
import zmq
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from traitlets.config import Config

DEMO_STATE_ENV = "ACP_NOTEBOOK_DEMO_STATE"  # acp_notebook.demo.store.STATE_ENV (not imported: no package needed)


def kernel_config() -> Config:
    """Kernels that talk over encrypted sockets when both sides can.

    ipykernel warns at start ("running over TCP without encryption") unless the manager
    provisions CurveZMQ keys; jupyter-client 8.10 does so with transport_encryption="auto"
    for kernels whose spec declares curve support (ipykernel's does). Older versions keep
    plain TCP, and the warning, rather than fail.
    """
    config = Config()
    if "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"  # nbclient's AsyncKernelManager inherits it
    return config


def execute(source: Path) -> Path:
    notebook = nbformat.read(source, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", config=kernel_config(),
                   resources={"metadata": {"path": str(source.parent)}}).execute()
    target = source.with_suffix(".out.ipynb")
    nbformat.write(notebook, target)
    return target


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="run-notebook.py", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    parser.add_argument("--keep-sessions", action="store_true",
                        help="let the demo agent keep its sessions where it usually does")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="acp-demo-sessions-") as sessions:
        if not args.keep_sessions:
            os.environ[DEMO_STATE_ENV] = sessions
        for name in args.notebooks:
            target = execute(Path(name))
            print(f"executed {name} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
