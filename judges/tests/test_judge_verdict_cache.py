"""The verdict cache: an identical submission is answered from the stored verdict, without running.

Against the real service (`python -m judges`, real g++ and sandbox) on a generated Polyomino
suite: a resubmission gets the same record marked as a hit naming the submission that was
judged, and the judge's count of case runs (`caseRuns` in /health) does not move; one changed
byte is judged; a restarted judge keeps the cache; identical submissions in flight are judged
once; a problem whose verdict is not a pure function of the source (what a timed GPU task
declares, `verdict_is_pure: false`; here on a Polyomino package) and the GPU kind itself (TriMul
on the GPU judge's CPU stand-in) are judged every time. The store's bound, its eviction order
and a damaged file are tested on the store itself.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.kinds import load_problem
from judges.problems.package import Problem, ProblemError, Suite, declared_purity
from judges.problems.polyomino.generator import write_suite
from judges.service.process import JudgeProcess, cgroup_missing
from judges.verdicts.cache import VerdictCache, VerdictStore, storable

PROGRAMS = Path(__file__).parent / "programs"
SHELF = (PROGRAMS / "shelf_packer.cpp").read_text()
CASES = 3
VERDICT_FIELDS = ("status", "passed", "result", "score", "scoreUnbounded", "cases", "suite")


def submit(url: str, code: str, pid: str = "0") -> int:
    files = {"code": ("solution.cpp", code.encode(), "text/x-c++src")}
    answer = httpx.post(f"{url}/submit", data={"pid": pid, "lang": "cpp"}, files=files, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["sid"]


def wait_final(url: str, sid: int, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/result/{sid}", timeout=10).json()
        if answer["status"] != "queued":
            return answer
        time.sleep(0.1)
    raise AssertionError(f"submission {sid} not judged within {timeout} s")


def health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/health", timeout=10).json()


def same_verdict(first: dict[str, Any], second: dict[str, Any]) -> None:
    for name in VERDICT_FIELDS:
        assert first[name] == second[name], name


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("judge-state")


@pytest.fixture(scope="module")
def judge(state: Path) -> Iterator[JudgeProcess]:
    with JudgeProcess(state, "--generated-cases", str(CASES), "--seed", "3") as running:
        yield running


@pytest.mark.slow
def test_an_identical_resubmission_gets_the_stored_verdict_without_running(
    judge: JudgeProcess,
) -> None:
    source = SHELF + "// submitted twice\n"  # no other test of the module's judge sends it
    first_sid = submit(judge.url, source)
    first = wait_final(judge.url, first_sid)
    assert first["status"] == "done" and first["verdictCache"] == {"hit": False}
    runs = health(judge.url)["caseRuns"]
    again = wait_final(judge.url, submit(judge.url, source))
    same_verdict(first, again)
    assert again["timing"] == first["timing"]  # the same document, not a new judging
    assert again["verdictCache"] == {"hit": True, "sid": first_sid}
    after = health(judge.url)
    assert after["caseRuns"] == runs
    assert after["verdictCache"]["hits"] >= 1


@pytest.mark.slow
def test_one_changed_byte_is_judged(judge: JudgeProcess) -> None:
    source = SHELF + "// and once more with a space\n"  # this test's own, whatever ran before
    wait_final(judge.url, submit(judge.url, source))
    runs = health(judge.url)["caseRuns"]
    changed = wait_final(judge.url, submit(judge.url, source + " "))
    assert changed["verdictCache"] == {"hit": False}
    assert health(judge.url)["caseRuns"] == runs + CASES


@pytest.mark.slow
def test_identical_submissions_in_flight_are_judged_once(judge: JudgeProcess) -> None:
    source = SHELF + "// in flight together\n"
    runs = health(judge.url)["caseRuns"]
    sids = [submit(judge.url, source) for _ in range(3)]
    records = [wait_final(judge.url, sid) for sid in sids]
    assert health(judge.url)["caseRuns"] == runs + CASES
    judged = [
        sid for sid, record in zip(sids, records, strict=True) if not record["verdictCache"]["hit"]
    ]
    assert len(judged) == 1
    for record in records:
        same_verdict(records[0], record)
        if record["verdictCache"]["hit"]:
            assert record["verdictCache"]["sid"] == judged[0]


@pytest.mark.slow
def test_a_compile_error_is_a_verdict_and_is_cached(judge: JudgeProcess) -> None:
    broken = "int main( { return 0; }\n"
    first_sid = submit(judge.url, broken)
    first = wait_final(judge.url, first_sid)
    assert first["errorKind"] == "compile"
    again = wait_final(judge.url, submit(judge.url, broken))
    assert again["error"] == first["error"]
    assert again["verdictCache"] == {"hit": True, "sid": first_sid}


@pytest.mark.slow
def test_a_restarted_judge_keeps_the_cache(state: Path, judge: JudgeProcess) -> None:
    source = SHELF + "// judged before the restart\n"
    first_sid = submit(judge.url, source)
    first = wait_final(judge.url, first_sid)
    judge.stop()
    with JudgeProcess(state, "--generated-cases", str(CASES), "--seed", "3") as restarted:
        again = wait_final(restarted.url, submit(restarted.url, source))
        assert again["verdictCache"] == {"hit": True, "sid": first_sid}
        same_verdict(first, again)
        assert health(restarted.url)["caseRuns"] == 0
    judge.start()  # the module's judge serves the remaining tests


@pytest.mark.slow
def test_a_problem_whose_verdict_is_not_pure_is_judged_every_time(tmp_path: Path) -> None:
    """`verdict_is_pure: false` is what a timed (GPU) task declares; a re-run is the point."""
    package = write_suite(tmp_path / "problems" / "0", seed=4, cases=2)
    with open(package / "config.yaml", "a") as config:
        config.write("verdict_is_pure: false\n")
    flags = ("--problems", str(tmp_path / "problems"))
    with JudgeProcess(tmp_path / "state", *flags) as running:
        first = wait_final(running.url, submit(running.url, SHELF))
        again = wait_final(running.url, submit(running.url, SHELF))
        assert first["verdictCache"] == again["verdictCache"] == {"hit": False, "bypassed": True}
        counts = health(running.url)
        assert counts["caseRuns"] == 4
        assert counts["verdictCache"]["bypassed"] == 2 and counts["verdictCache"]["hits"] == 0


@pytest.mark.slow
def test_without_a_cache_every_submission_is_judged(tmp_path: Path) -> None:
    flags = ("--generated-cases", "2", "--limit", "verdict-cache-mb=0")
    with JudgeProcess(tmp_path / "state", *flags) as running:
        records = [wait_final(running.url, submit(running.url, SHELF)) for _ in range(2)]
        assert all("verdictCache" not in record for record in records)
        assert health(running.url)["caseRuns"] == 4
        assert "verdictCache" not in health(running.url)
    assert not (tmp_path / "state" / "verdicts.sqlite").exists()


def test_purity_defaults_to_the_cpu_checked_kinds_and_can_be_declared(tmp_path: Path) -> None:
    def problem(kind: str, declared: bool | None = None) -> Problem:
        suite = Suite("package", "test", True)
        return Problem("7", tmp_path, (), None, suite, kind, declared_pure=declared)

    for kind in ("builtin", "checker", "interactive", "verifier"):
        assert problem(kind).verdict_is_pure
    assert not problem("gpu").verdict_is_pure  # a timed GPU benchmark
    assert not problem("a-kind-added-later").verdict_is_pure
    assert problem("gpu", declared=True).verdict_is_pure
    assert not problem("builtin", declared=False).verdict_is_pure
    assert declared_purity({}, "config.yaml") is None
    with pytest.raises(ProblemError, match="verdict_is_pure 'no' must be true or false"):
        declared_purity({"verdict_is_pure": "no"}, "config.yaml")


@pytest.mark.slow
def test_a_gpu_timed_problem_is_judged_every_time(tmp_path: Path) -> None:
    """The TriMul GPU kind on the GPU judge's CPU stand-in (what stands for the GPU here):
    an identical resubmission is timed again, never answered from the cache."""
    from gpu_judge_support import PROGRAMS as GPU_PROGRAMS
    from gpu_judge_support import judge_program, small_package

    if shutil.which("bwrap") is None or os.geteuid() != 0 or cgroup_missing() is not None:
        pytest.skip("the GPU judge's stand-in needs bubblewrap, root and a cgroup")
    packages = small_package(tmp_path / "packages", call_timeout="8s")
    flags = ("--problems", str(packages), "--workers", "1")
    with JudgeProcess(tmp_path / "state", *flags, test_mode=("gpu-cpu-stand-in",)) as running:
        code = (GPU_PROGRAMS / "honest.py").read_text()
        first, again = judge_program(running.url, code), judge_program(running.url, code)
        counts = health(running.url)["verdictCache"]
    assert first["status"] == again["status"] == "done", (first.get("error"), again.get("error"))
    assert first["verdictCache"] == again["verdictCache"] == {"hit": False, "bypassed": True}
    assert counts["bypassed"] == 2 and counts["hits"] == 0 and counts["entries"] == 0


def test_only_verdicts_are_stored() -> None:
    assert storable({"status": "done", "cases": []})
    assert storable({"status": "error", "errorKind": "compile", "error": "Error: …"})
    assert not storable({"status": "error", "errorKind": "judge", "error": "Error: …"})


def record_of(size: int, seed: int = 0) -> dict[str, Any]:
    """A record of `size` random bytes in hex: about 1.2 x `size` bytes compressed."""
    return {"status": "done", "cases": [{"output": random.Random(seed).randbytes(size).hex()}]}


def test_the_store_is_bounded_and_evicts_the_least_recently_used(tmp_path: Path) -> None:
    store = VerdictStore(tmp_path / "verdicts.sqlite", limit_bytes=4000)
    for number in range(3):
        store.put(f"key-{number}", number, record_of(1000, number))
    assert store.get("key-0") is not None  # now the most recently used
    store.put("key-3", 3, record_of(1000, 3))
    assert store.get("key-1") is None  # the least recently used went first
    assert [store.get(f"key-{n}") is not None for n in (0, 2, 3)] == [True, True, True]
    assert store.stats()["bytes"] <= 4000
    store.put("huge", 9, record_of(10_000))  # larger than the bound: not stored
    assert store.get("huge") is None and store.get("key-3") is not None
    store.close()
    reopened = VerdictStore(tmp_path / "verdicts.sqlite", limit_bytes=4000)
    assert reopened.get("key-3") == (3, record_of(1000, 3))
    assert reopened.stats()["entries"] == 3


def test_a_damaged_store_is_moved_aside_and_the_cache_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.sqlite"
    path.write_bytes(b"this is not an SQLite database" * 100)
    store = VerdictStore(path, limit_bytes=1 << 20)
    assert store.stats()["entries"] == 0
    store.put("key", 1, {"status": "done"})
    assert store.get("key") == (1, {"status": "done"})
    assert [p.name for p in tmp_path.glob("verdicts.sqlite.damaged-*")]


def test_a_failed_judging_lets_the_joined_submission_judge_itself(tmp_path: Path) -> None:
    """When the submission in flight fails (the judge's fault), an identical one waiting on it
    is judged itself instead of getting that failure."""
    problem = load_problem(write_suite(tmp_path / "0", seed=1, cases=1))
    cache = VerdictCache(VerdictStore(tmp_path / "verdicts.sqlite", 1 << 20), "context")
    cache.prepare({"0": problem})
    calls: list[int] = []

    async def scenario() -> tuple[Any, Any]:
        release = asyncio.Event()

        async def failing() -> dict[str, Any]:
            calls.append(1)
            await release.wait()
            return {"status": "error", "errorKind": "judge", "error": "Error: judge failure"}

        async def succeeding() -> dict[str, Any]:
            calls.append(2)
            return {"status": "done", "score": 1.0}

        first = asyncio.create_task(cache.judged(1, problem, "cpp", "x", failing))
        await asyncio.sleep(0)
        second = asyncio.create_task(cache.judged(2, problem, "cpp", "x", succeeding))
        for _ in range(20):  # let the second find the first in flight
            await asyncio.sleep(0.01)
        release.set()
        return await first, await second

    first, second = asyncio.run(scenario())
    assert calls == [1, 2]
    assert first["errorKind"] == "judge" and first["verdictCache"] == {"hit": False}
    assert second == {"status": "done", "score": 1.0, "verdictCache": {"hit": False}}
    assert cache.stats()["entries"] == 1
