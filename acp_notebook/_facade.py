"""The public pairs (blocking ``name`` and awaitable ``aname``) derived from one core coroutine.

Every operation is written once, as a coroutine that runs on the background loop thread
(``_loop``). ``twins(core)`` derives the two public callables from it, the way
jupyter_client derives its blocking methods: same parameters plus ``timeout``, same
docstring, so ``help()`` shows both. Code already on the loop thread calls the core
directly, unless it wants the operation's default deadline: awaited on the loop thread, the
awaitable twin only wraps the core in that deadline (no hop between threads), which is how the
sweep's trials use the public API, as a user's script would.

- the blocking twin waits on the loop from any other thread (a kernel cell, a script), with
  a deadline; a timeout or Ctrl-C cancels the core on the loop before returning;
- the awaitable twin can be awaited from any event loop (top-level await in a cell): the core
  still runs on the background loop, never on the caller's.

Holds no state; what the core mutates is documented where the core is written.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from . import _loop

__all__ = ["twins"]

T = TypeVar("T")

# What `timeout=None` means for an operation: a number, or a function of the call's arguments
# (e.g. the agent's own `timeout` attribute). Returning None means "no limit".
DefaultTimeout = Callable[..., "float | None"]


def twins(core: Callable[..., Coroutine[Any, Any, T]], *, what: str | Callable[..., str],
          default_timeout: DefaultTimeout | float | None = None, core_takes_timeout: bool = False,
          ) -> tuple[Callable[..., T], Callable[..., Coroutine[Any, Any, T]]]:
    """Return ``(blocking, awaitable)`` for ``core``; assign them in the class or module body.

    ``what`` names the operation in timeout errors (a callable gets the call's arguments, for names such
    as the method of a raw request). ``default_timeout`` is used when the
    caller passes ``timeout=None``; a callable gets the call's arguments (``self`` first).
    With ``core_takes_timeout`` the core has a ``timeout`` parameter of its own (``start``:
    the agent's request timeout); it is passed through and ``default_timeout(...)`` always
    gives the overall deadline.
    """
    name = core.__name__.lstrip("_")

    def deadline(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float | None:
        timeout = kwargs.get("timeout") if core_takes_timeout else kwargs.pop("timeout", None)
        if timeout is not None:
            _check_timeout(timeout, name)
            if not core_takes_timeout:
                return timeout
        return default_timeout(*args, **kwargs) if callable(default_timeout) else default_timeout

    signature = inspect.signature(core)
    if not core_takes_timeout:
        signature = _with_timeout(signature)
    owner = core.__qualname__.rsplit(".", 1)[0] + "." if "." in core.__qualname__ else ""
    keywords = {key for key, p in signature.parameters.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    takes_any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())

    def check_call(twin_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # Python's own message would name the private core (``_set() got an unexpected keyword ...``).
        unknown = [key for key in kwargs if key not in keywords]
        try:
            if unknown and not takes_any_keyword:  # named first: bind() would complain of a missing argument
                raise TypeError(f"got an unexpected keyword argument {unknown[0]!r}")
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{owner}{twin_name}{_shown(signature)}: {exc}") from None

    @functools.wraps(core)
    def blocking(*args: Any, **kwargs: Any) -> T:
        check_call(name, args, kwargs)
        limit = deadline(args, kwargs)
        return _loop.run_sync(core(*args, **kwargs), limit, what=_name(what, args, kwargs))

    @functools.wraps(core)
    async def awaitable(*args: Any, **kwargs: Any) -> T:
        check_call(f"a{name}", args, kwargs)
        limit = deadline(args, kwargs)
        return await _loop.run_async(core(*args, **kwargs), limit, what=_name(what, args, kwargs))

    for twin, twin_name, note in ((blocking, name, "Blocks until done"),
                                  (awaitable, f"a{name}", "Awaitable from any event loop")):
        twin.__name__ = twin_name
        twin.__qualname__ = core.__qualname__.rsplit(".", 1)[0] + f".{twin_name}" if "." in core.__qualname__ \
            else twin_name
        twin.__signature__ = _returning(signature, twin is awaitable)  # type: ignore[attr-defined]
        twin.__doc__ = _doc(core.__doc__, note)
        del twin.__wrapped__  # so inspect.signature uses __signature__, not the core's
    return blocking, awaitable


def _check_timeout(timeout: Any, where: str) -> None:
    """A timeout given by the caller: a number of seconds, not negative (None means the default)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"{where}: timeout must be a number of seconds, 0 or more (or None for the default), "
                         f"not {timeout!r}")


def _shown(signature: inspect.Signature) -> str:
    """The call's parameters as a person writes them: no ``self``, no annotations."""
    params = [p.replace(annotation=inspect.Parameter.empty) for name, p in signature.parameters.items()
              if name != "self"]
    return str(signature.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _name(what: str | Callable[..., str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return what(*args, **kwargs) if callable(what) else what


def _with_timeout(signature: inspect.Signature) -> inspect.Signature:
    params = list(signature.parameters.values())
    if "timeout" in signature.parameters:
        raise TypeError("a core coroutine takes no `timeout`: its twins add it and apply it themselves")
    keyword = inspect.Parameter("timeout", inspect.Parameter.KEYWORD_ONLY, default=None,
                                annotation="float | None")
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    return signature.replace(parameters=[*head, keyword, *tail])


def _returning(signature: inspect.Signature, awaitable: bool) -> inspect.Signature:
    if not awaitable or signature.return_annotation is inspect.Signature.empty:
        return signature
    return signature.replace(return_annotation=f"Awaitable[{_annotation_text(signature.return_annotation)}]")


def _annotation_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))


def _doc(doc: str | None, note: str) -> str:
    text = inspect.cleandoc(doc or "")
    suffix = (f"{note}; ``timeout`` (seconds, None for the default) bounds the wait, and on "
              "expiry the operation is cancelled and AcpTimeoutError raised.")
    return f"{text}\n\n{suffix}" if text else suffix
