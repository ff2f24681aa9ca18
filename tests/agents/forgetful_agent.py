"""The demo agent, except that it reopens sessions (session/resume and session/load) on its default
settings, keeping only the conversation: as many real agents do, losing the model a person chose.
The client must put the recorded values back. Run: python forgetful_agent.py (stdio)."""

from __future__ import annotations

import asyncio
import sys

from acp_notebook.demo.agent import DemoAgent
from acp_notebook.demo.options import SessionSettings
from acp_notebook.demo.server import serve


class ForgetfulAgent(DemoAgent):
    def _reopen(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        session = super()._reopen(*args, **kwargs)
        session.settings = SessionSettings()
        return session


if __name__ == "__main__":
    sys.exit(asyncio.run(serve(ForgetfulAgent())) or 0)
