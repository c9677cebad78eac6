"""`guidance-ttt compare`'s statistics and files on hand-made curves (the full experiment runs in
tests/harness/test_experiment.py): the mean and the percentile-bootstrap interval over seeds, the
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

REPO = Path(__file__).resolve().parents[2]


def curve(
    arm: str,
    seed: int,
    bests: list[float],
    *,
    suite: str = "generated:1:2",
    run: str | None = None,
    models: str = "",
    **settings: object,
) -> Curve:
    points = tuple(
        Point(step, (step + 1) * 4, (step + 1) * 1000, (step + 1) * 0.5, best)
        for step, best in enumerate(bests)
    )
    identity = {"arm": arm, "grid": "1x2", "steps": len(bests), "models": models, **settings}
    return Curve(
        arm,
        seed,
        run or f"{arm}-s{seed}",
        "polyomino_packing",
        suite,
        "max",
        10.0,
        points,
        models,
        tuple(identity.items()),
    )


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
    assert drawn.legend == ["guidance-ttt (n=3)", "best-of-n (n=3)", "seed 10.0000"]
    assert drawn.baselines == [10.0] and drawn.notes == [result.small_sample_note]
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


def test_two_runs_with_the_same_seed_are_refused_naming_the_seed() -> None:
    twice = [curve("unguided", 0, [12.0, 13.0]), curve("unguided", 0, [12.0, 14.0], run="again")]
    with pytest.raises(
        ValueError, match=r"unguided-s0 and again \(unguided\) both have run seed 0"
    ):
        compare(twice, "step")


def test_runs_with_different_steps_are_refused_naming_the_key_or_grouped_by_it() -> None:
    """The case of the issue: one seed, 3 steps and 1 step; not two seeds of one arm."""
    mixed = [curve("unguided", 0, [12.0, 13.0, 15.0]), curve("unguided", 0, [12.0], run="short")]
    with pytest.raises(ValueError) as refused:
        compare(mixed, "step")
    message = str(refused.value)
    assert "differ in steps: 3 vs 1" in message and "--by arm,steps" in message
    grouped = compare(mixed, "step", resamples=50, by=("arm", "steps"))
    assert [row["arm"] for row in grouped.table] == ["unguided, steps 3", "unguided, steps 1"]
    assert [row["seeds"] for row in grouped.table] == [1, 1]
    # Unequal budgets: the finals are taken at the budget both reached (step 0), and said so.
    assert grouped.common_budget == 0.0
    assert [row["final_best_mean"] for row in grouped.table] == [12.0, 12.0]
    assert grouped.budget_note == (
        "final bests compared at step (0-based) 0, the budget every run reached"
    )


@pytest.mark.parametrize("key", ["grid", "models", "mode", "lora_rank"])
def test_runs_that_differ_in_any_identity_key_are_not_pooled(key: str) -> None:
    runs = [curve("unguided", 0, [12.0], **{key: "a"}), curve("unguided", 1, [13.0], **{key: "b"})]
    with pytest.raises(ValueError, match=rf"differ in {key}: a vs b.*--by arm,{key}"):
        compare(runs, "step")


def test_an_unknown_grouping_key_is_refused() -> None:
    with pytest.raises(ValueError, match="--by arm,colour: group by arm and any of"):
        compare(CURVES, "step", by=("arm", "colour"))


def test_coinciding_arms_stay_visible_and_are_labelled(tmp_path: Path) -> None:
    """Two arms whose curves are identical (and whose seeds agree): each has its own line style
    and marker, the legend says `identical to` and `all seeds identical`, and the seed's score
    is the baseline; on a budget axis x starts at 0."""
    runs = [
        curve("unguided", 0, [12.0, 14.0], models="none / exec-a"),
        curve("unguided", 1, [12.0, 14.0], models="none / exec-a"),
        curve("best-of-n", 0, [12.0, 14.0], models="none / exec-b"),
        curve("best-of-n", 1, [12.0, 14.0], models="none / exec-b"),
        curve("guidance-ttt", 0, [13.0, 15.0], models="guide / exec-a"),
        curve("guidance-ttt", 1, [12.0, 16.0], models="guide / exec-a"),
    ]
    for axis in ("step", "rollouts"):
        result = compare(runs, axis, resamples=50)
        drawn = draw(result, tmp_path / f"{axis}.png")
        assert drawn.mean_lines["unguided"] == drawn.mean_lines["best-of-n"]
        assert len(set(drawn.styles.values())) == 3
        assert drawn.legend[:3] == [
            "unguided (n=2, models none / exec-a, all seeds identical)",
            "best-of-n (n=2, models none / exec-b, all seeds identical, identical to unguided)",
            "guidance-ttt (n=2, models guide / exec-a)",
        ]
        assert drawn.baselines == [10.0] and drawn.legend[3] == "seed 10.0000"
        if axis == "rollouts":
            assert drawn.xlim[0] == 0.0


def test_fewer_than_five_seeds_per_arm_reads_as_indicative_and_shows_n(tmp_path: Path) -> None:
    """Three seeds an arm: the printed table, the differences and the figure say the intervals
    are indicative and show each arm's n; five seeds an arm need no such note."""
    from io import StringIO

    from rich.console import Console

    from harness.cli.compare import render

    result = compare(CURVES, "step", resamples=200)
    out = StringIO()
    render(result, Console(file=out, width=200))
    printed = out.getvalue()
    assert "(n=3 vs n=3)" in printed
    assert "fewer than 5 seeds per arm (guidance-ttt n=3, best-of-n n=3)" in printed
    assert "indicative only" in printed
    assert any("indicative only" in note for note in draw(result, tmp_path / "c.png").notes)
    many = [curve(arm, seed, [10.0 + seed, 11.0 + seed]) for arm in ("a", "b") for seed in range(5)]
    assert compare(many, "step", resamples=50).small_sample_note is None
