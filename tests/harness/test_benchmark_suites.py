"""The judge throughput benchmark measures the suite it is asked for, or stops saying why.

`--suite public` with the public cases absent must fail loudly, naming the missing folder, and
never measure another suite instead (which made an unchanged seed look like a gain before).
`SuiteMissing` is a `SystemExit`, so the script ends with status 1 and the message on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "judge_throughput.py"


def benchmark_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("judge_throughput", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def options(suite: str) -> argparse.Namespace:
    return argparse.Namespace(suite=suite, generated_cases=3, seed=0)


def test_public_suite_without_the_public_cases_fails_naming_them(tmp_path: Path) -> None:
    module = benchmark_module()
    module.PUBLIC_CASES = tmp_path / "absent"
    with pytest.raises(module.SuiteMissing, match="the public cases are absent"):
        module.judge_sources(REPO / "harbor" / "polyomino_packing", options("public"), tmp_path)


def test_public_suite_without_frontiercs_problem_one_fails_naming_it(tmp_path: Path) -> None:
    module = benchmark_module()
    module.FRONTIERCS = tmp_path / "absent"
    with pytest.raises(module.SuiteMissing, match="FrontierCS problem 1 is absent"):
        module.judge_sources(REPO / "harbor" / "treasure_packing", options("public"), tmp_path)


def test_generated_suite_is_only_what_was_asked_for(tmp_path: Path) -> None:
    module = benchmark_module()
    flags = module.judge_sources(
        REPO / "harbor" / "polyomino_packing", options("generated"), tmp_path
    )
    assert flags == ["--generated-cases", "3", "--seed", "0"]
    erdos = REPO / "harbor" / "erdos_min_overlap"
    assert module.judge_sources(erdos, options("public"), tmp_path) == ["--task", str(erdos)]
