"""`python -m acp_notebook.proxy`: run the multi-agent proxy on stdio."""

from __future__ import annotations

import sys

from .._sdk import defer_sdk_package

# This is the proxy's process starting: the SDK's package is set up before the proxy's modules import it,
# so that its schema models are never built here (_sdk.py).
defer_sdk_package()

from .cli import main  # noqa: E402

sys.exit(main())
