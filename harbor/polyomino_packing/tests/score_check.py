"""Polyomino Packing (FrontierCS problem 0): is a case's positive ratio a real checker verdict?

The FrontierCS judge regex-matches `Ratio: <number>` in a case message, and for a run that was
not accepted the message is the contestant's own stderr, so a crashing program can claim any
ratio. For this problem a genuine verdict is the testlib checker's partial-points line,

    points <p> Ratio: <r> (cells=<c>, W=<w>, H=<h>, area=<a>)

and the case then also carries the contestant's stdout, whose first line is `W H`. A positive
ratio is accepted only when all of that agrees: area = W·H, the ratio, the points and the
reported scoreRatio all equal cells/area within 1e-9, and the output starts with the same W and
H. A crashed run has no output, so copying the line to stderr does not help.

Standard library only: the harness loads this file by path, and the task's in-container
verifier imports it, so both apply the same rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

RATIO_TOLERANCE = 1e-9

_VERDICT = re.compile(
    r"points\s+(?P<points>\S+)\s+Ratio:\s*(?P<ratio>\S+)\s+"
    r"\(cells=(?P<cells>\d{1,20}),\s*W=(?P<w>\d{1,20}),\s*H=(?P<h>\d{1,20}),"
    r"\s*area=(?P<area>\d{1,40})\)",
    re.ASCII,
)
_OUTPUT_HEAD = re.compile(r"\s*(\S{1,40})\s+(\S{1,40})", re.ASCII)


def check_case(case: Mapping[str, Any]) -> str | None:
    """Return what is inconsistent about one judged case, or None if it is consistent.

    Cases with a zero ratio need no provenance. Never raises, whatever JSON values the case holds
    (ratio range and finiteness are the generic client's job; non-numbers are passed over here).
    """
    ratio = case.get("scoreRatio")
    if not _number(ratio) or not ratio > 0:
        return None
    msg = case.get("msg")
    verdict = _VERDICT.fullmatch(msg.strip()) if isinstance(msg, str) else None
    if verdict is None:
        shown = msg[:120] if isinstance(msg, str) else msg
        return (
            f"ratio {ratio!r} does not come from a checker verdict: the message {shown!r} "
            "is not the checker's 'points … Ratio: … (cells=…, W=…, H=…, area=…)' line"
        )
    cells, width, height, area = (int(verdict[key]) for key in ("cells", "w", "h", "area"))
    if width < 1 or height < 1 or width * height != area:
        return f"checker line has W={width}, H={height} but area={area}"
    if not 0 < cells <= area:
        return f"checker line claims {cells} cells in an area of {area}"
    exact = cells / area
    for label, text in (("checker ratio", verdict["ratio"]), ("checker points", verdict["points"])):
        value = _parse_float(text)
        if value is None or not abs(value - exact) <= RATIO_TOLERANCE:
            return f"{label} {text!r} differs from cells/area = {exact!r}"
    if not abs(ratio - exact) <= RATIO_TOLERANCE:
        return f"scoreRatio {ratio!r} differs from the checker's cells/area = {exact!r}"
    output = case.get("output")
    if not isinstance(output, str):
        return "positive ratio but the case carries no program output, so no checker judged it"
    head = _OUTPUT_HEAD.match(output)
    if head is None or [_parse_int(head[1]), _parse_int(head[2])] != [width, height]:
        first = output.lstrip()[:60]
        return f"checker judged W={width}, H={height} but the program's output starts {first!r}"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _parse_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _parse_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
