"""`guidance-ttt judge`: start the local judge (`judges.api`, judges/README.md) with its own
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
    from judges.api import build_parser

    return build_parser(PROG)


def run(args: argparse.Namespace) -> int:
    from judges.api import main

    main(args.rest, PROG)
    return 0
