"""`python -m acp_notebook.proxy`: run the multi-agent proxy on stdio."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
