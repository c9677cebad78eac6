"""`guidance-ttt`: one command to check a machine, watch a run, read what it found and publish it.

    guidance-ttt doctor [flags]      can this machine run? (exit 1 naming what is missing)
    guidance-ttt status STATE        where is the run: step, best, health, missing slots, cost
    guidance-ttt inspect STATE       what did it find: best, lineage, failures, case studies
    guidance-ttt plot STATE|CSV      PNGs: every rollout's score per step; the run's health
    guidance-ttt export STATE        results records: runs.json + trajectory.csv
    guidance-ttt judge [flags]       start the local judge
    guidance-ttt task check|seed     check a task directory / score and record its seed
    guidance-ttt rehearse STATE      frozen-guidance run on CPU with scripted stand-in models
    guidance-ttt score FILE          score one program through the configured judge

Everything but `doctor` and `judge` only reads the state directory (no lock, safe while a run
writes it). Exit status: 0 on success, 1 when the command ran but found a problem (doctor), 2 for
a bad argument or a directory that holds no run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from rich.console import Console

from harness import plot_series, plots, results
from harness.cli_views import (
    HEALTH_TIMEOUT_S,
    Services,
    render_inspect,
    render_status,
    status_report,
)
from harness.cost import ReefRecordUsage, Usage, load_prices
from harness.run_settings import RunSettings, RunSettingsError

DEFAULT_REEF_URL = "http://127.0.0.1:8900"
DEFAULT_JUDGE_URL = "http://127.0.0.1:8081"
#: The reference run's published records, in the repository checkout.
REFERENCE_DIR = Path(__file__).resolve().parents[1] / "results" / "reference"


# --- reading the flags ---------------------------------------------------------------------------


def _services(args: argparse.Namespace) -> Services:
    settings = None
    config = Path(args.config) if args.config else None
    try:
        settings = RunSettings.load(config) if config else RunSettings.load()
    except (RunSettingsError, OSError):
        settings = None
    env_judge = os.environ.get("FRONTIERCS_JUDGE_URL")
    flag = vars(args).get
    return Services(
        reef_url=flag("reef_url") or (settings.reef_url if settings else DEFAULT_REEF_URL),
        judge_url=flag("judge_url")
        or env_judge
        or (settings.judge_url if settings else DEFAULT_JUDGE_URL),
        token=settings.reef_token if settings else os.environ.get("REEF_TOKEN", "reef-local"),
        scenario=flag("scenario") or (settings.scenario if settings else None),
        config=settings.config_path if settings else None,
    )


def _guidance_usage(view: results.RunView, services: Services, enabled: bool) -> dict[str, Usage]:
    """Guidance usage from Reef's records, for entries whose metadata lacks it (opt-in)."""
    if not enabled or not services.scenario:
        return {}
    receipts = [
        str(e.metadata.get("agent_record_id"))
        for e in [*view.archive.entries.values(), *(x for _, _, x in view.in_flight)]
        if e.timestep >= 1 and "guidance_response_usage" not in e.metadata
    ]
    with ReefRecordUsage(services.reef_url, services.scenario, token=services.token) as reader:
        return reader.fetch(receipts)


def _csv_direction(source: Path, task: str, rows: list[results.TrajectoryRow]) -> str:
    """A trajectory.csv's score direction: from the `runs.json` beside it, else from the rows
    (a best that went down is a lower-is-better score)."""
    runs_json = source.with_name("runs.json")
    if runs_json.is_file():
        for run in results.read_runs_json(runs_json):
            if run.get("task") == task and run.get("search", {}).get("score_direction"):
                return str(run["search"]["score_direction"])
    return "min" if rows and rows[-1].cumulative_best < rows[0].cumulative_best else "max"


def _plot_series(args: argparse.Namespace) -> tuple[plot_series.Series, str]:
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
    services = _services(args)
    prices = load_prices(args.pricing, serve_yaml=services.config)
    return plot_series.from_run(view, args.task or problem, prices), problem


# --- commands ------------------------------------------------------------------------------------


def _cmd_status(args: argparse.Namespace, console: Console) -> int:
    view = results.load_run(args.state_dir)
    services = _services(args)
    guidance = _guidance_usage(view, services, args.reef_records)
    report = status_report(
        view,
        services,
        load_prices(args.pricing, serve_yaml=services.config),
        timeout_s=args.timeout,
        guidance=guidance,
    )
    if args.json:
        console.print_json(json.dumps(report))
    else:
        render_status(report, console)
    return 0


def _cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    view = results.load_run(args.state_dir)
    render_inspect(view, console, args.top, args.cases)
    return 0


def _cmd_plot(args: argparse.Namespace, console: Console) -> int:
    series, problem = _plot_series(args)
    reference = None
    if args.reference:
        plot_series.check_comparable(series)
        reference = plot_series.reference_run(args.reference_dir, args.reference_task or problem)
    out = Path(args.output or f"{series.task}-trajectory.png")
    data = plots.plot(series, out, args.title, reference)
    best = f"{data.best_so_far[-1]:.4f}" if data.best_so_far else f"{data.seed:.4f} (the seed)"
    console.print(
        f"wrote {data.scores_png} and {data.health_png}: {series.task}, "
        f"{len(data.steps)} steps, best {best}",
        soft_wrap=True,
    )
    return 0


def _cmd_export(args: argparse.Namespace, console: Console) -> int:
    view = results.load_run(args.state_dir)
    services = _services(args)
    task = args.task or results.seed_entry(view.archive).problem_id
    record = results.run_record(
        view,
        task,
        prices=load_prices(args.pricing, serve_yaml=services.config),
        gpu=args.gpu,
        run_name=args.run_name,
        guidance=_guidance_usage(view, services, args.reef_records),
    )
    rows = results.trajectory(view.archive, task, view.committed_step)
    results.write_records(Path(args.out), record, rows)
    search = record["search"]
    console.print(
        f"wrote {Path(args.out) / 'runs.json'} and {Path(args.out) / 'trajectory.csv'}: {task}, "
        f"{search['updates']} steps, {search['seed_score']:.4f} → {search['best_score']:.4f}, "
        f"{search['valid_rollouts']}/{search['sampled_rollouts']} valid",
        soft_wrap=True,
    )
    return 0


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
            "training.config.harness.pricing over harness/pricing.yaml)",
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
    export.add_argument("--out", default="results", help="output directory (default: %(default)s)")
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
    rehearse.add_argument("state_dir", type=Path, help="where the rehearsal's state goes")
    score = sub.add_parser(
        "score",
        help="score one program through the configured judge",
        description="Score one program through the configured judge: per-case table, score, "
        "verdict, suite. Exit 0 valid, 1 judged not valid, 3 judge unavailable.",
    )
    from harness.score_command import add_arguments

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
    return parser


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's own parser, by name (`doctor` and `judge` included)."""
    from harness import preflight
    from judges import service

    parser = build_parser()
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    parsers = dict(choices)
    parsers["doctor"] = preflight.build_parser(prog="guidance-ttt doctor")
    parsers["judge"] = service.build_parser(prog="guidance-ttt judge")
    return parsers


def _cmd_rehearse(args: argparse.Namespace, console: Console) -> int:
    from harness.rehearsal.rehearse import RehearsalOptions, next_commands, rehearse
    from harness.run_controller import ResumeRefused

    options = RehearsalOptions(
        steps=args.steps,
        groups=args.groups,
        rollouts=args.rollouts,
        cases=args.cases,
        judge_seed=args.judge_seed,
    )
    try:
        result = rehearse(args.state_dir, options, console)
    except ResumeRefused as exc:
        if "already finished" not in str(exc):
            raise
        console.print(
            f"{args.state_dir} holds a finished rehearsal ({exc}); pass a larger --steps to "
            "continue it, or name a new directory"
        )
        return 2
    best = result.best.verifier_raw_score if result.best else None
    console.print(
        f"rehearsal done: steps {result.start_step}..{result.next_step - 1} committed, best "
        f"{'--' if best is None else f'{best:.4f}'} (frozen guidance, scripted stand-in models)"
    )
    console.print("look at it:")
    for command in next_commands(args.state_dir):
        console.print(f"  {command}", markup=False, highlight=False, soft_wrap=True)
    return 0


def _cmd_score(args: argparse.Namespace, console: Console) -> int:
    from harness import score_command

    return score_command.run(args, console)


_COMMANDS = {
    "score": _cmd_score,
    "rehearse": _cmd_rehearse,
    "status": _cmd_status,
    "inspect": _cmd_inspect,
    "plot": _cmd_plot,
    "export": _cmd_export,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `guidance-ttt` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "doctor":
        from harness import preflight

        return preflight.main(argv[1:], prog="guidance-ttt doctor")
    if argv and argv[0] == "task":
        from harness import task_files

        return task_files.main(argv[1:])
    if argv and argv[0] == "judge":
        from judges import service

        service.main(argv[1:], prog="guidance-ttt judge")
        return 0
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        return _COMMANDS[args.command](args, console)
    except (results.RunNotFound, ValueError, OSError, RuntimeError) as exc:
        print(f"guidance-ttt {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
