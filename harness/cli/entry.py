"""`guidance-ttt`: one command to check a machine, watch a run, read what it found and publish it.

    guidance-ttt run [flags]         start or resume a run (./run.sh is a thin wrapper over it)
    guidance-ttt doctor [flags]      can this machine run? (exit 1 naming what is missing)
    guidance-ttt status STATE        where is the run: step, best, health, missing slots, cost
    guidance-ttt inspect STATE       what did it find: best, lineage, failures, case studies
    guidance-ttt show STATE ENTRY    one rollout: guidance, summary, cases, --code, --diff-parent
    guidance-ttt plot STATE|CSV      PNGs: every rollout's score per step; the run's health
    guidance-ttt export STATE        results records: runs.json + trajectory.csv
    guidance-ttt judge [flags]       start the local judge
    guidance-ttt task new|check|seed write, check or seed a task directory
    guidance-ttt rehearse [STATE]    frozen-guidance run on CPU with scripted stand-in models
                                     (--task DIR: any task, with a generic stand-in executor)
    guidance-ttt score FILE          score one program through the configured judge
    guidance-ttt browse RUN          the archive as a self-contained HTML page (tree, diffs)
    guidance-ttt experiment PLAN     arms × seeds of one task, one state directory per run
    guidance-ttt compare RUN...      runs by arm: best so far with 95 % bootstrap intervals
    guidance-ttt estimate            expected tokens and cost of the configured run
    guidance-ttt reevaluate STATE    re-judge the best candidates on another suite

Everything but `doctor` and `judge` only reads the state directory (no lock, safe while a run
writes it). Exit status: 0 on success, 1 when the command ran but found a problem (doctor), 2 for
a bad argument or a directory that holds no run.

This module is the parser and the dispatch (`main`, the console script's entry point), a loop
over one table of subcommands, `SUBCOMMANDS`: each is a module of `harness.cli` that exposes
`add_parser(subparsers)` and `run(args) -> int`. `doctor` and `judge` hand their arguments,
unparsed, to their own parsers (`own_parser()`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module, metadata
from types import ModuleType

from harness import results

#: The subcommands, in the order `guidance-ttt --help` lists them, and the module of
#: `harness.cli` that parses and runs each (`inspect_run`: a module `inspect` would shadow the
#: standard library's).
SUBCOMMANDS = {
    "run": "run_command",
    "doctor": "doctor",
    "judge": "judge",
    "status": "status",
    "inspect": "inspect_run",
    "show": "show",
    "plot": "plot",
    "export": "export",
    "rehearse": "rehearse",
    "score": "score",
    "task": "task",
    "browse": "browse",
    "experiment": "experiment",
    "compare": "compare",
    "estimate": "estimate",
    "reevaluate": "reevaluate",
}


def _version() -> str:
    try:
        return metadata.version("guidance-ttt")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: pip install -e .)"


def _module(name: str) -> ModuleType:
    return import_module(f"harness.cli.{SUBCOMMANDS[name]}")


def build_parser() -> argparse.ArgumentParser:
    """The `guidance-ttt` argument parser: one subparser per entry of `SUBCOMMANDS`. Every flag
    has a help text that names its default."""
    parser = argparse.ArgumentParser(prog="guidance-ttt", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"guidance-ttt {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        _module(name).add_parser(sub)
    return parser


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's own parser, by name (`doctor`'s and `judge`'s own ones)."""
    parser = build_parser()
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    parsers = dict(choices)
    for name in SUBCOMMANDS:
        own = getattr(_module(name), "own_parser", None)
        if own is not None:
            parsers[name] = own()
    return parsers


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `guidance-ttt` console script; returns the exit status."""
    parser = build_parser()
    args, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if getattr(args, "passthrough", False):
        args.rest = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return int(_module(args.command).run(args))
    except (results.RunNotFound, ValueError, OSError, RuntimeError) as exc:
        print(f"guidance-ttt {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
