"""A judge short of memory is the judge's fault, never a verdict: a compiler or a program that
the kernel OOM-kills below its own memory bound (because the judge's cgroup — or the host — ran
out) raises `JudgeOutOfMemory`, which the engine retries and never caches, while a compile bomb
or a program that reaches its own bound is still the candidate's compile error or Memory Limit
Exceeded.

Real kernel, real sandbox, real g++: the probe (`memory_short_probe.py`) moves itself into a
200 MiB memory cgroup made here, which stands for a judge started under a tight `MemoryMax` (a
host short of memory kills the same way, from further up), then compiles and runs there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cgroup_support import moved_into, small_memory_cgroup
from gpu_judge_support import judge_program, small_package, stand_in_missing

from judges.service.process import JudgeProcess

pytestmark = pytest.mark.slow
PROBE = Path(__file__).with_name("memory_short_probe.py")
REPO = Path(__file__).resolve().parents[2]
SHORT_BYTES = 200 << 20
#: ~10⁷ initialisers by macro expansion: g++ needs about 700 MB before it gives up at 1 GiB.
BOMB = (
    "#define A0 1,2,3,4,5,6,7,8,9,10\n"
    + "".join(f"#define A{n} {','.join([f'A{n - 1}'] * 10)}\n" for n in range(1, 7))
    + "int a[] = {A6};\nint main() { return a[0] - 1; }\n"
)


@pytest.fixture(scope="module")
def probed() -> dict[str, str]:
    """What the judge made of each compile and run in the small cgroup."""
    with small_memory_cgroup(SHORT_BYTES) as short:
        scratch = Path(tempfile.mkdtemp(prefix="gtj-short-"))  # reachable by the sandbox user
        scratch.chmod(0o755)
        try:
            (scratch / "bomb.cpp").write_text(BOMB)
            done = subprocess.run(
                [sys.executable, str(PROBE), str(short), str(scratch), str(scratch / "bomb.cpp")],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_compiler_killed_for_the_judges_lack_of_memory_is_the_judges_failure(
    probed: dict[str, str],
) -> None:
    assert probed["compile_short"].startswith("JudgeOutOfMemory: compile: the kernel killed")
    assert "below its memory limit of 1073741824 bytes" in probed["compile_short"]


def test_a_compile_bomb_that_reaches_its_own_bound_is_the_candidates_compile_error(
    probed: dict[str, str],
) -> None:
    assert probed["compile_own"].startswith("compile failed: "), probed
    assert "memory" in probed["compile_own"]  # g++: "virtual memory exhausted" / "out of memory"


def test_a_program_killed_below_its_bound_is_not_memory_limit_exceeded(
    probed: dict[str, str],
) -> None:
    for kept in ("", "session_"):  # a sandbox of its own, and a submission's kept one
        assert probed[f"{kept}run_short"].startswith("Judge Out of Memory: "), probed
        assert probed[f"{kept}run_own"].startswith("Memory Limit Exceeded: "), probed
        assert "memory limit of 67108864 bytes" in probed[f"{kept}run_own"]


def test_a_gpu_candidate_killed_for_the_judges_lack_of_memory_is_a_judge_error(
    tmp_path: Path,
) -> None:
    """The GPU judge's CPU stand-in, started in a 1.5 GiB cgroup: a candidate that fills 3 GB
    at import, far below its own 8 GiB bound, is OOM-killed for the judge's sake. Its record is a
    `judge` error saying so (the harness retries it; no verdict is cached), not Memory Limit
    Exceeded."""
    missing = stand_in_missing()
    if missing is not None:
        pytest.skip(missing)
    packages = small_package(tmp_path / "packages", call_timeout="8s")
    filler = "blob = bytearray(3 << 30)  # 3 GB, every page written\n\n\n"
    filler += "def custom_kernel(data):\n    raise RuntimeError('never reached')\n"
    with small_memory_cgroup(1536 << 20) as short:
        judge = JudgeProcess(
            tmp_path / "state",
            "--problems",
            str(packages),
            "--gpus",
            "0",
            "--workers",
            "1",
            test_mode=("gpu-cpu-stand-in",),
        )
        judge.command = moved_into(short, judge.command)
        with judge:
            record = judge_program(judge.url, filler, timeout=600)
    assert record["status"] == "error" and record["errorKind"] == "judge", record
    assert "the judge ran out of memory: the kernel killed" in record["error"], record
