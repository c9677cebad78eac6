"""`guidance-ttt judge`: start the local judge (`judges.service.app`, judges/README.md) with its own
flags (`guidance-ttt judge --help`); this module hands them the arguments unparsed."""

from __future__ import annotations

import argparse

from harness.cli.flags import add_passthrough

PROG = "guidance-ttt judge"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    add_passthrough(
        subparsers, "judge", "start the local judge (guidance-ttt judge --help)", __doc__
    )


def own_parser() -> argparse.ArgumentParser:
    """The judge's parser, as `guidance-ttt judge` (for its flags' help)."""
    from judges.service import app

    return app.build_parser(prog=PROG)


def run(args: argparse.Namespace) -> int:
    from judges.service import app

    app.main(args.rest, prog=PROG)
    return 0
