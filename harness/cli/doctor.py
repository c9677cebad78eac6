"""`guidance-ttt doctor`: can this machine run? The checks are `harness.preflight`'s, with their
own flags (`guidance-ttt doctor --help`); this module hands them the arguments unparsed."""

from __future__ import annotations

import argparse

from harness.cli.flags import add_passthrough

PROG = "guidance-ttt doctor"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    add_passthrough(
        subparsers, "doctor", "can this machine run? (guidance-ttt doctor --help)", __doc__
    )


def own_parser() -> argparse.ArgumentParser:
    """The preflight's parser, as `guidance-ttt doctor` (for its flags' help)."""
    from harness.preflight import doctor

    return doctor.build_parser(prog=PROG)


def run(args: argparse.Namespace) -> int:
    from harness.preflight import doctor

    return doctor.main(args.rest, prog=PROG)
