"""The frame log: what ``Agent.log`` is. Each frame either way is written down once, masked, as a
``{"dir", "t", "msg"}`` dict (plus ``"note"`` when there is something to say about it), into a bounded
list and, while one is open, a recording.

- Redaction: a frame is logged with the agent's secret values masked (``Redactor``); the SDK acts on the
  frame as it was sent. A streamed text chunk with no secret in it is logged compacted: rebuilt equal from
  shared keys and constants, about half the memory of the decoded frame.
- Memory accounting: each entry's estimated size in memory is kept beside it (``_entry_size``); past
  ``LOG_LIMIT`` entries or ``LOG_LIMIT_BYTES`` the oldest go until both are back under nine tenths.
- Recording: ``record_to`` starts a recording with the frames so far; every kept frame is written to it.

Threads: only the background loop thread mutates a FrameLog (appends, trims its front, swaps the
recorder). Other threads read it through a snapshot, ``list(agent.log)``; a user may empty it by hand
(``agent.log.clear()``), after which its sizes are measured again.

Process-wide: ``_session_ids``, the session ids that compacted chunks share (one string per id
instead of one per frame), for every FrameLog of the process: a chunk's id is the same object whichever
agent's log holds it. Empty at import; filled on the loop thread as chunks are logged, and emptied when it
reaches ``_SESSION_IDS_KEPT`` entries (an id already shared stays valid: only the sharing starts over).
"""

from __future__ import annotations

import sys
import time
from array import array
from typing import Any

from ._redact import Redactor
from .record.format import Recorder

__all__ = ["LOG_LIMIT", "LOG_LIMIT_BYTES", "FrameLog"]

# A log keeps the latest frames within two bounds: LOG_LIMIT entries, and LOG_LIMIT_BYTES of their
# estimated size in memory (_entry_size: what the frame and its entry take as Python objects, about
# 1 KiB for a streamed chunk of a few words, which is logged compacted). Past either, the oldest
# frames are dropped until both are back under nine tenths: a 50,000-chunk turn is kept whole, and a
# 200,000-chunk one costs at most LOG_LIMIT_BYTES here.
LOG_LIMIT = 100_000
LOG_LIMIT_BYTES = 64 * 2**20

# A streamed text chunk as decoded: every key and constant value a string of its own, per frame.
_FRAME_KEYS = ("jsonrpc", "method", "params")
_PARAMS_KEYS = ("sessionId", "update")
_UPDATE_KEYS = ("sessionUpdate", "content")
_CONTENT_KEYS = ("type", "text")
_CHUNK_KINDS = {kind: kind for kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")}
_CHUNK_CONSTANTS = [*_FRAME_KEYS, *_PARAMS_KEYS, *_UPDATE_KEYS, *_CONTENT_KEYS, *_CHUNK_KINDS, "2.0", "session/update"]
# What a compacted chunk's log entry costs beside its text (measured: about 1 KiB with a few words of text;
# the frame as decoded, with strings of its own for every key and constant, takes about 1.8 KiB).
_CHUNK_ENTRY_BYTES = 960
_SESSION_IDS_KEPT = 256
_session_ids: dict[str, str] = {}


class FrameLog(list):  # type: ignore[type-arg]
    """The latest frames both ways, as ``{"dir", "t", "msg"[, "note"]}`` dicts, oldest first, bounded by
    ``LOG_LIMIT`` entries and ``LOG_LIMIT_BYTES`` of estimated memory (``bytes``). A list, so that readers
    snapshot it with ``list(log)``; appended to only through ``entry`` and ``keep`` (loop thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._sizes: array[int] = array("Q")  # _entry_size of each entry, in step with the list
        self._bytes = 0
        self._clean_for: tuple[Redactor, bool] | None = None  # see _chunk_constants_clean
        self.recorder: Recorder | None = None

    @property
    def bytes(self) -> int:
        """The estimated size in memory of the entries (bounded by ``LOG_LIMIT_BYTES``)."""
        return self._bytes

    def entry(self, direction: str, msg: dict[str, Any], redactor: Redactor) -> tuple[dict[str, Any], int | None]:
        """The entry to write down for a frame (secrets masked, a plain text chunk compacted) and, for a
        compacted chunk, its size; None when it is to be measured (any other frame)."""
        plain = _plain_chunk(msg) if direction == "recv" else None
        if plain is not None and self._chunk_constants_clean(redactor) and not redactor.finds((plain[0], plain[2])):
            # No secret in it (its keys and constants are none): its session id and text were the only
            # strings left to scan. The entry is known to be a well-formed text chunk.
            entry = {"dir": direction, "t": time.time(), "msg": _compact_chunk(*plain)}
            return entry, _CHUNK_ENTRY_BYTES + sys.getsizeof(plain[2])
        return {"dir": direction, "t": time.time(), "msg": redactor.masked(msg)}, None

    def keep(self, entry: dict[str, Any], size: int | None = None) -> None:
        """Record the entry (while a recording is open) and append it, trimming the front past a bound."""
        if self.recorder is not None:
            self.recorder.frame(entry["dir"], entry["t"], entry["msg"], entry.get("note"))
        size = _entry_size(entry) if size is None else size
        self.append(entry)
        self._sizes.append(size)
        self._bytes += size
        if len(self) > LOG_LIMIT or self._bytes > LOG_LIMIT_BYTES:
            self._trim()

    def record_to(self, recorder: Recorder, init_result: dict[str, Any]) -> None:
        """Write the frames so far to ``recorder`` after its header, and every later frame (the open one ends)."""
        self.stop_recording()
        so_far = list(self)
        recorder.begin(init_result)
        for entry in so_far:
            recorder.frame(entry["dir"], entry["t"], entry["msg"], entry.get("note"))
        self.recorder = recorder

    def stop_recording(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    def _chunk_constants_clean(self, redactor: Redactor) -> bool:
        """Whether the fixed strings of a text chunk frame (keys, method, kinds) hold none of the secret values
        (always, short of a secret such as "session/"): then only its session id and text need a scan."""
        found = self._clean_for
        if found is None or found[0] is not redactor:
            found = self._clean_for = (redactor, not redactor.finds(_CHUNK_CONSTANTS))
        return found[1]

    def _trim(self) -> None:
        """Drop the oldest entries until the log is under nine tenths of both bounds."""
        if len(self._sizes) != len(self):  # the list was changed by hand (cleared, say): measure again
            self._sizes = array("Q", (_entry_size(e) for e in self))
            self._bytes = sum(self._sizes)
        count, freed = 0, 0
        entries, budget = len(self), self._bytes
        keep_entries, keep_bytes = LOG_LIMIT * 9 // 10, LOG_LIMIT_BYTES * 9 // 10
        while count < entries and (entries - count > keep_entries or budget - freed > keep_bytes):
            freed += self._sizes[count]
            count += 1
        del self[:count]
        del self._sizes[:count]
        self._bytes -= freed


def _plain_chunk(msg: Any) -> tuple[str, str, str] | None:
    """``(session id, kind, text)`` of a frame that is a text chunk and nothing else, in the usual key
    order; None for any other frame."""
    if type(msg) is not dict or tuple(msg) != _FRAME_KEYS or msg["method"] != "session/update":
        return None
    params = msg["params"]
    if type(params) is not dict or tuple(params) != _PARAMS_KEYS or type(params["sessionId"]) is not str:
        return None
    update = params["update"]
    if type(update) is not dict or tuple(update) != _UPDATE_KEYS or type(update["sessionUpdate"]) is not str:
        return None
    kind = _CHUNK_KINDS.get(update["sessionUpdate"])
    content = update["content"]
    if kind is None or type(content) is not dict or tuple(content) != _CONTENT_KEYS or content["type"] != "text" \
            or type(content["text"]) is not str or msg["jsonrpc"] != "2.0":
        return None
    return params["sessionId"], kind, content["text"]


def _compact_chunk(session_id: str, kind: str, text: str) -> dict[str, Any]:
    """A text chunk frame (as ``_plain_chunk`` read it) rebuilt equal, from shared keys and constants: about
    half the memory of the decoded one."""
    shared = _session_ids.get(session_id)
    if shared is None:
        if len(_session_ids) >= _SESSION_IDS_KEPT:
            _session_ids.clear()
        shared = _session_ids[session_id] = session_id
    update = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": shared, "update": update}}


def _entry_size(entry: dict[str, Any]) -> int:
    """The estimated memory of one log entry: a constant plus the text for text chunks (the frames that come
    in floods, compacted when logged), ``sys.getsizeof`` over the whole entry for the rest."""
    plain = _plain_chunk(entry.get("msg"))
    if plain is not None:
        return _CHUNK_ENTRY_BYTES + sys.getsizeof(plain[2])
    return _deep_size(entry)


def _deep_size(value: Any) -> int:
    total, pending = 0, [value]
    while pending:
        item = pending.pop()
        total += sys.getsizeof(item)
        if type(item) is dict:
            for key, sub in item.items():
                total += sys.getsizeof(key)
                pending.append(sub)
        elif type(item) is list or type(item) is tuple:
            pending.extend(item)
    return total
