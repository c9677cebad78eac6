"""Problem kinds and their loaders: the one place that knows every kind of problem package.

`load_problem` reads a package's `config.yaml` and hands it to the loader of its kind: a
`type: gpu` package to `judges.gpu.package` (a Python kernel timed on a GPU), a `type: evaluator`
one to `judges.problems.evaluator` (an operator's `evaluate(program_path)`), every other type
to `judges.problems.package` (the CPU-checked kinds). It sits above both so that neither imports
the other: `problems/` knows nothing of `gpu/`, and `gpu/` builds on `problems/`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judges.gpu.package import load_gpu_problem
from judges.problems.evaluator import load_evaluator_problem
from judges.problems.package import (
    Problem,
    ProblemError,
    Suite,
    UnsupportedProblem,
    find_testlib,
    load_cpu_problem,
    read_config,
)

log = logging.getLogger("judges.kinds")


def _gpu(
    directory: Path, config: dict[str, Any], config_path: Path, suite: Suite | None, _testlib
) -> Problem:
    return load_gpu_problem(directory, config, str(config_path), suite)


# `type:` in config.yaml -> the loader of that kind; any other type is CPU-checked.
LOADERS: dict[str, Callable[..., Problem]] = {"gpu": _gpu, "evaluator": load_evaluator_problem}


def load_problem(
    directory: Path, suite: Suite | None = None, testlib: Path | None = None
) -> Problem:
    """Load one package of any kind; raise ProblemError naming what is missing or malformed.

    `testlib` is the directory holding `testlib.h`, needed by checker and interactor sources.
    """
    config, config_path = read_config(directory)
    loader = LOADERS.get(str(config.get("type")), load_cpu_problem)
    return loader(directory, config, config_path, suite, testlib)


def load_problems(root: Path, testlib: Path | None = None) -> dict[str, Problem]:
    """Load every servable package under `root`; log and skip the others.

    `testlib` defaults to `find_testlib(root)`. Raises ProblemError when `root` is not a
    directory or nothing under it can be served.
    """
    if not root.is_dir():
        raise ProblemError(f"problems directory {root} does not exist")
    testlib = testlib or find_testlib(root)
    problems: dict[str, Problem] = {}
    unsupported = 0
    for directory in sorted(path for path in root.iterdir() if path.is_dir()):
        if not (directory / "config.yaml").is_file():
            continue
        try:
            problems[directory.name] = load_problem(directory, testlib=testlib)
        except UnsupportedProblem as error:
            unsupported += 1
            log.info("skipping problem %s: %s", directory.name, error)
        except ProblemError as error:
            log.warning("skipping problem %s: %s", directory.name, error)
    if unsupported:
        log.info("skipped %d problems that cannot be checked here under %s", unsupported, root)
    if not problems:
        raise ProblemError(
            f"no servable problem under {root}: expected <id>/config.yaml with a checker source "
            "and testlib.h, an interactor, a verifier, or a built-in checker"
        )
    return problems
