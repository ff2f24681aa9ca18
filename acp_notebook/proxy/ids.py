"""Proxy session ids that a new proxy process can reopen, and the file that remembers bindings.

A session id the proxy hands out at ``session/new`` is ``acpnb-proxy.`` followed by the
base64url (unpadded) JSON of ``[[agent, that agent's own session id], ...]``: every agent that
had a session ready for it then, in the proxy's order. The session later ends up on one of them
(or on an agent that joined late, or on a fresh session after a crash): each binding is also
appended to ``bindings.jsonl`` in the proxy's state directory (``--state-dir``, else
``$ACP_NOTEBOOK_PROXY_STATE``, else ``$XDG_STATE_HOME/acp-notebook/proxy``, else
``~/.local/state/acp-notebook/proxy``).

To reopen an id (``session/load`` / ``session/resume``), a proxy tries, in order: the binding it
remembers, then the agents' session ids in the id itself (the unused ones were deleted where the
agent supports ``session/delete``, so the one still there is the one that was used). Sessions
listed from the agents directly have ids ``agent:their-own-id``.

The values the client sets are noted too (``{"sessionId", "model": "agent:model"}``, ``{"sessionId",
"option": id, "value": v}``): an agent may reopen a session on its default model, and a proxy
process that did not see them set puts them back (``BindingStore.choices``).

A session offered by several agents is also noted when ``session/new`` answers
(``{"sessionId", "unbound": true}``) and when it is first prompted (``{"sessionId", "prompted":
true}``). An id noted as opened and not as prompted is reopened on every agent in it (bound to the
remembered one, if any), so that any of their models can still be picked before the first prompt,
also by clients that reconnect on every call (acpx).

Plain functions and file I/O on the proxy's event loop thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

__all__ = ["PREFIX", "BindingStore", "decode_session_id", "default_state_dir", "encode_session_id"]

logger = logging.getLogger(__name__)

PREFIX = "acpnb-proxy."
STATE_ENV = "ACP_NOTEBOOK_PROXY_STATE"


def encode_session_id(candidates: Sequence[tuple[str, str]]) -> str:
    data = json.dumps([list(pair) for pair in candidates], separators=(",", ":")).encode()
    return PREFIX + base64.urlsafe_b64encode(data).decode().rstrip("=")


def decode_session_id(session_id: object) -> list[tuple[str, str]]:
    """The ``(agent, agent's session id)`` pairs in an id made by ``encode_session_id``; [] for any other id."""
    if not isinstance(session_id, str) or not session_id.startswith(PREFIX):
        return []
    text = session_id[len(PREFIX):]
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        return []
    if not isinstance(data, list):
        return []
    return [(str(pair[0]), str(pair[1])) for pair in data
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)]


def default_state_dir() -> Path:
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    base = os.environ.get("XDG_STATE_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "acp-notebook" / "proxy"


class BindingStore:
    """Which agent session each proxy session was bound to, kept across proxy processes (append-only)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or default_state_dir()) / "bindings.jsonl"
        # The parsed file and the (mtime, size) it was read at: a session/list asks once per session listed.
        self._cache: tuple[tuple[int, int], list[dict[str, Any]]] | None = None
        self._stream: TextIO | None = None

    def record(self, session_id: str, agent: str, backend_session_id: str) -> None:
        self._append({"sessionId": session_id, "agent": agent, "backendSessionId": backend_session_id})

    def record_unbound(self, session_id: str) -> None:
        """Note a session that session/new offered from several agents, none of them bound yet."""
        self._append({"sessionId": session_id, "unbound": True})

    def record_prompted(self, session_id: str) -> None:
        """Note the first prompt of such a session: from then on it stays with the agent it is bound to."""
        self._append({"sessionId": session_id, "prompted": True})

    def record_model(self, session_id: str, value: str) -> None:
        """Note the model (`agent:model`) the client picked for a session."""
        self._append({"sessionId": session_id, "model": value})

    def record_option(self, session_id: str, config_id: str, value: Any) -> None:
        """Note a value the client set for one of the session's other config options."""
        self._append({"sessionId": session_id, "option": config_id, "value": value})

    def choices(self, session_id: str) -> list[tuple[str, Any]]:
        """What to set again on a reopened session, in order: the model picked last (as ``("model",
        "agent:model")``), then the latest value of each option set since, in the order they were set.
        Values set before that model was picked are left out: the model they were set on is gone."""
        model: str | None = None
        options: dict[str, Any] = {}
        for record in self._lines():
            if record["sessionId"] != session_id:
                continue
            if isinstance(record.get("model"), str):
                model, options = record["model"], {}
            elif isinstance(record.get("option"), str) and "value" in record:
                options.pop(record["option"], None)  # its place in the order is the latest setting's
                options[record["option"]] = record["value"]
        return ([("model", model)] if model is not None else []) + list(options.items())

    def _append(self, record: dict[str, Any]) -> None:
        # The file stays open between records (a client that sets an option on every turn writes one
        # line each time); it is opened again if it went away meanwhile. One write per line, appended.
        try:
            if self._stream is None or not self.path.exists():
                if self._stream is not None:
                    self._stream.close()
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._stream = self.path.open("a", encoding="utf-8")
            self._stream.write(json.dumps(record) + "\n")
            self._stream.flush()
        except OSError as exc:  # a read-only home must not break the session, only its later reopening
            logger.warning("cannot remember session %s in %s: %s", record["sessionId"], self.path, exc)

    def _lines(self) -> list[dict[str, Any]]:
        try:
            stat = self.path.stat()
            if self._cache is not None and self._cache[0] == (stat.st_mtime_ns, stat.st_size):
                return self._cache[1]
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(record, dict) and isinstance(record.get("sessionId"), str):
                records.append(record)
        self._cache = ((stat.st_mtime_ns, stat.st_size), records)
        return records

    def _records(self) -> list[dict[str, str]]:
        """The bindings, oldest first."""
        return [r for r in self._lines() if all(isinstance(r.get(k), str) for k in ("agent", "backendSessionId"))]

    def never_prompted(self, session_id: str) -> bool:
        """True for a session noted as opened unbound and not noted as prompted since."""
        records = [r for r in self._lines() if r["sessionId"] == session_id]
        return any(r.get("unbound") is True for r in records) and not any(r.get("prompted") for r in records)

    def _latest(self) -> dict[str, tuple[str, str]]:
        """Each proxy session's latest binding, ``(agent, that agent's session id)``, in order of first binding."""
        latest: dict[str, tuple[str, str]] = {}
        for record in self._records():
            latest[record["sessionId"]] = (record["agent"], record["backendSessionId"])
        return latest

    def bound_elsewhere(self, agent: str, backend_session_id: str) -> bool:
        """Whether a session is bound to an agent session with this id on another agent (agents sharing one
        store, such as two demo agents, list each other's sessions). Assumes agents' session ids do not collide."""
        return any(bid == backend_session_id and name != agent for name, bid in self._latest().values())

    def lookup(self, session_id: str) -> tuple[str, str] | None:
        """The latest binding of a proxy session id, or None."""
        return self._latest().get(session_id)

    def session_id_for(self, agent: str, backend_session_id: str) -> str | None:
        """The proxy session id now bound to this agent session (an agent session it moved away from, before
        its first prompt, is no longer that session's), or None."""
        found = [sid for sid, binding in self._latest().items() if binding == (agent, backend_session_id)]
        return found[-1] if found else None
