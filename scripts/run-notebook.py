"""Execute a notebook in a real kernel and save the result beside it as NAME.out.ipynb (used by `make demo`).

`jupyter execute --output` in nbclient 0.11 writes over the input notebook, so we drive nbclient directly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main(paths: list[str]) -> int:
    for name in paths:
        source = Path(name)
        notebook = nbformat.read(source, as_version=4)
        NotebookClient(notebook, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(source.parent)}}).execute()
        target = source.with_suffix(".out.ipynb")
        nbformat.write(notebook, target)
        print(f"executed {source} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
