"""The stdio bridge an agent starts as the ``kernel`` MCP server: ``python -m acp_notebook.kernel_tools.bridge``.

It connects to the kernel's private channel (``ACPNB_KERNEL_CHANNEL``, a Unix socket path),
presents ``ACPNB_KERNEL_TOKEN``, and then relays bytes both ways between its stdio and the
socket: the MCP server itself runs in the kernel, so nothing here speaks MCP. Without a channel,
with an unreachable socket, a refused token or a kernel whose tools cannot start now (the MCP
SDK failed to import: the kernel says why) it prints one line to stderr and exits 1; when the
kernel's side closes while the agent is still there (the kernel restarted, the session closed)
likewise, so the agent's MCP client sees its server end instead of waiting.

Threads: the main thread copies socket -> stdout; one daemon thread copies stdin -> socket.
Kept free of heavy imports: an agent starts one per session.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

CHANNEL_ENV = "ACPNB_KERNEL_CHANNEL"
TOKEN_ENV = "ACPNB_KERNEL_TOKEN"
HANDSHAKE_OK = b"ok\n"
HANDSHAKE_REFUSED = b"refused: "  # then why (a wrong token)
HANDSHAKE_FAILED = b"failed: "  # then why the kernel's side cannot serve now (the next bridge tries again)
_CHUNK = 256 * 1024
_PREFIX = "acp-notebook kernel bridge: "


class BridgeError(Exception):
    """Why the bridge cannot serve; its message is the one line printed."""


def connect(path: str | None, token: str | None) -> socket.socket:
    """A socket to the kernel that accepted ``token``."""
    if not path or not token:
        raise BridgeError(f"no kernel channel: {CHANNEL_ENV} and {TOKEN_ENV} are set by the notebook in the "
                          "`kernel` entry of mcpServers; start the bridge from that entry")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        sock.sendall(token.encode() + b"\n")
        reply = _read_line(sock)
    except OSError as exc:
        sock.close()
        raise BridgeError(f"cannot reach the kernel at {path}: {exc.strerror or exc} "
                          "(its kernel or session has ended)") from None
    if reply != HANDSHAKE_OK:
        sock.close()
        if reply.startswith(HANDSHAKE_FAILED):
            why = reply[len(HANDSHAKE_FAILED):].decode("utf-8", "replace").strip()
            raise BridgeError(f"the kernel tools could not start: {why}")
        said = reply.decode("utf-8", "replace").strip() or "the channel closed without an answer"
        raise BridgeError(f"the kernel refused this bridge: {said}")
    return sock


def _read_line(sock: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n") and len(line) < 4096:
        chunk = sock.recv(1)
        if not chunk:
            break
        line += chunk
    return line


def _pump_stdin(sock: socket.socket, ended: threading.Event) -> None:
    """stdin -> socket; ``ended`` is set only when the agent ends our input (a failed send means the
    kernel's side went away, which the main thread reports)."""
    try:
        while True:
            data = os.read(0, _CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        return
    ended.set()
    try:
        sock.shutdown(socket.SHUT_WR)  # the kernel's server sees the end of input and finishes
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def relay(sock: socket.socket) -> int:
    """Copy bytes both ways until the kernel's side ends; the exit status."""
    stdin_ended = threading.Event()
    threading.Thread(target=_pump_stdin, args=(sock, stdin_ended), name="bridge-stdin", daemon=True).start()
    try:
        while True:
            data = sock.recv(_CHUNK)
            if not data:
                break
            _write_all(1, data)
    except BrokenPipeError:
        return 0  # the agent closed our stdout: it is gone, nobody to tell
    except OSError as exc:
        if not stdin_ended.is_set():
            raise BridgeError(f"the kernel's channel failed: {exc.strerror or exc}") from None
    if stdin_ended.is_set():
        return 0
    raise BridgeError("the kernel's channel closed (the kernel restarted or its session ended)")


def main() -> int:
    try:
        sock = connect(os.environ.get(CHANNEL_ENV), os.environ.get(TOKEN_ENV))
        return relay(sock)
    except BridgeError as exc:
        print(_PREFIX + str(exc), file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
