"""The `guidance-ttt` command: it parses, dispatches and renders, nothing else. `entry` is the
parser (a loop over its table of subcommands) and `main`; each subcommand is a module exposing
`add_parser(subparsers)` and `run(args)`; `flags` reads the flags several share, `views`,
`plot_series` and `plots` render. The work is done below: `experiment`, `rehearsal`,
`preflight`, `results`, `run`.

`harness.cli:main` (the console script) and `python -m harness.cli` are its faces.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    # A lazy face: importing a cli module does not build the parser.
    if name == "main":
        from harness.cli.entry import main

        return main
    raise AttributeError(f"module 'harness.cli' has no attribute {name!r}")
