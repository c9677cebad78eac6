"""The `guidance-ttt` command: the parser (`entry`), the subcommands, the views, plots, `score` and
`task`.

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
