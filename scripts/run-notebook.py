"""Execute a notebook in a real kernel and save the result beside it as NAME.out.ipynb (used by `make demo`).

`jupyter execute --output` in nbclient 0.11 writes over the input notebook, so we drive nbclient directly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import zmq
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient


def kernel_manager() -> KernelManager:
    """A manager whose kernel talks over encrypted sockets when both sides can.

    ipykernel warns at start ("running over TCP without encryption") unless the manager
    provisions CurveZMQ keys; jupyter-client 8.10 does so with transport_encryption="auto"
    for kernels whose spec declares curve support (ipykernel's does). Older versions keep
    plain TCP, and the warning, rather than fail.
    """
    if "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        return KernelManager(kernel_name="python3", transport_encryption="auto")
    return KernelManager(kernel_name="python3")


def main(paths: list[str]) -> int:
    for name in paths:
        source = Path(name)
        notebook = nbformat.read(source, as_version=4)
        NotebookClient(notebook, km=kernel_manager(), timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(source.parent)}}).execute()
        target = source.with_suffix(".out.ipynb")
        nbformat.write(notebook, target)
        print(f"executed {source} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
