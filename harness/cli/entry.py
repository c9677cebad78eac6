"""`guidance-ttt`: one command to check a machine, watch a run, read what it found and publish it.

    guidance-ttt doctor [flags]      can this machine run? (exit 1 naming what is missing)
    guidance-ttt status STATE        where is the run: step, best, health, missing slots, cost
    guidance-ttt inspect STATE       what did it find: best, lineage, failures, case studies
    guidance-ttt show STATE ENTRY    one rollout: guidance, summary, cases, --code, --diff-parent
    guidance-ttt plot STATE|CSV      PNGs: every rollout's score per step; the run's health
    guidance-ttt export STATE        results records: runs.json + trajectory.csv
    guidance-ttt judge [flags]       start the local judge
    guidance-ttt task check|seed     check a task directory / score and record its seed
    guidance-ttt rehearse [STATE]    frozen-guidance run on CPU with scripted stand-in models
                                     (--task DIR: any task, with a generic stand-in executor)
    guidance-ttt score FILE          score one program through the configured judge
    guidance-ttt browse RUN          the archive as a self-contained HTML page (tree, diffs)
    guidance-ttt experiment PLAN     arms × seeds of one task, one state directory per run
    guidance-ttt compare RUN...      runs by arm: best so far with 95 % bootstrap intervals
    guidance-ttt estimate            expected tokens and cost of the configured run
    guidance-ttt reevaluate STATE    re-judge the best candidates on another suite

Everything but `doctor` and `judge` only reads the state directory (no lock, safe while a run
writes it). Exit status: 0 on success, 1 when the command ran but found a problem (doctor), 2 for
a bad argument or a directory that holds no run.

This module is the parser and the dispatch (`main`, the console script's entry point); what
each subcommand does is `harness.cli.commands`, what the read-only ones show `harness.cli.views`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from rich.console import Console

from harness import results
from harness.adapters.judge.frontiercs import DEFAULT_JUDGE_URL
from harness.cli.commands import COMMANDS, DEFAULT_REEF_URL
from harness.cli.views import HEALTH_TIMEOUT_S

#: The reference run's published records, in the repository checkout.
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "results" / "reference"


def _version() -> str:
    try:
        return metadata.version("guidance-ttt")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: pip install -e .)"


def build_parser() -> argparse.ArgumentParser:
    """The `guidance-ttt` argument parser (subcommands as in the module docstring). Every flag
    has a help text that names its default; `doctor` and `judge` keep their own parsers
    (`subcommand_parsers`)."""
    parser = argparse.ArgumentParser(prog="guidance-ttt", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"guidance-ttt {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("doctor", help="can this machine run? (guidance-ttt doctor --help)")
    sub.add_parser("judge", help="start the local judge (guidance-ttt judge --help)")
    sub.add_parser("task", help="check a task or record its seed (guidance-ttt task --help)")
    sub.add_parser("browse", help="the archive as an HTML page (guidance-ttt browse --help)")

    def services(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--config",
            help="serve.yaml to read the URLs, token, scenario and prices from "
            "(default: the project's serve.yaml)",
        )
        p.add_argument(
            "--reef-url", help=f"Reef's address (default: from serve.yaml, else {DEFAULT_REEF_URL})"
        )
        p.add_argument(
            "--judge-url",
            help="the judge's address (default: $FRONTIERCS_JUDGE_URL, else serve.yaml, else "
            f"{DEFAULT_JUDGE_URL})",
        )
        p.add_argument("--scenario", help="Reef scenario (default: from serve.yaml)")
        p.add_argument(
            "--pricing",
            type=Path,
            help="price table YAML (default: $GUIDANCE_TTT_PRICING, else serve.yaml's "
            "training.config.harness.pricing over harness/observe/pricing.yaml)",
        )
        p.add_argument(
            "--reef-records",
            action="store_true",
            help="read guidance tokens missing from the archive from Reef's records (default: off)",
        )

    status = sub.add_parser("status", help="where the run is, its health and cost")
    status.add_argument("state_dir", type=Path, help="the run's state directory")
    status.add_argument(
        "--timeout",
        type=float,
        default=HEALTH_TIMEOUT_S,
        help="seconds each health probe waits (default: %(default)s)",
    )
    status.add_argument(
        "--json", action="store_true", help="print the report as JSON (default: a table)"
    )
    services(status)
    inspect = sub.add_parser("inspect", help="what the search found")
    inspect.add_argument("state_dir", type=Path, help="the run's state directory")
    inspect.add_argument(
        "--top", type=int, default=5, help="best candidates to list (default: %(default)s)"
    )
    inspect.add_argument(
        "--cases", type=int, default=2, help="case studies to show (default: %(default)s)"
    )
    inspect.add_argument(
        "--json", action="store_true", help="print what inspect shows as JSON (default: tables)"
    )
    show = sub.add_parser(
        "show",
        help="one rollout in full: guidance, summary, verdict per case, program, diff, prompts",
    )
    from harness.cli.show import add_arguments as show_arguments

    show_arguments(show)
    plot = sub.add_parser("plot", help="PNGs of every rollout's score and of the run's health")
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
    export = sub.add_parser("export", help="write runs.json and trajectory.csv")
    export.add_argument("state_dir", type=Path, help="the run's state directory")
    export.add_argument(
        "--out",
        help="output directory (default: <state_dir>/results, never the repository's tracked "
        "results/ folder)",
    )
    export.add_argument("--task", help="task name in the records (default: the problem id)")
    export.add_argument("--run-name", help="run name (default: the state directory's name)")
    export.add_argument(
        "--gpu", help="the training GPU, e.g. 'NVIDIA H100 80GB' (default: not recorded)"
    )
    services(export)
    rehearse = sub.add_parser(
        "rehearse",
        help="frozen-guidance run on this CPU machine with scripted stand-in models",
        description="Run frozen-guidance mode end to end: real reef serve (record-only), the "
        "real local judge, scripted stand-ins for the guidance model and the executor, live "
        "G×R display; then print the commands to look at the state directory. Re-running "
        "resumes.",
    )
    rehearse.add_argument(
        "state_dir",
        type=Path,
        nargs="?",
        help="where the rehearsal's state goes (default: work/rehearsal, or "
        "work/rehearsal-<task> with --task)",
    )
    rehearse.add_argument(
        "--task",
        type=Path,
        help="rehearse this task directory (anywhere) with a stand-in executor that edits its "
        "own seed (default: the template's Polyomino task)",
    )
    rehearse.add_argument(
        "--judge-url",
        help="with --task: a running judge that serves its problem (default: start one)",
    )
    rehearse.add_argument(
        "--frontiercs",
        type=Path,
        help="with --task: a FrontierCS checkout for the local judge to serve (default: the "
        "task's own judge/ packages)",
    )
    rehearse.add_argument(
        "--seed",
        help="the seed record inside the task (default: solution/shelf/seed.json, or "
        "solution/seed.json with --task)",
    )
    score = sub.add_parser(
        "score",
        help="score one program through the configured judge",
        description="Score one program through the configured judge: per-case table, score, "
        "verdict, suite. Exit 0 valid, 1 judged not valid, 3 judge unavailable.",
    )
    from harness.cli.score import add_arguments

    add_arguments(score)
    rehearse.add_argument(
        "--steps", type=int, default=2, help="STEPS, the final total (default: %(default)s)"
    )
    rehearse.add_argument(
        "--groups", type=int, default=2, help="G, groups per step (default: %(default)s)"
    )
    rehearse.add_argument(
        "--rollouts", type=int, default=4, help="R, rollouts per group (default: %(default)s)"
    )
    rehearse.add_argument(
        "--cases", type=int, default=2, help="generated judge cases (default: %(default)s)"
    )
    rehearse.add_argument(
        "--judge-seed", type=int, default=11, help="generated suite seed (default: %(default)s)"
    )
    rehearse.add_argument(
        "--wandb",
        choices=("offline", "online"),
        help="log to W&B in this mode, under STATE/wandb (default: off, as serve-frozen.yaml)",
    )
    from harness.cli import experiment_commands

    experiment_commands.add_rehearsal_arguments(rehearse)
    experiment_commands.add_parsers(sub)
    return parser


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's own parser, by name (`doctor` and `judge` included)."""
    from harness.cli import browse
    from harness.preflight import doctor as preflight
    from judges.service import app as service

    parser = build_parser()
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    parsers = dict(choices)
    parsers["doctor"] = preflight.build_parser(prog="guidance-ttt doctor")
    parsers["judge"] = service.build_parser(prog="guidance-ttt judge")
    parsers["browse"] = browse.build_parser()
    return parsers


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `guidance-ttt` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "doctor":
        from harness.preflight import doctor as preflight

        return preflight.main(argv[1:], prog="guidance-ttt doctor")
    if argv and argv[0] == "task":
        from harness.cli import task as task_files

        return task_files.main(argv[1:])
    if argv and argv[0] == "browse":
        from harness.cli import browse

        return browse.main(argv[1:])
    if argv and argv[0] == "judge":
        from judges.service import app as service

        service.main(argv[1:], prog="guidance-ttt judge")
        return 0
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        return COMMANDS[args.command](args, console)
    except (results.RunNotFound, ValueError, OSError, RuntimeError) as exc:
        print(f"guidance-ttt {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
