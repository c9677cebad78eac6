"""`guidance-ttt compare RUN... [--by arm] [--x step|rollouts|usd|tokens]`: runs grouped by arm.

Each RUN is a state directory, an exported results directory (`runs.json` + `trajectory.csv`),
an experiment directory (`experiment.json`: its runs), or `reference` (the reference's
published run of the same task, a single-seed arm; it was judged on the public cases, so it
compares only with runs judged there). Runs of different tasks, suites or score directions are
refused.

It writes three files and prints the table:

- the PNG: per arm, the mean best so far across seeds with its 95 % bootstrap interval (a
  shaded band; the method is written on the figure) and every seed's curve faint underneath,
  labelled with task, suite, direction and the budget axis;
- `<name>.csv`: every curve a reader can re-plot (`kind` `seed` rows: one per run and point;
  `kind` `mean` rows: the arm's mean and interval on the common grid);
- `<name>-table.csv`: per arm n seeds, final best mean with its interval, median, rollouts and
  cost; then the pairwise differences of the final bests with their intervals.

`draw` returns what it drew, read back from the figure's artists, so tests check the figure.
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness import results
from harness.adapters.judge.suites import PUBLIC
from harness.experiment.index import EXPERIMENT_FILE
from harness.observe.cost import PriceTable, load_prices
from harness.results.compare import (
    AXIS_LABELS,
    Comparison,
    Curve,
    compare,
    curve_of_record,
    curve_of_run,
)
from harness.settings.paths import REFERENCE_DIR
from harness.storage.state_files import exists, read_json_object

REFERENCE_ARM = "reference (published, one seed)"
CSV_FIELDS = ("kind", "arm", "run", "seed", "axis", "x", "best_so_far", "mean", "ci_low", "ci_high")


def experiment_runs(directory: Path) -> list[Path]:
    """The state directories of an experiment directory's runs, in plan order."""
    document = read_json_object(Path(directory) / EXPERIMENT_FILE)
    return [Path(directory) / str(run["dir"]) for run in document.get("runs", [])]


def load_curves(sources: list[str], prices: PriceTable, reference_dir: Path) -> list[Curve]:
    """The curves of every source (see the module docstring); `reference` is matched to the
    other runs' task last."""
    curves: list[Curve] = []
    want_reference = False
    for source in sources:
        if source == "reference":
            want_reference = True
            continue
        path = Path(source)
        if exists(path / EXPERIMENT_FILE):
            for run_dir in experiment_runs(path):
                if results.find_store(run_dir) is not None:
                    curves.append(curve_of_run(results.load_run(run_dir), prices))
        elif exists(path / "runs.json") and exists(path / "trajectory.csv"):
            rows = results.read_trajectory_csv(path / "trajectory.csv")
            for record in results.read_runs_json(path / "runs.json"):
                mine = [r for r in rows if r.task == record.get("task")]
                curves.append(curve_of_record(record, mine))
        else:
            curves.append(curve_of_run(results.load_run(path), prices))
    if want_reference:
        curves.append(reference_curve(reference_dir, curves[0].task if curves else None))
    return curves


def reference_curve(directory: Path, task: str | None) -> Curve:
    """The published reference run of `task` as a single-seed arm (suite `public`)."""
    runs = results.read_runs_json(Path(directory) / "runs.json")
    chosen = [r for r in runs if task is None or task in (r.get("task"), r.get("task_id"))]
    if not chosen:
        names = sorted(str(r.get("task_id") or r.get("task")) for r in runs)
        raise ValueError(f"{directory} has no reference run of task {task!r} (it has {names})")
    record = dict(chosen[0])
    rows = [
        r
        for r in results.read_trajectory_csv(Path(directory) / "trajectory.csv")
        if r.task == record["task"]
    ]
    record.update(task=record.get("task_id") or record["task"], suite=PUBLIC, run_seed=None)
    rows = [results.TrajectoryRow(str(record["task"]), *tuple(vars(r).values())[1:]) for r in rows]
    return curve_of_record(record, rows, arm_name=REFERENCE_ARM)


@dataclass(frozen=True)
class Drawn:
    """What the figure shows, read back from its artists."""

    png: Path
    mean_lines: dict[str, list[tuple[float, float]]]
    seed_lines: dict[str, int]
    bands: dict[str, int]
    title: str
    xlabel: str
    ylabel: str
    legend: list[str]


def draw(comparison: Comparison, path: Path) -> Drawn:
    """The figure of `comparison` at `path` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(9, 5.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    mean_lines: dict[str, list[tuple[float, float]]] = {}
    seed_lines: dict[str, int] = {}
    bands: dict[str, int] = {}
    try:
        ax.grid(alpha=0.3)
        for index, arm in enumerate(comparison.arms):
            colour = colours[index % len(colours)]
            count = 0
            for curve in arm.curves:
                xs = [0.0] + [float(p.x(comparison.axis) or 0.0) for p in curve.points]
                ys = [curve.seed_score] + [p.best for p in curve.points]
                if comparison.axis == "step":
                    xs, ys = xs[1:], ys[1:]
                ax.plot(xs, ys, drawstyle="steps-post", color=colour, alpha=0.25, linewidth=1)
                count += 1
            seed_lines[arm.arm] = count
            known = [
                (x, m, lo, hi)
                for x, m, lo, hi in zip(arm.xs, arm.mean, arm.low, arm.high, strict=True)
                if m is not None
            ]
            if not known:
                continue
            xs = [k[0] for k in known]
            (line,) = ax.plot(
                xs,
                [k[1] for k in known],
                drawstyle="steps-post",
                color=colour,
                linewidth=2.2,
                label=f"{arm.arm} (n={len(arm.curves)})",
            )
            mean_lines[arm.arm] = [
                (float(x), float(y))
                for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
            ]
            band = ax.fill_between(
                xs,
                [k[2] for k in known],
                [k[3] for k in known],
                step="post",
                color=colour,
                alpha=0.18,
            )
            bands[arm.arm] = len(band.get_paths())
        better = "higher" if comparison.direction == "max" else "lower"
        ax.set_xlabel(AXIS_LABELS[comparison.axis])
        ax.set_ylabel(f"best score so far ({better} is better)")
        models = sorted({c.models for arm in comparison.arms for c in arm.curves if c.models})
        ax.set_title(
            f"{comparison.task}: best so far by arm, suite {comparison.suite or 'not recorded'}, "
            f"{better} is better\nline: mean over seeds; faint: each seed; band: "
            f"{comparison.method}"
            + (f"\nmodels (guidance / executor): {'; '.join(models)}" if models else ""),
            fontsize=9,
        )
        if comparison.axis in ("step", "rollouts"):
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(loc="best", fontsize=8)
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        return Drawn(
            path,
            mean_lines,
            seed_lines,
            bands,
            ax.get_title(),
            ax.get_xlabel(),
            ax.get_ylabel(),
            [t.get_text() for t in ax.get_legend().get_texts()],
        )
    finally:
        plt.close(figure)


def write_csv(comparison: Comparison, path: Path) -> None:
    """The curves as CSV (`CSV_FIELDS`): every seed's points, then each arm's mean and interval."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(CSV_FIELDS)
        axis = comparison.axis
        for arm in comparison.arms:
            for curve in arm.curves:
                for point in curve.points:
                    writer.writerow(
                        ["seed", arm.arm, curve.run, curve.seed, axis, point.x(axis), point.best]
                        + [""] * 3
                    )
            for x, m, lo, hi in zip(arm.xs, arm.mean, arm.low, arm.high, strict=True):
                if m is not None:
                    writer.writerow(["mean", arm.arm, "", "", axis, x, "", m, lo, hi])


def write_table(comparison: Comparison, path: Path) -> None:
    """The final table and the pairwise differences as CSV."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(
            [
                "kind",
                "arm",
                "minus",
                "seeds",
                "final_best_mean",
                "ci_low",
                "ci_high",
                "final_best_median",
                "rollouts_mean",
                "cost_usd_mean",
                "method",
            ]
        )
        for row in comparison.table:
            writer.writerow(
                [
                    "final",
                    row["arm"],
                    "",
                    row["seeds"],
                    row["final_best_mean"],
                    row["ci_low"],
                    row["ci_high"],
                    row["final_best_median"],
                    row["rollouts_mean"],
                    "" if row["cost_usd_mean"] is None else row["cost_usd_mean"],
                    comparison.method,
                ]
            )
        for diff in comparison.differences:
            writer.writerow(
                [
                    "difference",
                    diff["arm"],
                    diff["minus"],
                    "",
                    diff["difference"],
                    diff["ci_low"],
                    diff["ci_high"],
                    "",
                    "",
                    "",
                    comparison.method,
                ]
            )


def render(comparison: Comparison, console: Console) -> None:
    """The final table and the differences, printed."""
    table = Table(
        title=f"{comparison.task}, suite {comparison.suite}, final best "
        f"({'higher' if comparison.direction == 'max' else 'lower'} is better)"
    )
    for column in ("arm", "seeds", "final best mean [95% CI]", "median", "rollouts", "cost"):
        table.add_column(column)
    for row in comparison.table:
        cost = row["cost_usd_mean"]
        table.add_row(
            row["arm"],
            str(row["seeds"]),
            f"{row['final_best_mean']:.4f} [{row['ci_low']:.4f}, {row['ci_high']:.4f}]",
            f"{row['final_best_median']:.4f}",
            f"{row['rollouts_mean']:.0f}",
            "unknown" if cost is None else f"${cost:,.2f}",
        )
    console.print(table)
    for diff in comparison.differences:
        console.print(
            f"{diff['arm']} − {diff['minus']}: {diff['difference']:+.4f} "
            f"[{diff['ci_low']:+.4f}, {diff['ci_high']:+.4f}]",
            markup=False,
        )
    console.print(f"intervals: {comparison.method}", markup=False)


#: The budget axes of `--x`.
X_AXES = ("step", "rollouts", "usd", "tokens")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    compare = subparsers.add_parser(
        "compare",
        help="compare runs by arm: best so far with 95 %% bootstrap intervals, table, CSV",
        description="Compare runs by arm: each arm's best so far against a budget axis, with "
        "95 %% bootstrap intervals over its seeds; a table, a PNG and a CSV of the curves.",
    )
    compare.add_argument(
        "runs",
        nargs="+",
        help="state directories, exported results directories, an experiment directory, or "
        "`reference` (the published reference run, a single-seed arm)",
    )
    compare.add_argument(
        "--by", choices=("arm",), default="arm", help="how runs are grouped (default: arm)"
    )
    compare.add_argument(
        "--x",
        choices=X_AXES,
        default="step",
        help="the budget axis: step, rollouts, usd or tokens (default: %(default)s)",
    )
    compare.add_argument(
        "-o", "--output", type=Path, default=Path("compare.png"), help="PNG (default: compare.png)"
    )
    compare.add_argument(
        "--csv", type=Path, help="CSV of the curves (default: the PNG's name with .csv)"
    )
    compare.add_argument(
        "--bootstrap", type=int, default=2000, help="bootstrap resamples (default: %(default)s)"
    )
    compare.add_argument(
        "--pricing", type=Path, help="price table for the usd axis (default: as for status)"
    )
    compare.add_argument(
        "--reference-dir",
        type=Path,
        help="folder of the published reference runs (default: the checkout's results/reference)",
    )


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    prices = load_prices(args.pricing)
    curves = load_curves(list(args.runs), prices, args.reference_dir or REFERENCE_DIR)
    comparison = compare(curves, args.x, args.bootstrap)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    csv_path = Path(args.csv) if args.csv else out.with_suffix(".csv")
    table_path = csv_path.with_name(csv_path.stem + "-table.csv")
    draw(comparison, out)
    write_csv(comparison, csv_path)
    write_table(comparison, table_path)
    render(comparison, console)
    console.print(f"wrote {out}, {csv_path} and {table_path}", soft_wrap=True, markup=False)
    return 0


def table_rows(path: Path) -> list[dict[str, Any]]:
    """A `-table.csv` read back (for tests and readers)."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
