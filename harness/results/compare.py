"""Runs compared by arm: best-so-far curves over a budget axis, intervals over seeds, pure.

A `Curve` is one run's best so far after each step, with the budget spent by then on every axis
(`step`, `rollouts`, `usd`, `tokens`). Curves come from a state directory (`curve_of_run`), an
exported results directory (`curve_of_export`) or the reference's published records (a
single-seed arm). `compare` groups curves by arm, refuses to mix tasks, suites or score
directions, and computes, on a common x grid, the mean best so far across seeds with a 95 %
percentile-bootstrap interval over seeds; `final_table` and `pairwise` do the same for the final
bests. The bootstrap is seeded, so the numbers are reproducible. Nothing here draws or writes.

What is pooled: runs are seeds of one group only when everything but the run seed is the same
(`IDENTITY_KEYS`: arm, selection, mode, task text, grid, steps, models, token limits, LoRA
rank); two runs of one group that differ are refused naming the key, unless the key is one
they are grouped by (`by=("arm", "steps")` makes `unguided, steps 3` and `unguided, steps 1`
two groups), and two runs of one group with the same seed are refused. Groups whose budgets
differ are compared at the common budget (the least every run reached, `common_budget`), and
the figure says so.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.observe.cost import PriceTable
from harness.results.inspection import run_suite
from harness.results.records import models, run_usage
from harness.results.run_view import RunView
from harness.results.score_trajectory import TrajectoryRow, seed_entry, trajectory

AXES = ("step", "rollouts", "usd", "tokens")
AXIS_LABELS = {
    "step": "step (0-based)",
    "rollouts": "rollouts sampled",
    "usd": "cost (USD)",
    "tokens": "tokens (executor + guidance)",
}
CONFIDENCE = 0.95
INTERVAL_METHOD = (
    "95% percentile bootstrap over seeds ({resamples} resamples of the seeds, mean of each)"
)


@dataclass(frozen=True)
class Point:
    """A run after step `step`: its best so far and what it had spent by then."""

    step: int
    rollouts: int
    tokens: int
    usd: float | None
    best: float

    def x(self, axis: str) -> float | None:
        value = getattr(self, axis)
        return None if value is None else float(value)


@dataclass(frozen=True)
class Curve:
    """One run: its arm, seed and labels, the seed's score and one point per committed step."""

    arm: str
    seed: int | None
    run: str
    task: str
    suite: str | None
    direction: str
    seed_score: float
    points: tuple[Point, ...]
    models: str = ""  # `guidance / executor`, so stand-ins are named on the figure
    #: What makes the run what it is, but its seed (`IDENTITY_KEYS`); empty for a record
    #: that does not say (the reference's published run).
    settings: tuple[tuple[str, Any], ...] = ()

    def setting(self, key: str) -> Any:
        return dict(self.settings).get(key)

    @property
    def final(self) -> float:
        return self.points[-1].best if self.points else self.seed_score

    @property
    def rollouts(self) -> int:
        return self.points[-1].rollouts if self.points else 0

    @property
    def usd(self) -> float | None:
        return self.points[-1].usd if self.points else 0.0


#: The settings two runs must share to be seeds of one arm (the task and suite are checked by
#: `check_comparable`); `--by` may name any of them to group by it instead.
IDENTITY_KEYS = (
    "arm",
    "mode",
    "task_text",
    "grid",
    "steps",
    "models",
    "guidance_max_tokens",
    "sequence_length",
    "lora_rank",
    "reasoning_effort",
)


def arm_label(arm: str | None, selection: str | None) -> str:
    """`guidance-ttt`, `unguided/greedy`, …: the arm with a non-default parent selection."""
    name = arm or "guidance-ttt"
    if name == "best-of-n" or selection in (None, "puct", "seed"):
        return name
    return f"{name}/{selection}"


def _points(
    rows: Sequence[TrajectoryRow], usage: Sequence[tuple[int, float | None]] | None
) -> tuple[Point, ...]:
    points, rollouts, tokens, usd = [], 0, 0, 0.0
    for index, row in enumerate(rows[1:]):
        rollouts += row.sampled_rollouts
        step_tokens, step_usd = usage[index] if usage and index < len(usage) else (0, None)
        tokens += int(step_tokens)
        usd = None if usd is None or step_usd is None else usd + step_usd
        points.append(Point(row.update - 1, rollouts, tokens, usd, row.cumulative_best))
    return tuple(points)


def curve_of_run(view: RunView, prices: PriceTable, arm_name: str | None = None) -> Curve:
    """The curve of a run's committed steps, read from its state directory."""
    seed = seed_entry(view.archive)
    task = seed.problem_id
    rows = trajectory(view.archive, task, view.committed_step)
    identity = view.resume.identity if view.resume else None
    started = view.events_of("run_started")
    last = started[-1] if started else {}
    arm = getattr(identity, "arm", None) or last.get("arm")
    selection = getattr(identity, "parent_selection", None) or last.get("parent_selection")
    run_seed = getattr(identity, "run_seed", None)
    run_seed = last.get("run_seed") if run_seed is None else run_seed
    guide, executor = models(view)
    model_text = f"{'none' if arm in ('unguided', 'best-of-n') else guide} / {executor}"
    per_step = run_usage(view, in_flight=False)
    usage = []
    for step in range(view.committed_step + 1):
        used = per_step.get(step)
        if used is None:
            usage.append((0, 0.0))
            continue
        estimate = prices.estimate(used.by_model(guide, executor))
        tokens = used.executor.total_tokens + used.guidance.total_tokens
        usage.append((tokens, None if estimate.unpriced else estimate.usd))
    return Curve(
        arm_name or arm_label(arm, selection),
        None if run_seed is None else int(run_seed),
        view.state_dir.resolve().name,
        task,
        run_suite(view),
        view.direction,
        rows[0].cumulative_best,
        _points(rows, usage),
        model_text,
        _settings(
            arm=arm_label(arm, selection),
            mode=getattr(identity, "mode", None) or last.get("mode"),
            task_text=getattr(identity, "task_text", None) or last.get("task_text"),
            grid=f"{view.archive.config.groups_per_batch}x{view.archive.config.rollout_n}",
            steps=view.committed_step + 1,
            models=model_text,
            guidance_max_tokens=getattr(identity, "guidance_max_tokens", None),
            sequence_length=getattr(identity, "sequence_length", None),
            lora_rank=getattr(identity, "lora_rank", None),
            reasoning_effort=getattr(identity, "gpt_oss_reasoning_effort", None),
        ),
    )


def curve_of_record(
    record: Mapping[str, Any], rows: Sequence[TrajectoryRow], arm_name: str | None = None
) -> Curve:
    """The curve of one run of a `runs.json` and its `trajectory.csv` rows (an exported
    results directory, or the reference's published records)."""
    rows = sorted(rows, key=lambda r: r.update)
    if not rows or rows[0].update != 0:
        raise ValueError(f"run {record.get('run_name')}: the trajectory has no seed row")
    search = record.get("search", {})
    per_step = (record.get("usage") or {}).get("per_step")
    usage = None
    if isinstance(per_step, list):
        usage = [(int(s.get("tokens", 0)), s.get("usd")) for s in per_step]
    seed = record.get("run_seed")
    training = record.get("training") or {}
    model_text = " / ".join(
        str((record.get("models") or {}).get(k, "?")) for k in ("guidance", "executor")
    )
    if record.get("arm") in ("unguided", "best-of-n"):
        model_text = "none / " + str((record.get("models") or {}).get("executor", "?"))
    grid = (search.get("groups_per_update"), search.get("rollouts_per_group"))
    return Curve(
        arm_name or arm_label(record.get("arm"), record.get("parent_selection")),
        None if seed is None else int(seed),
        str(record.get("run_name") or record.get("task")),
        str(record.get("task")),
        record.get("suite"),
        str(search.get("score_direction", "max")),
        rows[0].cumulative_best,
        _points(rows, usage),
        model_text,
        _settings(
            arm=arm_name or arm_label(record.get("arm"), record.get("parent_selection")),
            mode=record.get("mode"),
            task_text=record.get("task_text"),
            grid=None if None in grid else f"{grid[0]}x{grid[1]}",
            steps=len(rows) - 1,
            models=model_text,
            guidance_max_tokens=training.get("guidance_max_tokens"),
            sequence_length=training.get("sequence_length"),
            lora_rank=training.get("lora_rank"),
            reasoning_effort=None,
        ),
    )


def _settings(**values: Any) -> tuple[tuple[str, Any], ...]:
    return tuple((key, values[key]) for key in IDENTITY_KEYS)


# --- statistics ------------------------------------------------------------------------------


def bootstrap_interval(
    values: Sequence[float], resamples: int, rng: random.Random
) -> tuple[float, float]:
    """The 95 % percentile-bootstrap interval of the mean of `values` (resampled with
    replacement); a single value is its own interval."""
    if len(values) == 1:
        return values[0], values[0]
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(resamples))
    return _percentiles(means)


def best_at(curve: Curve, axis: str, x: float) -> float | None:
    """The curve's best so far once `x` of `axis` was spent (the seed's before its first step);
    None past the curve's end or where the axis is unknown."""
    xs = [p.x(axis) for p in curve.points]
    if not xs or any(v is None for v in xs) or x > xs[-1]:  # type: ignore[operator]
        return None
    best = curve.seed_score
    for point, value in zip(curve.points, xs, strict=True):
        if value is not None and value <= x:
            best = point.best
    return best


@dataclass(frozen=True)
class ArmCurve:
    """One arm on the common x grid: every seed's curve and the mean with its interval (None
    where fewer than one seed reached that x)."""

    arm: str
    curves: tuple[Curve, ...]
    xs: tuple[float, ...]
    mean: tuple[float | None, ...]
    low: tuple[float | None, ...]
    high: tuple[float | None, ...]


@dataclass(frozen=True)
class Comparison:
    """Everything `guidance-ttt compare` shows."""

    task: str
    suite: str | None
    direction: str
    axis: str
    resamples: int
    arms: tuple[ArmCurve, ...]
    table: tuple[dict[str, Any], ...]
    differences: tuple[dict[str, Any], ...] = field(default=())
    #: The budget (on `axis`) every run reached, where the runs' budgets differ: the final
    #: table and the differences are taken there. None when every run spent the same.
    common_budget: float | None = None
    by: tuple[str, ...] = ("arm",)

    @property
    def method(self) -> str:
        return INTERVAL_METHOD.format(resamples=self.resamples)

    @property
    def small_sample_note(self) -> str | None:
        """Where an arm has fewer than `INDICATIVE_BELOW` seeds: its intervals are indicative
        (a bootstrap over so few seeds is narrow, zero-width when they agree), with each n."""
        small = [(arm.arm, len(arm.curves)) for arm in self.arms]
        if all(n >= INDICATIVE_BELOW for _, n in small):
            return None
        shown = ", ".join(f"{name} n={n}" for name, n in small)
        return (
            f"fewer than {INDICATIVE_BELOW} seeds per arm ({shown}): the intervals are "
            "indicative only; an interval that excludes 0 is not yet a finding"
        )

    @property
    def budget_note(self) -> str | None:
        """`final bests compared at step 0, the budget every run reached` where budgets differ."""
        if self.common_budget is None:
            return None
        x = self.common_budget
        shown = f"{x:g}" if self.axis != "usd" else f"${x:,.2f}"
        axis = AXIS_LABELS[self.axis]
        return f"final bests compared at {axis} {shown}, the budget every run reached"


#: Below this many seeds in an arm, its intervals are shown as indicative.
INDICATIVE_BELOW = 5


def check_comparable(curves: Sequence[Curve]) -> tuple[str, str | None, str]:
    """The task, suite and direction all `curves` share; `ValueError` naming what differs."""
    for name, attr in (("tasks", "task"), ("suites", "suite"), ("directions", "direction")):
        if len({getattr(c, attr) for c in curves}) > 1:
            listed = ", ".join(f"{c.run}: {getattr(c, attr)}" for c in curves)
            raise ValueError(
                f"the runs mix {name} ({listed}); compare only runs of one task judged on one "
                "suite (docs/frozen.md, 'One suite per comparison')"
            )
    if not curves:
        raise ValueError("no runs to compare")
    first = curves[0]
    return first.task, first.suite, first.direction


def group_label(curve: Curve, by: Sequence[str]) -> str:
    """The group a curve is pooled into: its arm, then `key value` for every other `by` key."""
    extra = [f"{key.replace('_', ' ')} {curve.setting(key)}" for key in by if key != "arm"]
    return ", ".join([curve.arm, *extra])


def pool(curves: Sequence[Curve], by: Sequence[str] = ("arm",)) -> dict[str, list[Curve]]:
    """The curves grouped by `by` (group order: as first seen). `ValueError` naming the key
    when two runs of one group differ in anything but their seed (`IDENTITY_KEYS`), and naming
    the seed when two runs of one group share it."""
    unknown = [key for key in by if key not in IDENTITY_KEYS]
    if unknown or "arm" not in by:
        raise ValueError(
            f"--by {','.join(by)}: group by arm and any of {', '.join(IDENTITY_KEYS[1:])} "
            "(e.g. --by arm,steps)"
        )
    groups: dict[str, list[Curve]] = {}
    for curve in curves:
        groups.setdefault(group_label(curve, by), []).append(curve)
    for label, members in groups.items():
        first = members[0]
        for other in members[1:]:
            for key in IDENTITY_KEYS:
                mine, theirs = first.setting(key), other.setting(key)
                if key in by or mine is None or theirs is None or mine == theirs:
                    continue
                raise ValueError(
                    f"{first.run} and {other.run} ({label}) differ in {key}: {mine} vs "
                    f"{theirs}, so they are not seeds of one arm; compare runs that differ only "
                    f"in their seed, or group by it: --by {','.join([*by, key])}"
                )
        seen: dict[int | None, str] = {}
        for curve in members:
            if curve.seed in seen and len(members) > 1:
                raise ValueError(
                    f"{seen[curve.seed]} and {curve.run} ({label}) both have run seed "
                    f"{curve.seed}: the same seed twice is one sample counted twice; give each "
                    "run of an arm its own seed"
                )
            seen[curve.seed] = curve.run
    return groups


def _last_x(curve: Curve, axis: str) -> float:
    return float(curve.points[-1].x(axis) or 0.0) if curve.points else 0.0


def final_at(curve: Curve, axis: str, budget: float | None) -> float:
    """The curve's final best, or its best at `budget` when the budgets differ."""
    if budget is None:
        return curve.final
    value = best_at(curve, axis, budget)
    return curve.final if value is None else value


def compare(
    curves: Sequence[Curve],
    axis: str,
    resamples: int = 2000,
    seed: int = 0,
    by: Sequence[str] = ("arm",),
) -> Comparison:
    """Pool `curves` into groups (`pool`: by arm, or by arm and other `by` keys) and compute the
    curves, the final table and the pairwise differences of final bests (group order: as first
    seen), the finals at the common budget where the runs' budgets differ."""
    if axis not in AXES:
        raise ValueError(f"x axis {axis!r} is not one of {', '.join(AXES)}")
    task, suite, direction = check_comparable(curves)
    if axis == "usd":
        unpriced = [c.run for c in curves if any(p.usd is None for p in c.points)]
        if unpriced:
            raise ValueError(
                f"no cost for {', '.join(unpriced)} (a model without a price); compare over "
                "tokens or rollouts, or give the prices with --pricing"
            )
    rng = random.Random(seed)
    by_arm = pool(curves, by)
    ends = {_last_x(c, axis) for c in curves}
    budget = min(ends) if len(ends) > 1 else None
    grid = sorted({0.0} | {float(p.x(axis) or 0.0) for c in curves for p in c.points})
    if axis == "step":
        grid = sorted({float(p.step) for c in curves for p in c.points})
    arm_curves = []
    for arm, members in by_arm.items():
        means, lows, highs = [], [], []
        for x in grid:
            values = [v for c in members if (v := best_at(c, axis, x)) is not None]
            if len(values) < len(members) or not values:  # a mean only where every seed is
                means.append(None)
                lows.append(None)
                highs.append(None)
                continue
            low, high = bootstrap_interval(values, resamples, rng)
            means.append(statistics.fmean(values))
            lows.append(low)
            highs.append(high)
        arm_curves.append(
            ArmCurve(arm, tuple(members), tuple(grid), tuple(means), tuple(lows), tuple(highs))
        )
    finals = {a: [final_at(c, axis, budget) for c in members] for a, members in by_arm.items()}
    table = tuple(
        _row(arm, members, finals[arm], resamples, rng) for arm, members in by_arm.items()
    )
    differences = tuple(
        _difference(a, finals[a], b, finals[b], resamples, rng)
        for i, a in enumerate(by_arm)
        for b in list(by_arm)[i + 1 :]
    )
    return Comparison(
        task,
        suite,
        direction,
        axis,
        resamples,
        tuple(arm_curves),
        table,
        differences,
        budget,
        tuple(by),
    )


def _row(
    arm: str,
    members: Sequence[Curve],
    finals: Sequence[float],
    resamples: int,
    rng: random.Random,
) -> dict:
    low, high = bootstrap_interval(finals, resamples, rng)
    costs = [c.usd for c in members]
    return {
        "arm": arm,
        "seeds": len(members),
        "final_best_mean": statistics.fmean(finals),
        "ci_low": low,
        "ci_high": high,
        "final_best_median": statistics.median(finals),
        "rollouts_mean": statistics.fmean(c.rollouts for c in members),
        "cost_usd_mean": None if None in costs else statistics.fmean(costs),  # type: ignore[arg-type]
        "runs": [c.run for c in members],
    }


def _difference(
    a: str,
    xs: Sequence[float],
    b: str,
    ys: Sequence[float],
    resamples: int,
    rng: random.Random,
) -> dict:
    """Mean final best of `a` minus that of `b`, with a 95 % bootstrap interval (seeds of each
    arm resampled independently)."""
    diffs = sorted(
        statistics.fmean(rng.choices(xs, k=len(xs))) - statistics.fmean(rng.choices(ys, k=len(ys)))
        for _ in range(resamples)
    )
    low, high = _percentiles(diffs)
    return {
        "arm": a,
        "minus": b,
        "difference": statistics.fmean(xs) - statistics.fmean(ys),
        "ci_low": low,
        "ci_high": high,
    }


def _percentiles(ordered: Sequence[float]) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of a sorted sample (nearest rank, outward)."""
    last = len(ordered) - 1
    return ordered[math.floor((1 - CONFIDENCE) / 2 * last)], ordered[
        math.ceil((1 + CONFIDENCE) / 2 * last)
    ]
