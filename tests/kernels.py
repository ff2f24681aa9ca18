"""Kernels the tests start, over ipc (unix sockets) instead of TCP.

jupyter_client gives a TCP kernel its five ports by binding each to port 0 and releasing it, and the kernel binds
them again only when it has started: on a loaded machine another process took one in between once ("Address
already in use", the kernel dead at start). A socket file named by us cannot be taken so. Its path is absolute
(the kernel and its client resolve it from different working directories) and short (a unix socket's path holds
at most 107 bytes), unique per kernel.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

import jupyter_client
import nbclient
from jupyter_client.blocking import BlockingKernelClient
from traitlets.config import Config

from tests.processes import KERNEL_START_S


def _ipc_prefix() -> str:
    return os.path.join(tempfile.gettempdir(), f"acpnb-kernel-{secrets.token_hex(6)}")


def _kernel_config() -> Config:
    """nbclient's ``config=`` for one notebook run: its kernel over ipc."""
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = _ipc_prefix()
    return config


def notebook_client(notebook: Any, workdir: Path | str, *, timeout: float, **options: Any) -> nbclient.NotebookClient:
    """nbclient's client for ``notebook``, run in ``workdir`` on the python3 kernel over ipc: KERNEL_START_S for the
    kernel to start, ``timeout`` seconds a cell (``options`` as NotebookClient takes them, e.g. allow_errors)."""
    return nbclient.NotebookClient(notebook, startup_timeout=KERNEL_START_S, config=_kernel_config(), timeout=timeout,
                                   kernel_name="python3", resources={"metadata": {"path": str(workdir)}}, **options)


def kernel_manager(**traits: Any) -> jupyter_client.KernelManager:
    """A python3 kernel's manager, over ipc (``traits`` as KernelManager takes them, e.g. connection_file)."""
    return jupyter_client.KernelManager(kernel_name="python3", transport="ipc", ip=_ipc_prefix(), **traits)


def start_kernel(cwd: Path | str, **start: Any) -> tuple[jupyter_client.KernelManager, BlockingKernelClient]:
    """``jupyter_client.manager.start_new_kernel`` over ipc: the kernel started in ``cwd`` (``start`` as
    start_kernel takes it, e.g. env), its channels open, ready."""
    manager = kernel_manager()
    manager.start_kernel(cwd=str(cwd), **start)
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=KERNEL_START_S)
    except RuntimeError:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        raise
    return manager, client
