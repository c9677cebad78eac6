"""The registry of checkers this judge implements, keyed by the name used in problem packages.

A checker is a pair of pure functions: `parse` turns an input file into an instance (raising
ValueError for a malformed input) and `check` judges one output for that instance, returning a
testlib-compatible `Verdict`. Adding a problem family means adding one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from judges.problems.polyomino import checker as polyomino
from judges.problems.testlib import Verdict


@dataclass(frozen=True)
class Checker:
    """A problem family's input parser and output checker."""

    parse: Callable[[str], Any]
    check: Callable[[Any, bytes], Verdict]


CHECKERS: dict[str, Checker] = {
    "polyomino": Checker(parse=polyomino.parse_instance, check=polyomino.check),
}


def get_checker(name: str) -> Checker:
    """The checker registered as `name`; KeyError naming the known ones otherwise."""
    try:
        return CHECKERS[name]
    except KeyError:
        raise KeyError(f"unknown checker {name!r}; known: {sorted(CHECKERS)}") from None
