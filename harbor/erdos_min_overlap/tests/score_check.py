"""Erdős minimum overlap: is a case's certified value a real verifier verdict?

The task's verifier (judge/erdos_min_overlap/verify.py) certifies a case with the line

    ok Value: <bound> (n=<steps>)

and the judge then records the case with ratio 1 and `value` = the bound. A case counts as
certified only when that line is its message and the recorded value is the printed bound; a
candidate cannot put it there, since a failed run's message is the judge's own text. Standard
library only: the harness loads this file by path and the in-container verifier imports it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_VERDICT = re.compile(r"ok Value: (?P<value>[0-9.eE+-]+) \(n=(?P<n>\d{1,9})\)", re.ASCII)


def check_case(case: Mapping[str, Any]) -> str | None:
    """What is inconsistent about one judged case, or None. Never raises."""
    ratio = case.get("scoreRatio")
    if not isinstance(ratio, int | float) or isinstance(ratio, bool) or not ratio > 0:
        return None
    msg = case.get("msg")
    found = _VERDICT.fullmatch(msg.strip()) if isinstance(msg, str) else None
    if found is None:
        shown = msg[:120] if isinstance(msg, str) else msg
        return f"ratio {ratio!r} does not come from the verifier's 'ok Value: …' line: {shown!r}"
    try:
        printed = float(found["value"])
    except ValueError:
        return f"the verifier's value {found['value']!r} is not a number"
    value = case.get("value")
    if not isinstance(value, float) or not math.isfinite(value) or value != printed:
        return f"recorded value {value!r} is not the certified bound {printed!r}"
    return None
