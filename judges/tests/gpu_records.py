"""A GPU trial's record without a GPU: TriMul's score check, four cases and the events a
passing trial of them writes, from which `judges.gpu.record.build_record` builds the record the
judge answers. Shared by the judge's unit tests (test_gpu_judge_units.py) and the recipe's test
of its verdict on such a record (tests/harness/test_trimul_task_with_the_judge.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from judges.gpu.package import GpuCase

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "harbor" / "trimul"


def load_module(path: Path, name: str) -> Any:
    """The Python file `path` as a module of its own named `name` (a task's verifier and its
    score check are files of the task, no package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


score_check = load_module(TASK / "tests" / "score_check.py", "trimul_score_check")

CASES = (
    GpuCase("test", 1, {"seqlen": 32, "seed": 1}),
    GpuCase("test", 2, {"seqlen": 64, "seed": 2}),
    GpuCase("benchmark", 1, {"seqlen": 256, "seed": 3}),
    GpuCase("benchmark", 2, {"seqlen": 512, "seed": 4}),
)
SUITE = {"name": "public", "kind": "package", "label": "x", "comparableToFrontierCS": True}


def events(**overrides: Any) -> list[dict[str, Any]]:
    """The events a passing trial of CASES writes; `<event>=False` leaves that event out."""
    timing = {
        "runs": 4,
        "meanUs": 100.25,
        "stdUs": 1.0,
        "errUs": 0.5,
        "bestUs": 99.0,
        "worstUs": 101.0,
    }
    found = [
        {"event": "meta", "gpu": "NVIDIA H200", "torch": "2.11"},
        {"event": "startup", "status": "Accepted", "detail": "ready", "freezing": "cgroup"},
        *(
            {
                "event": "case",
                **case.to_json(),
                "runStatus": "Accepted",
                "durationNs": 5000,
                "detail": "max abs error 1.000e-04",
                "calls": 1,
            }
            for case in CASES[:2]
        ),
        {"event": "warmup", "calls": 5, "status": "Accepted"},
        {
            "event": "case",
            **CASES[2].to_json(),
            "runStatus": "Accepted",
            "calls": 5,
            "detail": "",
            "stats": timing,
            "charged": {"earlyNs": 0, "lateNs": 2000},
        },
        {
            "event": "case",
            **CASES[3].to_json(),
            "runStatus": "Accepted",
            "calls": 5,
            "detail": "",
            "stats": {**timing, "meanUs": 400.0},
            "charged": {},
        },
        {"event": "end", "status": "done", "healthyAfter": None},
    ]
    return [e for e in found if overrides.get(e.get("event"), True)]


def failing_events() -> list[dict[str, Any]]:
    """The events of a trial whose second test fails: the benchmarks never run."""
    found = events()
    found[3] = {
        "event": "case",
        **CASES[1].to_json(),
        "runStatus": "Wrong Answer",
        "detail": "3 of 8 elements differ",
        "calls": 1,
    }
    return [e for e in found if e.get("kind") != "benchmark"]
