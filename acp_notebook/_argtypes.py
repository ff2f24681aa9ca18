"""argparse types shared by the command lines (sweep, proxy, tour, the demo agent) and the ``%acp`` magics:
whole numbers and numbers with their lower bound, NaN refused, each error saying what was expected and what
was given. Pure functions: any thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["number", "whole"]


def whole(minimum: int) -> Callable[[str], int]:
    """A whole number, ``minimum`` or more."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number, at least {minimum}, not {text!r}")
        return value
    return parse


def number(*, zero: bool, unit: str = "") -> Callable[[str], float]:
    """A number more than 0, or 0 too with ``zero``; ``unit`` names what it counts ("seconds")."""
    what = f"a number of {unit}" if unit else "a number"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}") from None
        if not (value >= 0 if zero else value > 0):  # NaN fails both
            raise argparse.ArgumentTypeError(f"expected {what}, {'0 or more' if zero else 'more than 0'}, "
                                             f"not {text!r}")
        return value
    return parse
