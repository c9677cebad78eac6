"""`guidance-ttt compare`'s statistics and files on hand-made curves (the full experiment runs in
tests/test_experiment.py): the mean and the percentile-bootstrap interval over seeds, the
budget axes, the refusal to mix tasks or suites, the figure's data read back from its artists,
and the CSVs a reader re-plots from."""

from __future__ import annotations

import csv
import random
import statistics
from pathlib import Path

import pytest

from harness.cli.compare import (
    CSV_FIELDS,
    draw,
    reference_curve,
    table_rows,
    write_csv,
    write_table,
)
from harness.results.compare import Curve, Point, best_at, bootstrap_interval, compare

REPO = Path(__file__).resolve().parents[1]


def curve(arm: str, seed: int, bests: list[float], *, suite: str = "generated:1:2") -> Curve:
    points = tuple(
        Point(step, (step + 1) * 4, (step + 1) * 1000, (step + 1) * 0.5, best)
        for step, best in enumerate(bests)
    )
    return Curve(arm, seed, f"{arm}-s{seed}", "polyomino_packing", suite, "max", 10.0, points)


CURVES = [
    curve("guidance-ttt", 0, [12.0, 15.0, 18.0]),
    curve("guidance-ttt", 1, [11.0, 14.0, 20.0]),
    curve("guidance-ttt", 2, [13.0, 13.0, 16.0]),
    curve("best-of-n", 0, [11.0, 11.0, 12.0]),
    curve("best-of-n", 1, [10.0, 12.0, 12.0]),
    curve("best-of-n", 2, [10.0, 10.0, 11.0]),
]


def test_the_interval_is_a_percentile_bootstrap_of_the_mean_over_seeds() -> None:
    values = [16.0, 18.0, 20.0]
    low, high = bootstrap_interval(values, 4000, random.Random(1))
    assert 16.0 <= low < statistics.fmean(values) < high <= 20.0
    assert bootstrap_interval([5.0], 100, random.Random(1)) == (5.0, 5.0)
    # Resampling the seeds: the interval can never leave the range of seed means.
    assert low >= min(values) and high <= max(values)


def test_arms_are_compared_by_mean_final_best_and_pairwise_difference() -> None:
    result = compare(CURVES, "step", resamples=2000)
    table = {row["arm"]: row for row in result.table}
    assert table["guidance-ttt"]["seeds"] == 3
    assert table["guidance-ttt"]["final_best_mean"] == pytest.approx(18.0)
    assert table["guidance-ttt"]["final_best_median"] == 18.0
    assert table["best-of-n"]["final_best_mean"] == pytest.approx(35 / 3)
    assert table["guidance-ttt"]["rollouts_mean"] == 12
    assert table["guidance-ttt"]["cost_usd_mean"] == pytest.approx(1.5)
    (diff,) = result.differences
    assert (diff["arm"], diff["minus"]) == ("guidance-ttt", "best-of-n")
    assert diff["difference"] == pytest.approx(18.0 - 35 / 3)
    assert 0 < diff["ci_low"] < diff["difference"] < diff["ci_high"]
    assert "bootstrap over seeds" in result.method and "2000 resamples" in result.method
    arm = result.arms[0]
    assert arm.xs == (0.0, 1.0, 2.0)
    assert arm.mean == pytest.approx((12.0, 14.0, 18.0))


def test_a_budget_axis_takes_each_runs_best_once_that_much_was_spent() -> None:
    run = CURVES[0]
    assert best_at(run, "rollouts", 0) == 10.0  # nothing spent yet: the seed
    assert best_at(run, "rollouts", 7) == 12.0  # after the first step's 4
    assert best_at(run, "tokens", 3000) == 18.0
    assert best_at(run, "usd", 1.6) is None, "past the run's end nothing is claimed"
    result = compare(CURVES, "usd", resamples=200)
    assert result.arms[0].xs[0] == 0.0 and result.arms[0].mean[0] == 10.0


def test_runs_of_two_suites_or_tasks_are_refused_naming_them() -> None:
    mixed = [*CURVES[:2], curve("unguided", 0, [12.0], suite="public")]
    with pytest.raises(ValueError, match=r"mix suites.*unguided-s0: public"):
        compare(mixed, "step")


def test_the_figure_and_the_csvs_hold_the_curves(tmp_path: Path) -> None:
    result = compare(CURVES, "step", resamples=500)
    drawn = draw(result, tmp_path / "compare.png")
    assert drawn.png.stat().st_size > 0
    assert drawn.mean_lines["guidance-ttt"] == [(0.0, 12.0), (1.0, 14.0), (2.0, 18.0)]
    assert drawn.seed_lines == {"guidance-ttt": 3, "best-of-n": 3}
    assert set(drawn.bands) == {"guidance-ttt", "best-of-n"}
    assert "polyomino_packing" in drawn.title and "generated:1:2" in drawn.title
    assert "higher is better" in drawn.title and result.method in drawn.title
    assert drawn.xlabel == "step (0-based)" and "higher is better" in drawn.ylabel
    assert drawn.legend == ["guidance-ttt (n=3)", "best-of-n (n=3)"]
    write_csv(result, tmp_path / "compare.csv")
    write_table(result, tmp_path / "compare-table.csv")
    with (tmp_path / "compare.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == CSV_FIELDS
    seeds = [r for r in rows if r["kind"] == "seed" and r["run"] == "guidance-ttt-s1"]
    assert [float(r["best_so_far"]) for r in seeds] == [11.0, 14.0, 20.0]
    means = [r for r in rows if r["kind"] == "mean" and r["arm"] == "guidance-ttt"]
    assert [float(r["mean"]) for r in means] == pytest.approx([12.0, 14.0, 18.0])
    assert all(float(r["ci_low"]) <= float(r["mean"]) <= float(r["ci_high"]) for r in means)
    table = table_rows(tmp_path / "compare-table.csv")
    assert [r["kind"] for r in table] == ["final", "final", "difference"]
    assert all(r["method"] == result.method for r in table)


def test_the_published_reference_run_is_a_single_seed_arm_on_the_public_cases() -> None:
    reference = reference_curve(REPO / "results" / "reference", "polyomino_packing")
    assert (reference.task, reference.suite, reference.seed) == (
        "polyomino_packing",
        "public",
        None,
    )
    assert reference.seed_score == pytest.approx(27.8105, abs=1e-4)
    assert reference.final == pytest.approx(89.7965, abs=1e-4)
    result = compare([reference], "rollouts", resamples=100)
    (row,) = result.table
    assert row["seeds"] == 1 and row["ci_low"] == row["ci_high"] == row["final_best_mean"]
