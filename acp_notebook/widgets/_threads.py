"""``detached``: run widget updates made on the background loop outside any cell's context.

ipykernel (7+) keeps the request being executed in a context variable and stamps every
message with it. Tasks on the acp loop inherit the context of the cell that started them
(the receive loop of an agent started in cell 1 carries cell 1's context for ever), so a
widget update caused by an agent frame would claim to belong to that old cell. Frontends
route widget messages by comm id and do not care; ``nbclient`` and other tools that
collect a cell's messages by parent would drop them (the saved widget state would miss
the new dropdown or the title). In a fresh context the variable is unset and ipykernel
falls back to the request it is handling now, which is where the update belongs.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["detached"]

F = TypeVar("F", bound=Callable[..., Any])


def detached(fn: F) -> F:
    @functools.wraps(fn)
    def run_detached(*args: Any, **kwargs: Any) -> Any:
        return contextvars.Context().run(fn, *args, **kwargs)

    return run_detached  # type: ignore[return-value]
