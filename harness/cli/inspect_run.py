"""`guidance-ttt inspect STATE`: what the search found — best candidates, lineage, failures,
case studies (`--json`: the same as JSON)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from harness import results
from harness.cli.views import inspect_report, render_inspect


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    inspect = subparsers.add_parser("inspect", help="what the search found", description=__doc__)
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


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    view = results.load_run(args.state_dir)
    if args.json:
        console.print_json(json.dumps(inspect_report(view, args.top, args.cases)))
        return 0
    render_inspect(view, console, args.top, args.cases)
    return 0
