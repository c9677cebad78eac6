"""`guidance-ttt export STATE`: the run's results records, runs.json and trajectory.csv, and its
archive as library.json (`harness.results` builds them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness import results
from harness.cli.flags import (
    add_service_flags,
    guidance_usage,
    prices_from_flags,
    services_from_flags,
)
from harness.observe.progress import counted
from harness.storage.library_json import write_library_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        "export", help="write runs.json and trajectory.csv", description=__doc__
    )
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
    add_service_flags(export)


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    view = results.load_run(args.state_dir)
    services = services_from_flags(args, args.state_dir)
    task = args.task or results.seed_entry(view.archive).problem_id
    record = results.run_record(
        view,
        task,
        prices=prices_from_flags(args, services),
        gpu=args.gpu,
        run_name=args.run_name,
        guidance=guidance_usage(view, services, args.reef_records),
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
        f"{counted(search['updates'], 'step')}, "
        f"{search['seed_score']:.4f} → {search['best_score']:.4f}, "
        f"{search['valid_rollouts']}/{search['sampled_rollouts']} valid",
        soft_wrap=True,
    )
    return 0
