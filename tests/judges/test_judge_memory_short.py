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
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.cgroups.files import cgroup_mounts, own_paths
from judges.service.process import cgroup_missing

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


def _small_cgroup() -> Iterator[Path]:
    """A memory cgroup of SHORT_BYTES below this process's own, where the probe moves itself
    (v1: a memory-hierarchy directory; v2: `short/leaf`, so that `short` can hold the judge's
    groups beside it). Skips, naming why, where none can be made."""
    missing = cgroup_missing()
    if missing is not None:
        pytest.skip(missing)
    mounts, own = cgroup_mounts(), own_paths()
    name = f"guidance-ttt-memory-short-{os.getpid()}"
    made: list[Path] = []
    try:
        if "memory" in mounts:
            short = mounts["memory"] / own.get("memory", "/").lstrip("/") / name
            short.mkdir()
            made.append(short)
            (short / "memory.limit_in_bytes").write_text(str(SHORT_BYTES))
            target = short
        else:
            base = mounts["cgroup2"] / own.get("", "/").lstrip("/")
            short = base / name
            short.mkdir()
            made.append(short)
            (short / "memory.max").write_text(str(SHORT_BYTES))
            target = short / "leaf"
            target.mkdir()
            made.append(target)
            (short / "cgroup.subtree_control").write_text("+memory +pids")
    except (OSError, KeyError) as error:
        for path in reversed(made):
            path.rmdir()
        pytest.skip(f"cannot make a small memory cgroup here: {error}")
    try:
        yield target
    finally:
        for path in reversed(made):
            for child in path.glob("guidance-ttt-judge-*"):
                shutil.rmtree(child, ignore_errors=True)
            path.rmdir()


@pytest.fixture(scope="module")
def probed() -> dict[str, str]:
    """What the judge made of each compile and run in the small cgroup."""
    for short in _small_cgroup():
        scratch = Path(tempfile.mkdtemp(prefix="gtj-short-"))  # reachable by the sandbox user
        scratch.chmod(0o755)
        try:
            (scratch / "bomb.cpp").write_text(BOMB)
            done = subprocess.run(
                [sys.executable, str(PROBE), str(short), str(scratch), str(scratch / "bomb.cpp")],
                cwd=REPO, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.splitlines()[-1])
    raise AssertionError("unreachable")


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
    assert probed["run_short"].startswith("Judge Out of Memory: "), probed
    assert probed["run_own"].startswith("Memory Limit Exceeded: "), probed
    assert "memory limit of 67108864 bytes" in probed["run_own"]
