"""This package's version: the one place it is written (pyproject.toml reads it from here at build time).

A constant rather than ``importlib.metadata.version("acp-notebook")``: that import and the scan of the
installed distributions cost about 45 ms of CPU, paid by every process that sends a version (the demo
agent and the proxy at ``initialize``, each client at its start), and the suite starts hundreds of them.
"""

VERSION = "0.1.0"
