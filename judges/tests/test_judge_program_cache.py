"""The compiled-checker caches hold only complete programs.

A problem's checker is compiled once and kept twice: in the judge's scratch directory and in
its state directory, each as a file whose existence means "compiled". A copy cut short (a full
disk, no descriptors left) must therefore never be left under that name, or every later
submission of the problem would run a truncated checker. The checker here is a real one-line
C++ program compiled in the real sandbox; only the copy's failure is simulated.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.kinds import load_problem
from judges.sandbox.runner import Sandbox
from judges.verdicts import programs as verdict_programs
from judges.verdicts.judging import CompileLimits

pytestmark = pytest.mark.slow


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    # Under /tmp itself, as the service does: the sandbox user must reach the scratch folder.
    scratch = Path(tempfile.mkdtemp(prefix="guidance-ttt-judge-test-"))
    try:
        running = Sandbox(scratch)
        yield running
        running.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def checker_problem(root: Path):  # type: ignore[no-untyped-def]
    package = root / "problems" / "7"
    (package / "testdata").mkdir(parents=True)
    (package / "testdata" / "1.in").write_text("1\n")
    (package / "testdata" / "1.ans").write_text("1\n")
    (package / "chk.cc").write_text("int main() { return 0; }\n")
    (package / "config.yaml").write_text(
        "type: default\nchecker: chk.cc\ntime: 1s\nmemory: 64m\n"
        "subtasks:\n- score: 100\n  n_cases: 1\n"
    )
    testlib = root / "include"
    testlib.mkdir()
    (testlib / "testlib.h").write_text("// not used by this checker\n")
    return load_problem(package, testlib=testlib)


def test_a_checker_copy_cut_short_is_never_taken_for_a_compiled_checker(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = checker_problem(sandbox.scratch / "data")  # where the sandbox user can read it
    store = tmp_path / "programs"
    real_copy = shutil.copyfile
    cut_short: list[str] = []

    def copy_that_fills_the_disk(source: Path, target: Path) -> Path:
        if not cut_short:  # the first copy writes half the program, then the disk is full
            data = Path(source).read_bytes()
            Path(target).write_bytes(data[: len(data) // 2])
            cut_short.append(str(target))
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        return real_copy(source, target)

    monkeypatch.setattr(verdict_programs.shutil, "copyfile", copy_that_fills_the_disk)
    cache = verdict_programs.ProgramCache(sandbox, store, CompileLimits())
    with pytest.raises(OSError, match="No space left on device"):
        cache.program(problem)
    assert cut_short
    leftovers = [path.name for path in sandbox.scratch.rglob("program")] + [
        path.name for path in store.rglob("program")
    ]
    assert leftovers == []  # neither cache holds the half-written program

    program, origin = cache.program(problem)
    assert origin == "compiled"  # compiled again, not served from a truncated copy
    saved = next(store.rglob("program"))
    assert program.read_bytes() == saved.read_bytes() and program.stat().st_size > 1000
    assert program.stat().st_mode & 0o111 and saved.stat().st_mode & 0o111
    again = verdict_programs.ProgramCache(sandbox, store, CompileLimits())
    shutil.rmtree(program.parent)
    assert again.program(problem)[1] == "disk"  # a restart takes the complete saved copy
