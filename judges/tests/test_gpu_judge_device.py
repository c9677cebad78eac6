"""The GPU judge on a real GPU: honest candidates, Triton in the sandbox, every attack program.

Marked `gpu`: they need an NVIDIA GPU, CUDA torch and a judge running as root (the candidate
gets a uid of its own), and are skipped elsewhere with a one-line reason. They ran on the H200
through the device tool (judges/README.md, "The GPU judge", records the run). The small package
(judges/tests/gpu_judge_support.py) keeps each judging to seconds; the full task's figures come from
judges/benchmarks/trimul_acceptance.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gpu_judge_support import (
    ATTACKS,
    HONEST_SET,
    PROGRAMS,
    TASK,
    first_failure,
    gpu_missing,
    judge_program,
    small_package,
    verdict,
)

from judges.service.process import JudgeProcess

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(gpu_missing() is not None, reason=str(gpu_missing())),
]


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgeProcess]:
    root = tmp_path_factory.mktemp("gpu-judge")
    # compiling and autotuning need room: the task's compile budget, memory and /tmp
    packages = small_package(
        root / "packages",
        seqlen=64,
        dim=128,
        hidden=128,
        call_timeout="20s",
        compile_budget="300s",
        memory="32g",
        tmpfs="2g",
    )
    with JudgeProcess(root / "state", "--problems", str(packages), "--gpus", "0") as process:
        yield process


def test_the_seed_and_a_triton_candidate_are_valid_on_the_gpu(judge: JudgeProcess) -> None:
    for program in (TASK / "solution" / "solution.py", PROGRAMS / "triton_gate.py"):
        record = judge_program(judge.url, program.read_text())
        assert verdict(record) == "valid", first_failure(record)
        assert record["gpu"]["gpu"].startswith("NVIDIA") and record["value"] > 0
        benchmarks = [case for case in record["cases"] if case["kind"] == "benchmark"]
        assert all(case["timing"]["runs"] >= 3 for case in benchmarks)
        # The hardware floor: the device's peaks queried at start, each benchmark's floor
        # positive and below what an honest kernel is charged.
        peaks = record["gpu"]["peaks"]
        assert peaks["source"] == "device" and peaks["bandwidthGBs"] > 500 and peaks["tflops"] > 50
        assert all(0 < case["timing"]["floorUs"] < case["timing"]["bestUs"] for case in benchmarks)
        assert record["determinism"]["checked"], record.get("determinism")


@pytest.mark.parametrize("program", [*HONEST_SET, "environment_probe.py"])
def test_kernels_as_people_write_them_are_valid_in_the_sandbox(
    judge: JudgeProcess, program: str
) -> None:
    """Triton autotuning, torch.compile (also max-autotune), load_inline, float16 autocast,
    and the sandbox's user name and private caches (issue 48)."""
    record = judge_program(judge.url, (PROGRAMS / program).read_text())
    assert verdict(record) == "valid", first_failure(record) or record.get("error")
    first_calls = [case["time"] / 1e9 for case in record["cases"] if case["kind"] == "test"]
    print(
        f"{program}: judged in {record['timing']['trialSeconds']} s, first calls "
        f"{[round(t, 2) for t in first_calls]} s"
    )


@pytest.mark.parametrize("program", ["background_gpu.py", "early_done.py", "done_then_spin.py"])
def test_work_outside_the_calls_ends_the_trial_within_a_minute(
    judge: JudgeProcess, program: str
) -> None:
    record = judge_program(judge.url, (PROGRAMS / program).read_text())
    assert verdict(record) == "Time Limit Exceeded", first_failure(record)
    seconds = record["timing"]["trialSeconds"]
    print(f"{program}: {first_failure(record)[:300]} ({seconds} s)")
    assert seconds < 60, seconds


@pytest.mark.parametrize("program", sorted(ATTACKS))
def test_each_attack_ends_as_its_verdict_and_the_judge_keeps_serving(
    judge: JudgeProcess, program: str
) -> None:
    record = judge_program(judge.url, (PROGRAMS / program).read_text())
    assert verdict(record) == ATTACKS[program], first_failure(record)
    if program == "sandbox_probe.py":
        report = first_failure(record)
        assert "REACHABLE" not in report and '"judge reference files": "none visible"' in report
    if program == "timeout_hang.py":  # the hung kernel was killed: the GPU is fine after it
        assert record["gpu"]["healthyAfter"] is True
        honest = judge_program(judge.url, (PROGRAMS / "honest.py").read_text())
        assert verdict(honest) == "valid", first_failure(honest)


def test_side_stream_work_is_charged_and_an_early_return_gains_nothing(judge: JudgeProcess) -> None:
    honest = judge_program(judge.url, (PROGRAMS / "honest.py").read_text())
    side = judge_program(judge.url, (PROGRAMS / "side_stream.py").read_text())
    early = judge_program(judge.url, (PROGRAMS / "early_return.py").read_text())
    assert verdict(side) == "valid", first_failure(side)
    # The same arithmetic on a side stream is not faster than on the default stream.
    assert side["value"] > 0.8 * honest["value"]
    assert verdict(early) in ("valid", "Wrong Answer"), first_failure(early)
    if verdict(early) == "valid":
        assert early["value"] > 0.8 * honest["value"]


def test_task_package_is_served_with_its_gpu(tmp_path: Path) -> None:
    import httpx

    with JudgeProcess(tmp_path / "state", "--task", str(TASK), "--gpus", "0") as process:
        listing = httpx.get(f"{process.url}/problems").json()["problems"]
    (problem,) = listing
    assert problem["id"] == "trimul" and problem["device"]["available"] is True
    assert (problem["tests"], problem["benchmarks"]) == (18, 7)
