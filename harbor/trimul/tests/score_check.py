"""TriMul: is a passed case a real verdict of the GPU judge's trusted process?

The judge records a passed correctness case with the message

    pass: test <i> (<spec>): max abs error <e>

and a passed benchmark with

    pass: benchmark <i> (<spec>): mean <m> us over <n> timed calls (std …, best …, worst …)

and `value` = <m> (the benchmark's mean latency in microseconds, the raw score's ingredient).
A case counts only when its message is one of these and a benchmark's value is the printed
mean; the candidate cannot write these messages (a failed case's message is the judge's own
text, and its ratio is 0). Standard library only: the harness loads this file by path and the
in-container verifier imports it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_TEST = re.compile(r"pass: test \d{1,3} \([^()]*\): max abs error \S+", re.ASCII)
_BENCHMARK = re.compile(
    r"pass: benchmark \d{1,3} \([^()]*\): mean (?P<mean>[0-9]+\.[0-9]{6}) us over "
    r"(?P<runs>\d{1,3}) timed calls \(std [^()]*\)",
    re.ASCII,
)


def check_case(case: Mapping[str, Any]) -> str | None:
    """What is inconsistent about one judged case, or None. Never raises."""
    ratio = case.get("scoreRatio")
    if not isinstance(ratio, int | float) or isinstance(ratio, bool) or not ratio > 0:
        return None
    msg = case.get("msg")
    text = msg.strip() if isinstance(msg, str) else ""
    value = case.get("value")
    if case.get("kind") == "test" and _TEST.fullmatch(text):
        return None if value is None else f"a correctness case carries a value {value!r}"
    found = _BENCHMARK.fullmatch(text) if case.get("kind") == "benchmark" else None
    if found is None:
        return f"ratio {ratio!r} does not come from a GPU judge verdict: {text[:120]!r}"
    printed = float(found["mean"])
    if not isinstance(value, float) or not math.isfinite(value) or value != printed:
        return f"recorded value {value!r} is not the benchmark's mean {printed!r}"
    if printed <= 0 or int(found["runs"]) < 1:
        return f"benchmark mean {printed!r} over {found['runs']} calls is not a timing"
    return None
