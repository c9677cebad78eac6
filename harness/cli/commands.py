"""What each read-only and rehearsal `guidance-ttt` subcommand does, once its flags are parsed.

`COMMANDS` maps a subcommand name to its handler; a handler takes the parsed flags and a rich
`Console`, prints its result and returns the exit status. Handlers raise `results.RunNotFound`,
`ValueError`, `OSError` or `RuntimeError` for a bad argument or a directory that holds no run;
`harness.cli.entry.main` turns those into one line on stderr and exit status 2. The service URLs,
token and prices come from the flags, then the environment, then serve.yaml, then the defaults
named here. `doctor`, `judge` and `task` are dispatched by `harness.cli.entry` to their own modules.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from harness import results
from harness.adapters.judge.frontiercs import DEFAULT_JUDGE_URL
from harness.cli import plot_series, plots
from harness.cli.views import (
    Services,
    inspect_report,
    render_inspect,
    render_status,
    status_report,
)
from harness.observe.cost import ReefRecordUsage, Usage, load_prices
from harness.settings.run_settings import RunSettings, RunSettingsError
from harness.storage.library_json import write_library_json

DEFAULT_REEF_URL = "http://127.0.0.1:8900"


# --- reading the flags ---------------------------------------------------------------------------


def _services(args: argparse.Namespace, state_dir: Path | None = None) -> Services:
    """The service URLs, token, scenario and settings file: the flags, then the run's own
    recorded settings (a state directory's settings file, or the one its `run_started` event
    names, else the URLs that event recorded), then `$FRONTIERCS_JUDGE_URL`, then the project's
    serve.yaml, then the defaults."""
    flag = vars(args).get
    recorded = _recorded_run(state_dir) if state_dir is not None and not flag("config") else {}
    settings = None
    candidates = [Path(flag("config"))] if flag("config") else []
    candidates += [Path(p) for p in recorded.get("settings_files", [])]
    for config in [*candidates, None] if not flag("config") else candidates:
        try:
            settings = RunSettings.load(config) if config else RunSettings.load()
            break
        except (RunSettingsError, OSError):
            settings = None
    own = settings is not None and settings.config_path in {
        p.resolve() for p in candidates if p.exists()
    }
    env_judge = os.environ.get("FRONTIERCS_JUDGE_URL")
    run_judge = settings.judge_url if own and settings else recorded.get("judge_url")
    run_reef = settings.reef_url if own and settings else recorded.get("reef_url")
    return Services(
        reef_url=flag("reef_url")
        or run_reef
        or (settings.reef_url if settings else DEFAULT_REEF_URL),
        judge_url=flag("judge_url")
        or run_judge
        or env_judge
        or (settings.judge_url if settings else DEFAULT_JUDGE_URL),
        token=settings.reef_token if settings else os.environ.get("REEF_TOKEN", "reef-local"),
        scenario=flag("scenario")
        or (settings.scenario if own and settings else recorded.get("scenario"))
        or (settings.scenario if settings else None),
        config=settings.config_path if settings else None,
    )


def _recorded_run(state_dir: Path) -> dict:
    """What a state directory records about its run's settings: the settings files it holds
    (a rehearsal writes its own) or its last `run_started` event names, and the URLs and
    scenario that event recorded."""
    files = [state_dir / name for name in ("serve-frozen.yaml", "serve.yaml")]
    found: dict = {"settings_files": [str(p) for p in files if p.is_file()]}
    try:
        started = results.load_run(state_dir).events_of("run_started")
    except (results.RunNotFound, ValueError, OSError):
        started = []
    if started:
        last = started[-1]
        if last.get("settings_file"):
            found["settings_files"].append(str(last["settings_file"]))
        for key in ("reef_url", "judge_url", "scenario"):
            if last.get(key):
                found[key] = last[key]
    return found


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
    services = _services(args, source)
    prices = load_prices(args.pricing, serve_yaml=services.config)
    return plot_series.from_run(view, args.task or problem, prices), problem


# --- commands ------------------------------------------------------------------------------------


def _cmd_status(args: argparse.Namespace, console: Console) -> int:
    from harness.experiment import index, runs

    if index.is_experiment(args.state_dir):  # an experiment directory: every run
        if args.json:
            console.print_json(json.dumps(index.status_rows(args.state_dir)))
        else:
            runs.render_status(args.state_dir, console)
        return 0
    view = results.load_run(args.state_dir)
    services = _services(args, args.state_dir)
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
    if args.json:
        console.print_json(json.dumps(inspect_report(view, args.top, args.cases)))
        return 0
    render_inspect(view, console, args.top, args.cases)
    return 0


def _cmd_show(args: argparse.Namespace, console: Console) -> int:
    from harness.cli import show

    return show.run(args, console, args.task or _run_task(args.state_dir))


def _run_task(state_dir: Path) -> Path | None:
    """The task directory of the run in `state_dir`, from its recorded settings; None when they
    cannot say."""
    from harness.settings.task_dirs import task_dir_of

    for path in _recorded_run(state_dir).get("settings_files", []):
        try:
            return task_dir_of(RunSettings.load(path))
        except (RunSettingsError, OSError):
            continue
    return None


def _cmd_plot(args: argparse.Namespace, console: Console) -> int:
    series, problem = _plot_series(args)
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
        f"{len(data.steps)} steps, best {best}",
        soft_wrap=True,
    )
    return 0


def _cmd_export(args: argparse.Namespace, console: Console) -> int:
    view = results.load_run(args.state_dir)
    services = _services(args, args.state_dir)
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
    out = Path(args.out) if args.out else Path(args.state_dir) / "results"
    results.write_records(out, record, rows)
    archive = results.exported_archive_path(out, record["run_name"])
    archive.parent.mkdir(parents=True, exist_ok=True)
    write_library_json(view.archive, archive)
    search = record["search"]
    console.print(
        f"wrote {out / 'runs.json'}, {out / 'trajectory.csv'} and "
        f"{archive}: {task}, "
        f"{search['updates']} steps, {search['seed_score']:.4f} → {search['best_score']:.4f}, "
        f"{search['valid_rollouts']}/{search['sampled_rollouts']} valid",
        soft_wrap=True,
    )
    return 0


def _cmd_rehearse(args: argparse.Namespace, console: Console) -> int:
    from harness.cli.termination import Terminated, stopping_on_signals
    from harness.rehearsal.rehearse import (
        RehearsalOptions,
        default_state_dir,
        next_commands,
        rehearse,
    )
    from harness.run.controller import ResumeRefused
    from harness.run.spend import SpendLimitReached

    options = RehearsalOptions(
        steps=args.steps,
        groups=args.groups,
        rollouts=args.rollouts,
        cases=args.cases,
        judge_seed=args.judge_seed,
        task=args.task.resolve() if args.task else None,
        judge_url=args.judge_url,
        frontiercs=args.frontiercs,
        seed=args.seed,
        wandb=(("enabled", True), ("mode", args.wandb)) if args.wandb else (),
        arm=args.arm,
        parent_selection=args.parent_selection,
        run_seed=args.run_seed,
        max_cost_usd=args.max_cost_usd,
        max_tokens=args.max_tokens,
    )
    args.state_dir = args.state_dir or default_state_dir(options)
    try:
        with stopping_on_signals():
            result = rehearse(args.state_dir, options, console)
    except Terminated as exc:
        print(f"guidance-ttt rehearse: {exc}; every process it started is stopped", file=sys.stderr)
        return int(exc.code)
    except SpendLimitReached as exc:
        console.print(f"rehearsal stopped: {exc}", markup=False, soft_wrap=True)
        return 1
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
        f"{'--' if best is None else f'{best:.4f}'} (arm {args.arm}, scripted stand-in models)"
    )
    console.print("look at it:")
    for command in next_commands(args.state_dir):
        console.print(f"  {command}", markup=False, highlight=False, soft_wrap=True)
    if args.wandb == "offline":
        runs = Path(args.state_dir) / "wandb" / "wandb" / "offline-run-*"
        console.print(f"  wandb sync {runs}", markup=False, highlight=False, soft_wrap=True)
    return 0


def _cmd_score(args: argparse.Namespace, console: Console) -> int:
    from harness.cli import score as score_command

    return score_command.run(args, console)


def _experiment_command(name: str) -> Callable[[argparse.Namespace, Console], int]:
    def run(args: argparse.Namespace, console: Console) -> int:
        from harness.cli import experiment_commands

        return experiment_commands.COMMANDS[name](args, console)

    return run


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    **{
        name: _experiment_command(name)
        for name in ("compare", "experiment", "estimate", "reevaluate")
    },
    "score": _cmd_score,
    "rehearse": _cmd_rehearse,
    "status": _cmd_status,
    "inspect": _cmd_inspect,
    "show": _cmd_show,
    "plot": _cmd_plot,
    "export": _cmd_export,
}
