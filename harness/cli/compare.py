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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import results
from harness.adapters.judge.suites import PUBLIC
from harness.experiment.index import EXPERIMENT_FILE
from harness.observe.cost import PriceTable, load_prices
from harness.observe.terminal import escape_terminal
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
    styles: dict[str, tuple[str, str]] = field(default_factory=dict)  # arm: (linestyle, marker)
    baselines: list[float] = field(default_factory=list)  # the seed scores drawn as lines
    xlim: tuple[float, float] = (0.0, 0.0)
    notes: list[str] = field(default_factory=list)  # text on the figure besides the title


#: Line styles and markers, one pair per arm, so arms whose curves coincide stay visible.
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _arm_labels(comparison: Comparison) -> dict[str, str]:
    """The legend text of each arm: n seeds, its models, and the notes a reader needs: `all
    seeds identical` for a zero-width interval, `identical to X` for a curve drawn over
    another's."""
    means: dict[str, tuple] = {}
    labels = {}
    for arm in comparison.arms:
        known = tuple((x, m) for x, m in zip(arm.xs, arm.mean, strict=True) if m is not None)
        models = sorted({c.models for c in arm.curves if c.models})
        parts = [f"n={len(arm.curves)}"] + (["models " + "; ".join(models)] if models else [])
        pairs = [(lo, hi) for lo, hi in zip(arm.low, arm.high, strict=True) if lo is not None]
        if len(arm.curves) > 1 and pairs and all(hi - lo == 0 for lo, hi in pairs):
            parts.append("all seeds identical")
        twin = next((other for other, line in means.items() if line == known), None)
        if twin is not None:
            parts.append(f"identical to {twin}")
        means.setdefault(arm.arm, known)
        labels[arm.arm] = f"{arm.arm} ({', '.join(parts)})"
    return labels


def draw(comparison: Comparison, path: Path) -> Drawn:
    """The figure of `comparison` at `path` (PNG): per arm its mean line (its own line style
    and marker, so an arm drawn over an identical one still shows), its interval band and every seed
    faint; the seed's score as a dashed baseline; the budget note where budgets differ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(9, 6.6))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    mean_lines: dict[str, list[tuple[float, float]]] = {}
    seed_lines: dict[str, int] = {}
    bands: dict[str, int] = {}
    styles: dict[str, tuple[str, str]] = {}
    labels = _arm_labels(comparison)
    notes: list[str] = []
    try:
        ax.grid(alpha=0.3)
        for index, arm in enumerate(comparison.arms):
            colour = colours[index % len(colours)]
            style = (LINE_STYLES[index % len(LINE_STYLES)], MARKERS[index % len(MARKERS)])
            styles[arm.arm] = style
            seed_lines[arm.arm] = _draw_seeds(ax, comparison, arm, colour)
            drawn = _draw_mean(ax, arm, index, colour, style, labels[arm.arm])
            if drawn is not None:
                mean_lines[arm.arm], bands[arm.arm] = drawn
        baselines = sorted({c.seed_score for arm in comparison.arms for c in arm.curves})
        for value in baselines:
            ax.axhline(
                value, color="0.35", linestyle=(0, (4, 3)), linewidth=1, label=f"seed {value:.4f}"
            )
        _label_axes(ax, comparison)
        if comparison.budget_note:
            notes.append(comparison.budget_note)
        if comparison.small_sample_note:
            notes.append(comparison.small_sample_note)
        for number, note in enumerate(notes):
            figure.text(0.01, 0.01 + 0.03 * number, note, fontsize=8, ha="left", va="bottom")
        # Below the axes, so it never hides a curve or the baseline.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, frameon=False)
        figure.tight_layout(rect=(0, 0.04 * len(notes), 1, 1))
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
            styles,
            baselines,
            tuple(float(v) for v in ax.get_xlim()),  # type: ignore[arg-type]
            notes,
        )
    finally:
        plt.close(figure)


def _draw_seeds(ax: Any, comparison: Comparison, arm: Any, colour: str) -> int:
    """Every seed's best-so-far curve of `arm`, faint; returns how many were drawn."""
    count = 0
    for curve in arm.curves:
        xs = [0.0] + [float(p.x(comparison.axis) or 0.0) for p in curve.points]
        ys = [curve.seed_score] + [p.best for p in curve.points]
        if comparison.axis == "step":
            xs, ys = xs[1:], ys[1:]
        ax.plot(xs, ys, drawstyle="steps-post", color=colour, alpha=0.25, linewidth=1)
        count += 1
    return count


def _draw_mean(
    ax: Any, arm: Any, index: int, colour: str, style: tuple[str, str], label: str
) -> tuple[list[tuple[float, float]], int] | None:
    """The arm's mean line and interval band; returns the line's points and the band's path
    count (None when no point of the arm has a mean)."""
    known = [
        (x, m, lo, hi)
        for x, m, lo, hi in zip(arm.xs, arm.mean, arm.low, arm.high, strict=True)
        if m is not None
    ]
    if not known:
        return None
    xs = [k[0] for k in known]
    (line,) = ax.plot(
        xs,
        [k[1] for k in known],
        drawstyle="steps-post",
        color=colour,
        linestyle=style[0],
        marker=style[1],
        markersize=7 - index % 4,  # nested markers stay visible on one point
        markerfacecolor="none",
        linewidth=2.2,
        label=label,
    )
    points = [(float(x), float(y)) for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)]
    band = ax.fill_between(
        xs, [k[2] for k in known], [k[3] for k in known], step="post", color=colour, alpha=0.18
    )
    return points, len(band.get_paths())


def _label_axes(ax: Any, comparison: Comparison) -> None:
    """Axis labels, limits, integer ticks where the axis counts, and the title."""
    if comparison.axis != "step":  # rollouts, tokens and dollars start at nothing spent
        ax.set_xlim(left=0.0)
    better = "higher" if comparison.direction == "max" else "lower"
    ax.set_xlabel(AXIS_LABELS[comparison.axis])
    ax.set_ylabel(f"best score so far ({better} is better)")
    models = sorted({c.models for arm in comparison.arms for c in arm.curves if c.models})
    ax.set_title(
        f"{comparison.task}: best so far by {' and '.join(comparison.by)}, suite "
        f"{comparison.suite or 'not recorded'}, {better} is better\nline: mean over seeds; "
        f"faint: each seed; band: {comparison.method}"
        + (f"\nmodels (guidance / executor): {'; '.join(models)}" if models else ""),
        fontsize=9,
    )
    if comparison.axis in ("step", "rollouts"):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


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
    better = "higher" if comparison.direction == "max" else "lower"
    table = Table(
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
        title=Text(
            escape_terminal(
                f"{comparison.task}, suite {comparison.suite}, final best ({better} is better)"
            )
        ),
    )
    longest = max((len(row["arm"]) for row in comparison.table), default=3)
    table.add_column("arm", overflow="fold", min_width=min(longest, 28))
    for column in ("seeds", "mean", "95% CI", "median", "rollouts", "cost"):
        table.add_column(column, no_wrap=True)  # numbers are never broken across lines
    for row in comparison.table:
        cost = row["cost_usd_mean"]
        table.add_row(
            Text(escape_terminal(row["arm"], multiline=False)),
            str(row["seeds"]),
            f"{row['final_best_mean']:.4f}",
            f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}]",
            f"{row['final_best_median']:.4f}",
            f"{row['rollouts_mean']:.0f}",
            "unknown" if cost is None else f"${cost:,.2f}",
        )
    console.print(table)
    seeds = {row["arm"]: row["seeds"] for row in comparison.table}
    for diff in comparison.differences:
        line = (
            f"{diff['arm']} − {diff['minus']}: {diff['difference']:+.4f} "
            f"[{diff['ci_low']:+.4f}, {diff['ci_high']:+.4f}] "
            f"(n={seeds.get(diff['arm'], '?')} vs n={seeds.get(diff['minus'], '?')})"
        )
        console.print(escape_terminal(line, multiline=False), markup=False)
    console.print(f"intervals: {comparison.method}", markup=False)
    for note in (comparison.small_sample_note, comparison.budget_note):
        if note:  # they name the arms, whose names come from the runs' records
            console.print(escape_terminal(note, multiline=False), markup=False)


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
        "--by",
        default="arm",
        help="how runs are pooled: arm, plus any settings that may differ between the groups, "
        "comma-separated (e.g. arm,steps); runs of one group must differ only in their seed "
        "(default: arm)",
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
    by = tuple(key.strip() for key in str(args.by).split(",") if key.strip())
    comparison = compare(curves, args.x, args.bootstrap, by=by)
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
