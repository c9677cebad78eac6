"""GPU MODE's timing arithmetic: per-benchmark statistics, the stopping rule, the geometric mean.

Pure functions on durations in nanoseconds. The rule is that of GPU MODE's evaluator
(github.com/gpu-mode/reference-kernels, problems/bioml/trimul/eval.py, leaderboard mode):
after each timed call, once there are at least `min_repeats` durations, stop when the mean's
relative standard error (std / sqrt(n) / mean, std with n - 1) is below `target_error`, or
when mean x runs exceeds the time budget, or the benchmark's wall clock exceeds its budget;
never more than `max_repeats` calls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Stats:
    """A benchmark's durations summarised as GPU MODE reports them (all in nanoseconds)."""

    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float

    def to_json(self) -> dict[str, float | int]:
        """The record's figures, in microseconds (our unit for TriMul's raw score)."""
        return {
            "runs": self.runs,
            "meanUs": self.mean / 1e3,
            "stdUs": self.std / 1e3,
            "errUs": self.err / 1e3,
            "bestUs": self.best / 1e3,
            "worstUs": self.worst / 1e3,
        }


def stats(durations: Sequence[float]) -> Stats:
    """Mean, sample standard deviation (n - 1), standard error of the mean, best and worst.

    One duration has std 0 (GPU MODE divides by zero there; we never stop on fewer than 3)."""
    if not durations:
        raise ValueError("no durations to summarise")
    runs = len(durations)
    mean = math.fsum(durations) / runs
    variance = math.fsum((d - mean) ** 2 for d in durations) / (runs - 1) if runs > 1 else 0.0
    std = math.sqrt(variance)
    return Stats(
        runs, mean, std, std / math.sqrt(runs), float(min(durations)), float(max(durations))
    )


@dataclass(frozen=True)
class StoppingRule:
    """When a benchmark has enough timed calls (see the module docstring)."""

    min_repeats: int = 3
    max_repeats: int = 100
    target_error: float = 1e-3
    time_budget_ns: float = 30e9
    wall_budget_ns: float = 120e9

    def done(self, durations: Sequence[float], wall_ns: float) -> bool:
        """Whether to stop after these durations, `wall_ns` into the benchmark."""
        if len(durations) >= self.max_repeats:
            return True
        if len(durations) < self.min_repeats:
            return False
        summary = stats(durations)
        return (
            summary.err / summary.mean < self.target_error
            or summary.mean * summary.runs > self.time_budget_ns
            or wall_ns > self.wall_budget_ns
        )


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(log v)) of positive values; ValueError naming the first that is not."""
    if not values:
        raise ValueError("no values for a geometric mean")
    for value in values:
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"a geometric mean needs positive finite values, got {value!r}")
    return math.exp(math.fsum(math.log(value) for value in values) / len(values))


def combine_seed(seed: int, secret: int) -> int:
    """GPU MODE's Cantor-style combination of a public case seed with a secret one, so the
    timed repeats' inputs cannot be known in advance: `a + (a + b)(a + b + 1) / 2`."""
    return seed + (seed + secret) * (seed + secret + 1) // 2
