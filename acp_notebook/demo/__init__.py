"""The built-in demo agent: an offline, deterministic ACP agent on stdio."""

from __future__ import annotations

from .agent import DemoAgent
from .server import main

__all__ = ["DemoAgent", "main"]
