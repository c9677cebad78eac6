"""`guidance-ttt experiment PLAN.yaml`: arms × seeds of one task, run as a whole
(`harness.experiment`: the plan, its runs, the experiment index; docs/experiments.md); and the
table of an experiment directory's runs that `guidance-ttt status EXPERIMENT_DIR` shows."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.experiment.index import read_index, status_rows
from harness.experiment.plan import load_plan
from harness.experiment.runs import run_experiment
from harness.observe.terminal import escape_terminal
from harness.settings.paths import WORK_DIR


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    experiment = subparsers.add_parser(
        "experiment",
        help="run an experiment plan: arms × seeds × task, one state directory per run",
        description="Run every run of PLAN.yaml (arms × seeds of one task), one state directory "
        "per run under the experiment directory, resuming the unfinished ones; then print the "
        "compare command. `guidance-ttt status EXPERIMENT_DIR` shows every run.",
    )
    experiment.add_argument("plan", type=Path, help="the plan (docs/experiments.md)")
    experiment.add_argument(
        "--dir",
        type=Path,
        help="the experiment directory (default: the plan's `directory`, else work/<plan name>)",
    )


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    plan = load_plan(args.plan)
    directory = Path(args.dir or plan.directory or WORK_DIR / plan.name).resolve()
    planned = plan.runs()
    console.print(
        f"experiment {plan.name}: {len(plan.arms)} arms × {len(plan.seeds)} seeds = "
        f"{len(planned)} runs of {plan.groups}×{plan.rollouts} for {plan.steps} steps in "
        f"{directory}",
        markup=False,
        soft_wrap=True,
    )
    from harness.cli.termination import (
        Terminated,
        exit_now,
        resume_command,
        stopping_on_signals,
    )

    # SIGINT, SIGTERM or SIGHUP stops every run and every process they started, in one line,
    # exit 128 + the signal (harness.cli.termination).
    try:
        with stopping_on_signals("guidance-ttt experiment", resume_command("experiment")):
            status = run_experiment(plan, directory, console)
    except Terminated as exc:
        exit_now(int(exc.code))
        raise  # not reached
    done = sum(1 for s in status.values() if s == "finished")
    console.print(
        f"experiment {plan.name}: {done}/{len(planned)} runs finished; compare them with\n"
        f"  guidance-ttt compare {shlex.quote(str(directory))} -o "
        f"{shlex.quote(str(directory / 'compare.png'))}",
        markup=False,
        soft_wrap=True,
    )
    return 0 if done == len(planned) else 1


def render_status(directory: Path, console: Console) -> None:
    document = read_index(directory)
    steps = (document.get("plan") or {}).get("steps")
    table = Table(title=Text(f"experiment {document.get('name')} ({directory})"))
    for column in ("run", "arm", "selection", "seed", "steps", "best"):
        table.add_column(column, no_wrap=True)  # names and numbers are never broken mid-word
    table.add_column("state", overflow="fold", min_width=len("finished"))
    for row in status_rows(directory):
        best = row["best_score"]
        cells = (
            row["dir"],
            row["arm"],
            row["parent_selection"],
            row["run_seed"],
            f"{row['committed_steps']}/{steps}",
            "--" if best is None else f"{best:.4f}",
            row["status"],
        )
        table.add_row(*(Text(escape_terminal(cell, multiline=False)) for cell in cells))
    console.print(table)
