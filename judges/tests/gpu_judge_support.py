"""Shared by the GPU judge's tests: a small TriMul package, submitting, and the attacks' verdicts.

The small package is the task's own (its reference module and config) with a few small cases
and fewer repeats, so a judging takes seconds; the attack programs are in
programs/trimul/ (beside this file), each with the verdict it must end as.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[2]
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
    # the DONE -> DESCRIBED window is charged, and beyond the limit on work outside the calls
    "early_done.py": "Time Limit Exceeded",
    "done_then_spin.py": "Time Limit Exceeded",  # no description within the answer limit
    "changes_after_check.py": "Wrong Answer",  # the second check after the timed loop
    "nondeterministic.py": "valid",  # flagged by the determinism check, never failed
}
#: Honest candidates as kernel authors and executor models write them (issue 48): Triton
#: autotuning, torch.compile (twice), a load_inline CUDA kernel, float16 mixed precision. Each
#: must be valid on a GPU and timed like the plain event loop
#: (judges/benchmarks/trimul_acceptance.py).
HONEST_SET = (
    "triton_autotune.py", "torch_compile.py", "torch_compile_max_autotune.py",
    "load_inline_cuda.py", "mixed_fp16.py",
)  # fmt: skip


def small_package(root: Path, seqlen: int = 8, dim: int = 16, hidden: int = 8,
                  call_timeout: str = "30s", name: str = "trimul",
                  **config: Any) -> Path:  # fmt: skip
    """A copy of the task's package with three small tests and two small benchmarks (and
    the determinism check on), as problem `name`; its compile budget is one call's limit
    unless `config` says otherwise."""
    package = root / name
    package.mkdir(parents=True)
    shutil.copyfile(PACKAGE / "reference.py", package / "reference.py")
    settings = yaml.safe_load((PACKAGE / "config.yaml").read_text())
    settings.update({"call_timeout": call_timeout, "compile_budget": call_timeout,
                     "max_repeats": 5, "memory": "8g", "tmpfs": "256m",
                     "determinism_check": True, **config})  # fmt: skip
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


def submit_program(url: str, code: str, pid: str = "trimul") -> int:
    """Submit `code` for problem `pid`; its submission id."""
    return httpx.post(f"{url}/submit", json={"pid": pid, "lang": "python", "code": code},
                      timeout=30).json()["sid"]  # fmt: skip


def wait_record(url: str, sid: int, timeout: float = 900.0) -> dict[str, Any]:
    """The final record of submission `sid` (polled, bounded by `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = httpx.get(f"{url}/result/{sid}", timeout=30).json()
        if record["status"] != "queued":
            return record
        time.sleep(0.5)
    raise TimeoutError(f"submission {sid} not judged within {timeout:g} s")


def judge_program(url: str, code: str, timeout: float = 900.0, pid: str = "trimul") -> dict:
    """Submit `code` for problem `pid` and return its final record."""
    return wait_record(url, submit_program(url, code, pid), timeout)


def verdict(record: dict[str, Any]) -> str:
    """`valid` when every case passed, else the first failing case's runStatus."""
    if record.get("status") != "done":
        return f"error: {record.get('error')}"
    if record["passed"]:
        return "valid"
    return next(case["runStatus"] for case in record["cases"] if case["scoreRatio"] == 0.0)


def first_failure(record: dict[str, Any]) -> str:
    return next((c["msg"] for c in record.get("cases", []) if c["scoreRatio"] == 0.0), "")


def stand_in_missing() -> str | None:
    """Why the GPU judge's CPU stand-in cannot run here, or None."""
    import os

    from judges.service.process import cgroup_missing

    if shutil.which("bwrap") is None:
        return "needs bubblewrap (bwrap)"
    if os.geteuid() != 0:
        return "needs the judge to run as root (GPU candidates run under a uid of their own)"
    return cgroup_missing()


def gpu_missing() -> str | None:
    """Why the GPU judge cannot run here (a one-line reason to skip with), or None."""
    try:
        import torch
    except ImportError:
        return "needs torch with CUDA (torch is not installed)"
    if not torch.cuda.is_available():
        return "needs an NVIDIA GPU with CUDA torch (torch.cuda.is_available() is False)"
    if os.geteuid() != 0:
        return "needs the judge to run as root (the GPU candidate runs under a uid of its own)"
    return None
