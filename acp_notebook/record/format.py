"""The recording format: a session's frames as JSON lines, with a header, secrets masked.

    line 1   {"acpRecording": 1, "date": ISO-8601, "client": {"name", "version"}, "protocolVersion": 1,
              "agent": {"name", "command", "cwd"}, "agentInfo": {...}}
    then     {"dir": "send" | "recv", "t": seconds since the first frame, "msg": {...}, "note"?: "..."}

"send" is the client's frame to the agent, "recv" the agent's to the client. A "recv" frame with
an empty ``msg`` and a note is a line the agent wrote that was not a valid frame. The header's
``agentInfo`` and ``protocolVersion`` are those of the ``initialize`` answer.

``Recorder`` writes one (on the loop thread that owns the agent's connection); ``Recording.load``
reads one. Both are plain file I/O: no threads, no protocol.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from .._protocol import PROTOCOL_VERSION, client_version
from .._redact import Redactor
from ..errors import AcpError, Remedy

__all__ = ["FORMAT_VERSION", "HEADER_KEY", "RecordedFrame", "Recorder", "Recording", "RecordingError",
           "session_recording", "write_recording"]

HEADER_KEY = "acpRecording"
FORMAT_VERSION = 1


class RecordingError(AcpError):
    """A file that cannot be read as a recording."""

    remedy = Remedy("make_a_recording")


@dataclass(frozen=True)
class RecordedFrame:
    direction: str  # "send" (client -> agent) or "recv" (agent -> client)
    t: float
    msg: dict[str, Any]
    line: int  # 1-based line in the file, for messages that point at it
    note: str | None = None

    @property
    def kind(self) -> str:
        """request, notification or response."""
        if "method" in self.msg:
            return "request" if "id" in self.msg else "notification"
        return "response" if "id" in self.msg else "invalid"

    def as_log_entry(self, start: float = 0.0) -> dict[str, Any]:
        """The frame as an ``agent.log`` entry (``t`` made absolute from ``start``)."""
        entry: dict[str, Any] = {"dir": self.direction, "t": start + self.t, "msg": self.msg}
        if self.note:
            entry["note"] = self.note
        return entry


@dataclass
class Recording:
    header: dict[str, Any]
    frames: list[RecordedFrame] = field(default_factory=list)
    path: Path | None = None

    @property
    def name(self) -> str:
        return str(self.path) if self.path is not None else "the recording"

    @property
    def agent_name(self) -> str:
        info = self.header.get("agentInfo") or {}
        return str((self.header.get("agent") or {}).get("name") or info.get("name") or "recording")

    @property
    def cwd(self) -> str | None:
        cwd = (self.header.get("agent") or {}).get("cwd")
        return cwd if isinstance(cwd, str) else None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Recording:
        file = Path(path)
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise RecordingError(f"no recording at {file}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise RecordingError(f"cannot read the recording {file}: {exc}") from None
        return cls.parse(lines, path=file)

    @classmethod
    def parse(cls, lines: Iterable[str], *, path: Path | None = None) -> Recording:
        name = str(path) if path is not None else "the recording"
        recording: Recording | None = None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:
                raise RecordingError(f"{name}, line {number}: not JSON") from None
            if recording is None:
                if not isinstance(data, dict) or data.get(HEADER_KEY) != FORMAT_VERSION:
                    raise RecordingError(f"{name} is not an acp-notebook recording (its first line has no "
                                         f'"{HEADER_KEY}": {FORMAT_VERSION})')
                recording = cls(header=data, path=path)
                continue
            if not isinstance(data, dict) or data.get("dir") not in ("send", "recv") \
                    or not isinstance(data.get("msg"), dict):
                raise RecordingError(f"{name}, line {number}: not a frame ({{dir, t, msg}})")
            recording.frames.append(RecordedFrame(data["dir"], float(data.get("t") or 0.0), data["msg"], number,
                                                  data.get("note")))
        if recording is None:
            raise RecordingError(f"{name} is empty")
        return recording


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


class Recorder:
    """Appends frames to a recording as they pass; secrets are masked before anything is written.

    The header carries the ``initialize`` answer, so frames are held until ``begin`` is called
    with it (right after the agent started), then written in order. Call from one thread only
    (the agent's loop thread).
    """

    def __init__(self, path: str | os.PathLike[str], *, agent: dict[str, Any], redactor: Redactor) -> None:
        self.path = Path(path)
        self.redactor = redactor
        self._agent = redactor.data(agent)
        self._held: list[tuple[str, float, dict[str, Any], str | None]] = []
        self._t0: float | None = None
        self._stream: IO[str] | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stream = self.path.open("w", encoding="utf-8")

    def begin(self, initialize_result: dict[str, Any]) -> None:
        """Write the header (now that the agent has introduced itself) and the frames held so far."""
        if self._stream is None or self._held is None:
            return
        header = {HEADER_KEY: FORMAT_VERSION, "date": _now_iso(),
                  "client": {"name": "acp-notebook", "version": client_version()},
                  "protocolVersion": initialize_result.get("protocolVersion", PROTOCOL_VERSION),
                  "agent": self._agent, "agentInfo": initialize_result.get("agentInfo") or {}}
        self._stream.write(self.redactor.json_line(header) + "\n")
        held, self._held = self._held, None  # type: ignore[assignment]
        for direction, t, msg, note in held:
            self._write(direction, t, msg, note)
        self._stream.flush()

    def frame(self, direction: str, t: float, msg: dict[str, Any], note: str | None = None) -> None:
        if self._stream is None:
            return
        if self._held is not None:
            self._held.append((direction, t, msg, note))
            return
        self._write(direction, t, msg, note)
        if "id" in msg:  # requests and answers: the file is current at every step a reader cares about
            self._stream.flush()

    def _write(self, direction: str, t: float, msg: dict[str, Any], note: str | None) -> None:
        assert self._stream is not None
        if self._t0 is None:
            self._t0 = t
        entry: dict[str, Any] = {"dir": direction, "t": round(t - self._t0, 6), "msg": msg}
        if note:
            entry["note"] = note
        self._stream.write(self.redactor.json_line(entry) + "\n")

    def close(self) -> None:
        if self._stream is not None:
            if self._held:  # the agent never finished initialize: keep what was exchanged anyway
                self.begin({})
            self._stream.close()
            self._stream = None


def session_recording(agent: Any, session_id: str) -> dict[str, Any]:
    """One session of a running agent, as plain data for ``write_recording``: the agent's description,
    its initialize answer, and the frames of ``initialize`` and of that session, in wire order (requests
    of the session, their answers, the agent's requests for it and the client's answers)."""
    log = list(agent.log)  # a snapshot: the loop thread appends to (and trims) the live list
    requests: dict[tuple[str, Any], int] = {}  # (direction, id) -> index of a request in the log
    keep: set[int] = set()
    for index, entry in enumerate(log):
        msg = entry.get("msg") or {}
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        result = msg.get("result") if isinstance(msg.get("result"), dict) else {}
        if "method" in msg:
            if "id" in msg:
                requests[(entry["dir"], msg["id"])] = index
            if params.get("sessionId") == session_id or msg["method"] == "initialize":
                keep.add(index)
            continue
        asked = requests.get(("recv" if entry["dir"] == "send" else "send", msg.get("id")))
        if asked is not None and (asked in keep or result.get("sessionId") == session_id):
            keep.update((asked, index))  # session/new is known to be this session's only by its answer
    connection = getattr(agent, "connection", None)
    return {"agent": {"name": agent.name, "command": list(agent.command), "cwd": agent.cwd},
            "initialize": dict(connection.init_result) if connection is not None else {},
            "frames": [log[i] for i in sorted(keep)]}


def write_recording(path: str | os.PathLike[str], recording: dict[str, Any], *,
                    redactor: Redactor | None = None) -> Path:
    """Write what ``session_recording`` gathered as a recording file (secrets masked)."""
    recorder = Recorder(path, agent=recording["agent"], redactor=redactor or Redactor.from_env(os.environ))
    recorder.begin(recording["initialize"])
    for entry in recording["frames"]:
        recorder.frame(entry["dir"], entry["t"], entry["msg"], entry.get("note"))
    recorder.close()
    return recorder.path
