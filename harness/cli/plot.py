"""`guidance-ttt plot STATE|CSV`: PNGs of every rollout's score per step and of the run's
health, from a state directory or an exported trajectory.csv (`harness.cli.plot_series` reads
the series, `harness.cli.plots` draws them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness import results
from harness.cli import plot_series, plots
from harness.cli.flags import prices_from_flags, services_from_flags
from harness.observe.progress import counted
from harness.settings.paths import REFERENCE_DIR


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    plot = subparsers.add_parser(
        "plot",
        help="PNGs of every rollout's score and of the run's health",
        description=__doc__.split("(")[0].strip(),
    )
    plot.add_argument("source", help="a state directory or a trajectory.csv")
    plot.add_argument(
        "-o",
        "--output",
        help="scores PNG; the health figure goes beside it as <name>-health.png "
        "(default: <task>-trajectory.png)",
    )
    plot.add_argument(
        "--task",
        help="the task's rows of a trajectory.csv, or the task name of a run "
        "(default: the only task / the run's problem id)",
    )
    plot.add_argument("--title", help="figure title (default: the task)")
    plot.add_argument(
        "--reference",
        action="store_true",
        help="draw the reference run's published best so far for comparison (default: off)",
    )
    plot.add_argument("--reference-task", help="its task (default: the plotted run's task)")
    plot.add_argument(
        "--reference-score",
        type=float,
        help="draw a labelled horizontal line at this score, e.g. the human-expert score "
        "(default: none)",
    )
    plot.add_argument(
        "--reference-label",
        default="reference score",
        help="the line's label (default: %(default)s)",
    )
    plot.add_argument(
        "--reference-dir",
        type=Path,
        default=REFERENCE_DIR,
        help="folder with the published runs.json and trajectory.csv "
        "(default: the checkout's results/reference)",
    )
    plot.add_argument(
        "--config", help="serve.yaml with a pricing table (default: the project's serve.yaml)"
    )
    plot.add_argument(
        "--pricing",
        type=Path,
        help="price table YAML for the cost per step (default: as for status)",
    )


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    series, problem = _series(args)
    reference = None
    if args.reference:
        plot_series.check_comparable(series)
        reference = plot_series.reference_run(args.reference_dir, args.reference_task or problem)
    out = Path(args.output or f"{series.task}-trajectory.png")
    line = None if args.reference_score is None else (args.reference_score, args.reference_label)
    data = plots.plot(series, out, args.title, reference, line)
    best = f"{data.best_so_far[-1]:.4f}" if data.best_so_far else f"{data.seed:.4f} (the seed)"
    console.print(
        f"wrote {data.scores_png} and {data.health_png}: {series.task}, "
        f"{counted(len(data.steps), 'step')}, best {best}",
        soft_wrap=True,
    )
    return 0


def _csv_direction(source: Path, task: str, rows: list[results.TrajectoryRow]) -> str:
    """A trajectory.csv's score direction: from the `runs.json` beside it, else from the rows
    (a best that went down is a lower-is-better score)."""
    runs_json = source.with_name("runs.json")
    if runs_json.is_file():
        for run in results.read_runs_json(runs_json):
            if run.get("task") == task and run.get("search", {}).get("score_direction"):
                return str(run["search"]["score_direction"])
    return "min" if rows and rows[-1].cumulative_best < rows[0].cumulative_best else "max"


def _series(args: argparse.Namespace) -> tuple[plot_series.Series, str]:
    """The plot's series from a state directory or a trajectory.csv, and the reference task
    name to compare with (the run's task id)."""
    source = Path(args.source)
    if source.is_file():
        rows = results.read_trajectory_csv(source)
        tasks = sorted({r.task for r in rows})
        task = args.task or (tasks[0] if len(tasks) == 1 else None)
        if task is None:
            raise ValueError(f"{source} holds tasks {tasks}; choose one with --task")
        chosen = [r for r in rows if r.task == task]
        if not chosen:
            raise ValueError(f"{source} has no rows for task {task!r} (tasks: {tasks})")
        return plot_series.from_trajectory(chosen, _csv_direction(source, task, chosen)), task
    view = results.load_run(source)
    problem = results.seed_entry(view.archive).problem_id
    services = services_from_flags(args, source)
    prices = prices_from_flags(args, services)
    return plot_series.from_run(view, args.task or problem, prices), problem
