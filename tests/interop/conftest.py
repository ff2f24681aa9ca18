"""Fixtures for the interop tests: the scripted model server the real agents talk to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from model_server import ModelServer


@pytest.fixture
def model_server(tmp_path: Path) -> Iterator[ModelServer]:
    """A fresh model server on a free 127.0.0.1 port; every request is also logged to
    tmp_path/model-requests.jsonl for debugging a failed test."""
    with ModelServer(log_path=tmp_path / "model-requests.jsonl") as server:
        yield server
