"""Where the judge's problems come from: its flags, and the problem table they build.

    --frontiercs DIR     a FrontierCS checkout, its algorithmic/ folder or algorithmic/problems
    --problems DIR       any folder of problem packages (<id>/config.yaml), repeatable
    --task DIR           the judge packages a Harbor task ships (<task>/judge/<id>/), repeatable
    --public-cases DIR   a plain folder of Polyomino cases (1.in, 2.in, ...) served as problem 0
    --testlib DIR        the folder holding testlib.h (default: found next to the problems)
    (none of these)      a generated Polyomino suite served as problem 0

The sources may be combined; two sources offering the same problem id is an error naming both.
The FrontierCS repository is github.com/FrontierCS/Frontier-CS; this project pins commit
6d597dfb60be9e592881aef051b94e30d197c436 (see judges/README.md).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from judges.kinds import load_problem, load_problems
from judges.problems.package import (
    Problem,
    ProblemError,
    frontiercs_problems,
    load_public_cases,
)
from judges.problems.polyomino.generator import write_suite
from judges.verdicts.nofollow import refuse_links_below, refuse_unsafe_tree

log = logging.getLogger("judges.service.sources")

TASK_PACKAGES = "judge"  # the folder of a Harbor task that holds its judge packages


def absolute_path(text: str) -> Path:
    """A path flag, made absolute against the judge's working directory when it is parsed:
    runs (the GPU judge's trusted process, a checker) start in directories of their own, where a
    relative path would name nothing."""
    return Path(text).expanduser().absolute()


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the problem-source flags to the judge's argument parser."""
    parser.add_argument(
        "--frontiercs",
        type=absolute_path,
        action="append",
        default=[],
        metavar="DIR",
        help="a FrontierCS checkout (its algorithmic/problems is served), or that folder itself "
        "(repeatable; default: none)",
    )
    parser.add_argument(
        "--problems",
        type=absolute_path,
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of problem packages <id>/config.yaml (repeatable; default: none)",
    )
    parser.add_argument(
        "--task",
        type=absolute_path,
        action="append",
        default=[],
        metavar="DIR",
        help=f"a Harbor task directory whose {TASK_PACKAGES}/ packages are served "
        "(repeatable; default: none)",
    )
    parser.add_argument(
        "--public-cases",
        type=absolute_path,
        metavar="DIR",
        help="a plain folder of Polyomino cases (1.in ... 70.in), served as problem 0 "
        "(default: none; with no source at all a generated suite is served)",
    )
    parser.add_argument(
        "--testlib",
        type=absolute_path,
        metavar="DIR",
        help="folder holding testlib.h (default: found beside the problems, e.g. "
        "algorithmic/judge/include of a checkout)",
    )


def load_served_problems(args: argparse.Namespace) -> dict[str, Problem]:
    """The problems to serve from the flags; the generated Polyomino suite when none is given.

    Raises ProblemError naming the folder when a source holds nothing servable, or when two
    sources offer the same problem id.
    """
    found: dict[str, tuple[Problem, str]] = {}

    def add(problems: dict[str, Problem], source: str) -> None:
        for pid, problem in problems.items():
            if pid in found:
                raise ProblemError(
                    f"problem id {pid!r} is offered by both {found[pid][1]} and {source}; "
                    "serve one of them"
                )
            found[pid] = (problem, source)

    for checkout in args.frontiercs:
        root = frontiercs_problems(checkout)
        add(load_problems(root, args.testlib), f"--frontiercs {checkout}")
    for root in args.problems:
        add(load_problems(root, args.testlib), f"--problems {root}")
    for task in args.task:
        packages = task / TASK_PACKAGES
        if not packages.is_dir():
            raise ProblemError(f"{packages}: missing; a task served by the judge ships it")
        add(load_problems(packages, args.testlib), f"--task {task}")
    if args.public_cases is not None:
        add({"0": load_public_cases(args.public_cases)}, f"--public-cases {args.public_cases}")
    if found:
        return {pid: problem for pid, (problem, _) in found.items()}
    directory = args.state_dir / "generated" / f"seed-{args.seed}-cases-{args.generated_cases}"
    log.info("using the generated suite in %s", directory)
    refuse_links_below(args.state_dir, directory / "0")  # a link in the state dir: refused
    if (directory / "0").is_dir():
        refuse_unsafe_tree(directory / "0")  # nothing written or read through a link in it
    write_suite(directory / "0", args.seed, args.generated_cases)
    refuse_unsafe_tree(directory / "0")
    return {"0": load_problem(directory / "0")}
