"""The GPU judge's whole protocol on a machine without a GPU, and its refusal there.

Without a GPU the real judge says so in one line at start, lists the problem as needing one,
answers a submission with a `judge` error (never a score) and makes `task check` refuse in one
line. With `--gpu-cpu-stand-in` it runs the complete protocol — trusted process, sandboxed
worker, control block, frozen candidate, fresh inputs every call — on CPU tensors shared
through memory files instead of CUDA IPC (that stand-in is what stands for the GPU here), so
every attack program that does not need a GPU gets its verdict on CPU too. The same attacks on
the H200 are tests/test_gpu_judge_device.py.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.cli import task as task_command
from judges.service.process import JudgeProcess, cgroup_missing
from tests.gpu_judge_support import (
    ATTACKS,
    PROGRAMS,
    TASK,
    first_failure,
    judge_program,
    small_package,
    verdict,
)


def _stand_in_missing() -> str | None:
    if shutil.which("bwrap") is None:
        return "needs bubblewrap (bwrap)"
    if os.geteuid() != 0:
        return "needs the judge to run as root (GPU candidates run under a uid of their own)"
    return cgroup_missing()


pytestmark = pytest.mark.slow


def test_without_a_gpu_the_judge_says_so_once_and_refuses_as_its_own_fault(
    tmp_path: Path,
) -> None:
    with JudgeProcess(tmp_path / "state", "--task", str(TASK)) as judge:
        (problem,) = httpx.get(f"{judge.url}/problems").json()["problems"]
        record = judge_program(judge.url, (TASK / "solution" / "solution.py").read_text())
        lines: list[str] = []
        status = task_command.main(["check", str(TASK), "--judge-url", judge.url], lines.append)
    assert problem["device"]["available"] is False
    assert record["status"] == "error" and record["errorKind"] == "judge"
    assert "needs a GPU and this judge has none" in record["error"]
    said = [line for line in judge.log_path.read_text().splitlines() if "GPU judge" in line]
    assert len(said) == 1 and "no usable GPU here" in said[0], said
    failed = [line for line in lines if line.startswith("FAIL")]
    assert status == 1 and len(failed) == 1, lines
    assert failed[0].startswith("FAIL judge: problem trimul needs a GPU and the judge at")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgeProcess]:
    missing = _stand_in_missing()
    if missing is not None:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("stand-in")
    packages = small_package(root / "packages", call_timeout="8s")
    with JudgeProcess(root / "state", "--problems", str(packages), "--gpu-cpu-stand-in",
                      "--workers", "1") as judge:  # fmt: skip
        yield judge


def test_an_honest_candidate_gets_a_full_record_of_every_case(stand_in: JudgeProcess) -> None:
    record = judge_program(stand_in.url, (PROGRAMS / "honest.py").read_text())
    assert verdict(record) == "valid", first_failure(record)
    kinds = [(case["kind"], case["index"]) for case in record["cases"]]
    assert kinds == [("test", 1), ("test", 2), ("test", 3), ("benchmark", 1), ("benchmark", 2)]
    for case in record["cases"]:
        assert case["status"] == "Correct" and case["msg"].startswith("pass: ")
    benchmarks = record["cases"][3:]
    assert all(3 <= case["timing"]["runs"] <= 5 for case in benchmarks)
    assert record["value"] > 0 and record["valueMean"] == "geometric"
    assert record["gpu"]["gpu"] == "none (CPU stand-in)" and record["warmup"]["calls"] >= 3


@pytest.mark.parametrize("program", sorted(ATTACKS))
def test_each_attack_ends_as_its_verdict_on_the_stand_in(stand_in: JudgeProcess,
                                                         program: str) -> None:  # fmt: skip
    record = judge_program(stand_in.url, (PROGRAMS / program).read_text())
    assert verdict(record) == ATTACKS[program], first_failure(record)
    if program == "sandbox_probe.py":
        report = first_failure(record)
        assert "REACHABLE" not in report and '"judge reference files": "none visible"' in report
    if program == "timeout_hang.py":
        assert "within the limit of 8 s" in first_failure(record)
        honest = judge_program(stand_in.url, (PROGRAMS / "honest.py").read_text())
        assert verdict(honest) == "valid", first_failure(honest)


def test_a_package_named_by_a_relative_path_is_judged(tmp_path: Path) -> None:
    """`--problems packages` (or `--task harbor/trimul`) relative to the judge's working
    directory: the trusted process runs in its own directory, so every path the package names
    must be resolved when the package is loaded (found on the H200 by `task check`)."""
    missing = _stand_in_missing()
    if missing is not None:
        pytest.skip(missing)
    small_package(tmp_path / "packages", call_timeout="8s")
    with JudgeProcess(tmp_path / "state", "--problems", "packages", "--gpu-cpu-stand-in",
                      "--workers", "1", cwd=tmp_path) as judge:  # fmt: skip
        record = judge_program(judge.url, (PROGRAMS / "honest.py").read_text())
    assert verdict(record) == "valid", first_failure(record) or record.get("error")
