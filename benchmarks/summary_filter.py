"""The summary filter: what it catches and what it costs, against the filter it replaced.

Prints, for the filter before issue 35 (a ``` in the text, a `<solution>` tag, or 3 of the
program's 16+-character lines verbatim) and for `harness.archive.summary_filter`: precision and
recall on the labelled corpus of tests/summary_corpus.py, and the time one check takes on an
honest summary (about 0.7 KB), on one 30 KB long and on 120 KB of adversarial text (one run
each, best of five), against the shelf seed program (121 lines). The filter runs once per
rollout, on the harness's side.

Run: python benchmarks/summary_filter.py            (about 20 seconds on 2 cores)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.archive.summary_filter import summary_code_problem
from tests.summary_corpus import HONEST_PROSE, SHELF, measure


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def before(summary: str | None, program: str | None) -> str | None:
    """The filter before issue 35, as it was in harness/search.py."""
    if not summary:
        return None
    if "```" in summary or "<solution>" in summary or "</solution>" in summary:
        return "it holds a code fence or a <solution> tag"
    if not program:
        return None
    body = _collapsed(summary)
    quoted = {
        line
        for line in (_collapsed(raw) for raw in program.splitlines())
        if len(line) >= 16 and line in body
    }
    return f"it quotes {len(quoted)} lines" if len(quoted) >= 3 else None


def _seconds(check, text: str) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        check(text, SHELF)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    honest = HONEST_PROSE["a skyline packer"]
    inputs = {
        "honest summary": honest,
        "30 KB of prose": (honest + "\n") * (30_000 // len(honest)),
        "120 KB of f(": "f(" * 60_000,
        '120 KB of """x': '"""x' * 30_000,
    }
    header = "  ".join(f"{name:>15}" for name in inputs)
    print(f"{'filter':<10} {'precision':>9} {'recall':>7}  {header}")
    for name, check in (("before", before), ("now", summary_code_problem)):
        precision, recall, _, _ = measure(check)
        times = "  ".join(f"{_seconds(check, text) * 1000:>12.2f} ms" for text in inputs.values())
        print(f"{name:<10} {precision:>9.3f} {recall:>7.3f}  {times}")


if __name__ == "__main__":
    main()
