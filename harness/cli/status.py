"""`guidance-ttt status STATE`: where a run is — step, best, health, missing slots, cost — or,
for an experiment directory, every run of it (`--json`: the same as JSON)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from harness import results
from harness.cli.flags import (
    add_service_flags,
    guidance_usage,
    prices_from_flags,
    services_from_flags,
)
from harness.cli.views import HEALTH_TIMEOUT_S, render_status, status_report


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    status = subparsers.add_parser(
        "status", help="where the run is, its health and cost", description=__doc__
    )
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
    add_service_flags(status)


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    from harness.cli.experiment import render_status as render_experiment
    from harness.experiment import index

    if index.is_experiment(args.state_dir):  # an experiment directory: every run
        if args.json:
            console.print_json(json.dumps(index.status_rows(args.state_dir)))
        else:
            render_experiment(args.state_dir, console)
        return 0
    view = results.load_run(args.state_dir)
    services = services_from_flags(args, args.state_dir)
    guidance = guidance_usage(view, services, args.reef_records)
    report = status_report(
        view,
        services,
        prices_from_flags(args, services),
        timeout_s=args.timeout,
        guidance=guidance,
    )
    if args.json:
        console.print_json(json.dumps(report))
    else:
        render_status(report, console)
    return 0
