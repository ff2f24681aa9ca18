"""`python -m acp_notebook.demo`: run the demo agent on stdio."""

from __future__ import annotations

import sys

from .server import main

sys.exit(main())
