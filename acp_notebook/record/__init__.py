"""Recordings and replay: sessions as files that re-run offline (see format.py, engine.py, transport.py)."""

from __future__ import annotations

from .engine import Emission, ReplayEngine
from .format import RecordedFrame, Recorder, Recording, RecordingError, session_recording, write_recording
from .transport import Pacer, ReplayTransport

__all__ = ["Emission", "Pacer", "RecordedFrame", "Recorder", "Recording", "RecordingError", "ReplayEngine",
           "ReplayTransport", "session_recording", "write_recording"]
