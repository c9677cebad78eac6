"""The parsers and dispatch of the experiment commands (docs/experiments.md):

    guidance-ttt experiment PLAN.yaml     arms × seeds × task, one state directory per run
    guidance-ttt compare RUN... [--by arm] best so far per arm with a 95 % bootstrap interval
    guidance-ttt estimate [--config F]    expected tokens and cost of the configured run
    guidance-ttt reevaluate RUN --top K --suite S --repeats N   re-judge the K best elsewhere

and the rehearsal's arm flags. Each command lives in its own module (`harness.cli.compare`,
`experiment`, `estimate`, `reevaluate`); this one only wires them into `guidance-ttt`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.arms import ARMS, DEFAULT_ARM, DEFAULT_SELECTION, SELECTIONS

X_AXES = ("step", "rollouts", "usd", "tokens")


def add_rehearsal_arguments(rehearse: argparse.ArgumentParser) -> None:
    """`guidance-ttt rehearse`'s arm, seed and spend-limit flags."""
    rehearse.add_argument(
        "--arm", choices=ARMS, default=DEFAULT_ARM, help="experiment arm (default: %(default)s)"
    )
    rehearse.add_argument(
        "--parent-selection",
        choices=SELECTIONS,
        default=DEFAULT_SELECTION,
        help="parent selection (default: %(default)s)",
    )
    rehearse.add_argument("--run-seed", type=int, default=0, help="run seed (default: 0)")
    rehearse.add_argument(
        "--max-tokens", type=int, help="spend limit in tokens (default: no limit)"
    )
    rehearse.add_argument(
        "--max-cost-usd", type=float, help="spend limit in US dollars (default: no limit)"
    )


def add_parsers(sub: Any) -> None:
    """The `experiment`, `compare`, `estimate` and `reevaluate` subcommands."""
    experiment = sub.add_parser(
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
    compare = sub.add_parser(
        "compare",
        help="compare runs by arm: best so far with 95 %% bootstrap intervals, table, CSV",
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
    estimate = sub.add_parser(
        "estimate", help="expected tokens and cost of the configured run, before it starts"
    )
    estimate.add_argument(
        "--config", type=Path, help="the settings file (default: the project's serve.yaml)"
    )
    estimate.add_argument("--pricing", type=Path, help="price table YAML (default: as for status)")
    estimate.add_argument(
        "--executor-completion-tokens",
        type=int,
        metavar="N",
        default=8000,
        help="assumed executor completion tokens per call (default: %(default)s)",
    )
    reevaluate = sub.add_parser(
        "reevaluate",
        help="re-judge a run's best candidates on another suite, N times",
        description="Re-judge the K best candidates of a run on another suite N times and write "
        "the figures (suite named) to <state>/guidance-run/reevaluation.json; `export` puts them "
        "in runs.json's fixed_candidate_reevaluation.",
    )
    reevaluate.add_argument("state_dir", type=Path, help="the run's state directory")
    reevaluate.add_argument("--top", type=int, default=3, help="candidates (default: 3)")
    reevaluate.add_argument(
        "--suite",
        required=True,
        help="generated:SEED:N (a fresh generated suite, judged by a local judge started for "
        "it) or public (the judge at --judge-url must serve the public cases); required, no "
        "default",
    )
    reevaluate.add_argument("--repeats", type=int, default=3, help="repeats (default: 3)")
    reevaluate.add_argument(
        "--judge-url", help="a running judge that serves the suite (default: start a local one)"
    )
    reevaluate.add_argument("--task-dir", type=Path, help="the task (default: the run's task)")


def _lazy(module: str) -> Callable[[argparse.Namespace, Console], int]:
    def run(args: argparse.Namespace, console: Console) -> int:
        from importlib import import_module

        return int(import_module(module).run(args, console))

    return run


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "experiment": _lazy("harness.experiment.runs"),
    "compare": _lazy("harness.cli.compare"),
    "estimate": _lazy("harness.cli.estimate"),
    "reevaluate": _lazy("harness.cli.reevaluate"),
}
