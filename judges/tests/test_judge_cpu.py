"""The judge's CPU bound and clock under CPU contention, against the running service.

Each test starts the judge inside a cpu cgroup of its own, below the host's: as in a container
or a systemd service with CPU accounting, where the scheduler weighs every process alike and no
autogroup applies (the case where a candidate's spinners once starved the program judged
beside it). Both need root and a cgroup whose cpu controller the judge can use; they skip with
the reason otherwise.

- A candidate forking 40 spinners, judged beside an innocent program that needs 0.5 s of CPU:
  the innocent one's record is the one it gets when judged alone, and the hog is held to one
  CPU (its CPU time never exceeds its elapsed time by more than the quota period allows).
- A run kept from its CPU (the test lowers the quota of the candidate's run group to 1 % of a
  CPU once it has started) until its real-time backstop is an infrastructure fault: the
  submission stays queued and the log says it is judged again; the next attempt, in a group of
  its own, gets the record the program gets unhindered — never a Time Limit Exceeded.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.cgroups.files import cgroup_mounts, kill_members, own_paths, write
from judges.cgroups.groups import CgroupUnavailable, detect
from judges.problems.polyomino.generator import generate_instance
from judges.service.process import JudgeProcess

PROGRAMS = Path(__file__).parent / "programs"
PERIOD_US = 100_000


def _cpu_bound_missing() -> str | None:
    if os.geteuid() != 0:
        return "putting the judge into a cgroup of the test's own needs root"
    try:
        bound = detect("auto")
    except CgroupUnavailable as error:
        return f"no cgroup bound on this host: {error}"
    bound.close()
    if bound.cpu is None:
        return f"the judge cannot bound a run's CPU here: {bound.cpu_missing}"
    return None


MISSING = _cpu_bound_missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(MISSING is not None, reason=f"{MISSING}")]


def spin_then_pack(idle_s: float, cpu_s: float) -> str:
    """A packer that first sleeps `idle_s`, then burns `cpu_s` of CPU time (by the process's
    own CPU clock, so the same work however loaded the host), then packs as shelf_packer."""
    return (
        "#include <ctime>\n#include <unistd.h>\nint packer_main();\n"
        f"int main() {{ usleep({round(idle_s * 1e6)});\n"
        f"  while (std::clock() < (std::clock_t)({cpu_s} * CLOCKS_PER_SEC)) {{}}\n"
        "  return packer_main(); }\n#define main packer_main\n"
        + (PROGRAMS / "shelf_packer.cpp").read_text()
    )


HOG = """
#include <sys/wait.h>
#include <unistd.h>
int main() {
    for (int i = 0; i < 40; ++i)
        if (fork() == 0) { volatile unsigned long spins = 0; for (;;) ++spins; }
    while (wait(nullptr) > 0) {}
}
"""


@contextlib.contextmanager
def cpu_cgroup(name: str) -> Iterator[tuple[int, Path]]:
    """A fresh cpu cgroup below this process's own, in the hierarchy the judge uses for CPU."""
    bound = detect("auto")
    bound.close()
    assert bound.cpu is not None
    if bound.cpu.version == 1:
        base = cgroup_mounts()["cpu"] / own_paths().get("cpu", "/").lstrip("/")
    else:
        base = cgroup_mounts()["cgroup2"]  # the root enables cpu for its children
    directory = base / name
    directory.mkdir()
    try:
        yield bound.cpu.version, directory
    finally:
        for group in sorted(directory.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if group.is_dir():
                kill_members(group)
                with contextlib.suppress(OSError):
                    group.rmdir()
        with contextlib.suppress(OSError):
            directory.rmdir()


def set_quota(version: int, group: Path, fraction: float) -> None:
    """Hold `group` to `fraction` of one CPU (a run's own group: v1 refuses a parent a quota
    below its children's)."""
    quota = round(fraction * PERIOD_US)
    if version == 1:
        write(group / "cpu.cfs_quota_us", str(quota))
    else:
        write(group / "cpu.max", f"{quota} {PERIOD_US}")


def judge_inside(group: Path, state: Path, *args: str) -> JudgeProcess:
    """The judge, started as a member of `group`, without its verdict cache: these tests judge
    one program twice and compare the two judgings."""
    judge = JudgeProcess(state, *args, "--limit", "verdict-cache-mb=0")
    entering = 'echo $$ > "$0" && exec "$@"'
    judge.command = ["sh", "-c", entering, str(group / "cgroup.procs"), *judge.command]
    return judge


def problem_package(root: Path, time_limit: float) -> Path:
    problem = root / "problems" / "0"
    (problem / "testdata").mkdir(parents=True)
    (problem / "testdata" / "1.in").write_text(generate_instance(31, 1))
    (problem / "config.yaml").write_text(
        f"time: {time_limit:g}s\nmemory: 256m\nsubtasks:\n- score: 100\n  n_cases: 1\n"
    )
    return root / "problems"


def submit(judge: JudgeProcess, code: str) -> int:
    answer = httpx.post(
        f"{judge.url}/submit",
        data={"pid": "0", "lang": "cpp"},
        files={"code": ("solution.cpp", code.encode(), "text/x-c++src")},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["sid"]


def result(judge: JudgeProcess, sid: int) -> dict[str, Any]:
    return httpx.get(f"{judge.url}/result/{sid}", timeout=30).json()


def wait_until(condition: Any, what: str, timeout: float = 300.0) -> Any:
    """Poll `condition()` until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def wait_final(judge: JudgeProcess, sid: int) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        answer = result(judge, sid)
        return answer if answer["status"] != "queued" else None

    return wait_until(final, f"the result of submission {sid}")


def verdict(record: dict[str, Any]) -> tuple[Any, ...]:
    assert record["status"] == "done", record
    (case,) = record["cases"]
    return record["score"], case["runStatus"], case["msg"], case["outputSha256"]


def test_a_cpu_hog_beside_an_innocent_program_leaves_its_verdict_unchanged(
    tmp_path: Path,
) -> None:
    problems = problem_package(tmp_path, time_limit=1.0)
    innocent = spin_then_pack(0.0, 0.5)
    with cpu_cgroup(f"guidance-ttt-test-hog-{os.getpid()}") as (_, group):
        args = ("--problems", str(problems), "--workers", "2")
        with judge_inside(group, tmp_path / "state", *args) as judge:
            alone = wait_final(judge, submit(judge, innocent))
            hog_sid = submit(judge, HOG)
            beside = wait_final(judge, submit(judge, innocent))
            hog = wait_final(judge, hog_sid)
    assert verdict(alone)[1] == "Accepted" and verdict(alone)[0] > 0
    assert verdict(beside) == verdict(alone)
    (hog_case,) = hog["cases"]
    assert hog_case["runStatus"] == "Time Limit Exceeded", hog_case
    assert "CPU time" in hog_case["msg"]
    # One CPU at most: CPU time over the run's elapsed time stays at 1 (+ a quota period).
    assert hog_case["cpuTime"] <= hog_case["time"] + 2 * PERIOD_US * 1000, hog_case


def candidate_group(directory: Path) -> Path | None:
    """The run group of the judge's (under `directory`) where the candidate (`/box/a`, command
    name `a`) runs, None before it starts."""
    for procs in directory.glob("run-*/cgroup.procs"):
        with contextlib.suppress(OSError):
            for pid in procs.read_text().split():
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "a":
                        return procs.parent
    return None


def test_a_run_starved_of_cpu_until_its_backstop_is_an_infrastructure_fault_not_a_verdict(
    tmp_path: Path,
) -> None:
    """Limit 0.5 s: wall-clock limit 1 s of the program's own time, backstop 10 s of real time.
    The candidate sleeps 0.4 s (its own time), then needs 0.25 s of CPU, which at 1 % of a CPU
    takes 25 s: the backstop stops it with its own time still under 1 s."""
    problems = problem_package(tmp_path, time_limit=0.5)
    program = spin_then_pack(0.4, 0.25)
    with cpu_cgroup(f"guidance-ttt-test-starved-{os.getpid()}") as (version, group):
        args = ("--problems", str(problems), "--workers", "1")
        with judge_inside(group, tmp_path / "state", *args) as judge:
            assert judge.process is not None
            runs = group / f"guidance-ttt-judge-{judge.process.pid}"
            unhindered = wait_final(judge, submit(judge, program))
            sid = submit(judge, program)
            run = wait_until(lambda: candidate_group(runs), "the candidate's start")
            set_quota(version, run, 0.01)  # this run only: the retry gets a group of its own
            logged = "the host is too loaded to judge it"
            wait_until(lambda: logged in judge.log_path.read_text(), "the starved run")
            assert result(judge, sid) == {"status": "queued"}  # no verdict was given
            final = wait_final(judge, sid)
            log = judge.log_path.read_text()
    assert verdict(unhindered)[1] == "Accepted"
    assert verdict(final) == verdict(unhindered)
    assert f"submission {sid}: the host is too loaded to judge it" in log
    assert "stopped by the real-time backstop of 10 s" in log
    assert "judging it again in 2 s (retry 1 of 6)" in log
