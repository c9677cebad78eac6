"""Treasure Packing (FrontierCS problem 1): is a case's positive ratio a real checker verdict?

The FrontierCS judge reads `Ratio: <number>` from a case message, and for a run that was not
accepted the message is the contestant's own stderr. For this problem a genuine verdict is the
checker's partial-points line

    points <p> Value: <v>. Ratio: <r>, RatioUnbounded: <u>

where p is the ratio (testlib prints it with up to 10 decimals, r with 4) and the case also
carries the contestant's output (a JSON object). A positive ratio is accepted only when that line
is there, p and r agree to the 4 decimals r is printed with, scoreRatio equals r, and the case
has the program's output. Standard library only: the harness loads this file by path and the
in-container verifier imports it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_VERDICT = re.compile(
    r"points\s+(?P<points>[0-9.]+)\s+Value:\s*(?P<value>-?\d{1,20})\.\s+"
    r"Ratio:\s*(?P<ratio>[0-9.]+),\s*RatioUnbounded:\s*(?P<unbounded>-?[0-9.]+)",
    re.ASCII,
)


def check_case(case: Mapping[str, Any]) -> str | None:
    """What is inconsistent about one judged case, or None. Never raises."""
    ratio = case.get("scoreRatio")
    if not isinstance(ratio, int | float) or isinstance(ratio, bool) or not math.isfinite(ratio):
        return None
    if not ratio > 0:
        return None
    msg = case.get("msg")
    found = _VERDICT.fullmatch(msg.strip()) if isinstance(msg, str) else None
    if found is None:
        shown = msg[:120] if isinstance(msg, str) else msg
        return (
            f"ratio {ratio!r} does not come from the checker's 'points … Ratio: …' line: {shown!r}"
        )
    points, printed = float(found["points"]), float(found["ratio"])
    if abs(points - printed) > 5e-5 or abs(ratio - printed) > 1e-12:
        return (
            f"checker points {points!r}, printed ratio {printed!r} and scoreRatio {ratio!r} differ"
        )
    output = case.get("output")
    if not isinstance(output, str) or "{" not in output:
        return "positive ratio but the case carries no program output, so no checker judged it"
    return None
