"""Shared by the GPU judge's tests: a small TriMul package, submitting, and the attacks' verdicts.

The small package is the task's own (its reference module and config) with a few small cases
and fewer repeats, so a judging takes seconds; the attack programs are in
tests/programs/trimul/, each with the verdict it must end as.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
TASK = REPO / "harbor" / "trimul"
PACKAGE = TASK / "judge" / "trimul"
PROGRAMS = Path(__file__).resolve().parent / "programs" / "trimul"

#: program -> the first failing case's runStatus, or "valid" (every case passed).
ATTACKS = {
    "checker_patch.py": "Wrong Answer",
    "output_cache.py": "Wrong Answer",
    "view_of_input.py": "Wrong Answer",
    "nan_output.py": "Wrong Answer",
    "wrong_beyond_first.py": "Wrong Answer",
    "sandbox_probe.py": "Runtime Error",
    "timeout_hang.py": "Time Limit Exceeded",
}


def small_package(root: Path, seqlen: int = 8, dim: int = 16, hidden: int = 8,
                  call_timeout: str = "30s", **config: Any) -> Path:  # fmt: skip
    """A copy of the task's package with three small tests and two small benchmarks."""
    package = root / "trimul"
    package.mkdir(parents=True)
    shutil.copyfile(PACKAGE / "reference.py", package / "reference.py")
    settings = yaml.safe_load((PACKAGE / "config.yaml").read_text())
    settings.update({"call_timeout": call_timeout, "max_repeats": 5, "memory": "8g",
                     "tmpfs": "256m", **config})  # fmt: skip
    (package / "config.yaml").write_text(yaml.safe_dump(settings))

    def case(n: int, seed: int, nomask: bool, distribution: str, bs: int = 1) -> dict:
        return {"seqlen": n, "bs": bs, "dim": dim, "hiddendim": hidden, "seed": seed,
                "nomask": nomask, "distribution": distribution}  # fmt: skip

    cases = {
        "tests": [case(seqlen, 1, True, "normal"), case(seqlen, 2, False, "normal"),
                  case(seqlen, 3, True, "cauchy", bs=2)],
        "benchmarks": [case(seqlen, 4, True, "normal", bs=2), case(2 * seqlen, 5, False, "cauchy")],
    }  # fmt: skip
    (package / "cases.yaml").write_text(yaml.safe_dump(cases, sort_keys=False))
    return root


def judge_program(url: str, code: str, timeout: float = 900.0) -> dict[str, Any]:
    """Submit `code` for problem trimul and return its final record."""
    sid = httpx.post(f"{url}/submit", json={"pid": "trimul", "lang": "python", "code": code},
                     timeout=30).json()["sid"]  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = httpx.get(f"{url}/result/{sid}", timeout=30).json()
        if record["status"] != "queued":
            return record
        time.sleep(0.5)
    raise TimeoutError(f"submission {sid} not judged within {timeout:g} s")


def verdict(record: dict[str, Any]) -> str:
    """`valid` when every case passed, else the first failing case's runStatus."""
    if record.get("status") != "done":
        return f"error: {record.get('error')}"
    if record["passed"]:
        return "valid"
    return next(case["runStatus"] for case in record["cases"] if case["scoreRatio"] == 0.0)


def first_failure(record: dict[str, Any]) -> str:
    return next((c["msg"] for c in record.get("cases", []) if c["scoreRatio"] == 0.0), "")
