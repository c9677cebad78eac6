"""Hostile programs against the running local judge: each must end as that case's failure, and
the judge must keep serving (health answers, a following honest submission scores).

The judge serves a one-case FrontierCS-layout package built here (2 s, 256 MiB) so the limits
are hit quickly; all hostile programs are submitted at once and judged in parallel.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import judges
from judges.problems.polyomino.generator import generate_instance
from judges.service.process import JudgeProcess, cgroup_missing

PROGRAMS = Path(__file__).parent / "programs"
SANDBOX_UID = 64123  # a uid nothing else uses, so leftover processes can be counted
TIME_LIMIT_S = 2.0  # as on FrontierCS; with 1 s, a loaded host timed out the memory cases

pytestmark = pytest.mark.slow
CGROUP_MISSING = cgroup_missing()
needs_cgroup = pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}")


def wait_final(url: str, sid: int, timeout: float = 240.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/result/{sid}", timeout=10).json()
        if answer["status"] != "queued":
            return answer
        time.sleep(0.2)
    raise AssertionError(f"submission {sid} not judged within {timeout} s")


def submit(url: str, code: str) -> int:
    answer = httpx.post(
        f"{url}/submit",
        data={"pid": "0", "lang": "cpp"},
        files={"code": ("solution.cpp", code.encode(), "text/x-c++src")},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["sid"]


def c_strings(paths: list[Path]) -> str:
    return ", ".join(f'"{path}"' for path in paths)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sandbox-judge")
    problem = root / "problems" / "0"
    (problem / "testdata").mkdir(parents=True)
    (problem / "testdata" / "1.in").write_text(generate_instance(21, 1))
    (problem / "config.yaml").write_text(
        f"time: {TIME_LIMIT_S:g}s\nmemory: 256m\nsubtasks:\n- score: 100\n  n_cases: 1\n"
    )
    return {"root": root, "problems": root / "problems", "state": root / "state"}


@pytest.fixture(scope="module")
def judge(host: dict[str, Path]) -> Iterator[JudgeProcess]:
    args = ["--problems", str(host["problems"]), "--limit", "compile-time=4", "--workers", "2"]
    args += ["--sandbox-uid", str(SANDBOX_UID)]
    with JudgeProcess(host["state"], *args) as running:
        yield running


@pytest.fixture(scope="module")
def results(judge: JudgeProcess, host: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Every hostile program, submitted at once, judged to the end."""
    port = judge.url.rsplit(":", 1)[1]
    secrets = [
        host["state"] / "service.log",
        host["state"] / "submissions" / "0" / "1" / "source.code",
        host["problems"] / "0" / "testdata" / "1.in",
        Path(judges.__file__),
    ]
    host_dirs = [host["root"], host["state"], host["problems"], Path.home(), Path("/var/tmp")]
    sources = {
        name: (PROGRAMS / f"{name}.cpp").read_text()
        for name in (
            "infinite_loop",
            "memory_bomb",
            "fork_bomb",
            "stdout_flood",
            "compile_bomb",
            "fake_ratio",
            "userns_tmpfs_fill",
            "memfd_fill",
            "fork_children_fill",
        )
    }
    sources["read_secrets"] = (
        f"#define JUDGE_FILES {c_strings(secrets)}\n" + (PROGRAMS / "read_secrets.cpp").read_text()
    )
    sources["open_socket"] = (
        f"#define JUDGE_PORT {port}\n" + (PROGRAMS / "open_socket.cpp").read_text()
    )
    sources["write_outside"] = (
        f"#define HOST_DIRS {c_strings(host_dirs)}\n" + (PROGRAMS / "write_outside.cpp").read_text()
    )
    sids = {name: submit(judge.url, code) for name, code in sources.items()}
    return {name: wait_final(judge.url, sid) for name, sid in sids.items()}


def only_case(results: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    result = results[name]
    assert result["status"] == "done", result
    (case,) = result["cases"]
    assert result["score"] == 0 and case["scoreRatio"] == 0, case  # a failed case
    assert case["ok"] is False and "output" not in case
    return case


def test_infinite_loop_is_stopped_at_the_time_limit(results: dict) -> None:
    """Stopped for its CPU time (however long a loaded host took to give it that much)."""
    case = only_case(results, "infinite_loop")
    assert case["runStatus"] == "Time Limit Exceeded"
    assert case["cpuTime"] > TIME_LIMIT_S * 1e9
    assert f"exceeds the limit of {TIME_LIMIT_S:g} s" in case["msg"], case["msg"]


def test_memory_bomb_fails_at_the_memory_limit(results: dict) -> None:
    case = only_case(results, "memory_bomb")
    assert case["runStatus"] == "Memory Limit Exceeded", case
    assert 0.9 * (256 << 20) <= case["memory"] <= 256 << 20


def test_user_namespace_and_unsized_tmpfs_cannot_be_created(results: dict) -> None:
    case = only_case(results, "userns_tmpfs_fill")
    assert case["msg"] == "Nonzero Exit Status: exit status 3", case
    assert "unshare(CLONE_NEWUSER)" in case["stderr"]
    assert case["memory"] < 256 << 20


@needs_cgroup
def test_memfd_fill_is_memory_limit_exceeded_at_the_run_bound(results: dict) -> None:
    case = only_case(results, "memfd_fill")
    assert case["runStatus"] == "Memory Limit Exceeded", case
    assert "memory limit of 268435456 bytes" in case["msg"]
    assert 200 << 20 < case["memory"] <= 256 << 20  # the group's peak, at most the bound


@needs_cgroup
def test_forked_children_together_are_memory_limit_exceeded(results: dict) -> None:
    case = only_case(results, "fork_children_fill")
    assert case["runStatus"] == "Memory Limit Exceeded", case
    assert 200 << 20 < case["memory"] <= 256 << 20


def test_fork_bomb_is_contained_by_the_process_limit(results: dict) -> None:
    case = only_case(results, "fork_bomb")
    assert case["runStatus"] == "Time Limit Exceeded"
    counts = [int(n) for n in re.findall(r"fork refused after (\d+) forks", case["stderr"])]
    assert counts and max(counts) < 128, case["stderr"]


def test_stdout_flood_is_cut_at_the_output_limit(results: dict) -> None:
    case = only_case(results, "stdout_flood")
    assert case["runStatus"] == "Output Limit Exceeded"
    assert re.search(r"limit of 13421772[89] bytes", case["msg"]), case["msg"]  # 128 MiB


def test_host_secrets_and_judge_files_are_unreadable(results: dict) -> None:
    case = only_case(results, "read_secrets")
    assert case["msg"] == "Nonzero Exit Status: exit status 42", case["stderr"]
    assert "LEAK" not in case["stderr"]


def test_network_is_unreachable_even_the_judge_on_loopback(results: dict) -> None:
    case = only_case(results, "open_socket")
    assert case["msg"] == "Nonzero Exit Status: exit status 43", case["stderr"]


def test_writes_outside_the_private_tmp_fail(results: dict, host: dict[str, Path]) -> None:
    case = only_case(results, "write_outside")
    assert case["msg"] == "Nonzero Exit Status: exit status 44", case["stderr"]
    assert "WROTE /tmp/sandbox-escape.txt" in case["stderr"]  # the private /tmp is writable
    for directory in (host["root"], host["state"], host["problems"], Path.home()):
        assert not (directory / "sandbox-escape.txt").exists()


def test_ratio_claimed_on_stderr_scores_zero(results: dict) -> None:
    case = only_case(results, "fake_ratio")
    assert "Ratio" not in case["msg"] and "Ratio: 1.0" in case["stderr"]


def test_compile_bomb_hits_the_compile_limits(results: dict) -> None:
    result = results["compile_bomb"]
    assert result["status"] == "error" and result["errorKind"] == "compile", result
    assert result["error"].startswith("Error: compile failed: ")
    assert re.search(r"Time Limit Exceeded|Memory|memory exhausted|out of memory", result["error"])


def test_judge_keeps_serving_and_scores_an_honest_program(
    judge: JudgeProcess, results: dict
) -> None:
    assert len(results) == 12
    assert httpx.get(f"{judge.url}/health").json()["ok"] is True
    result = wait_final(judge.url, submit(judge.url, (PROGRAMS / "shelf_packer.cpp").read_text()))
    assert result["status"] == "done" and result["score"] > 10


@pytest.mark.skipif(os.geteuid() != 0, reason="the dedicated sandbox uid is used only as root")
def test_no_sandboxed_process_outlives_its_case(results: dict, judge: JudgeProcess) -> None:
    assert results  # all judged
    # This judge's runs, and only its runs: their cgroups are under the judge's own directory
    # (`guidance-ttt-judge-<pid>`), which a sandboxed process cannot leave. Another judge's
    # sandboxes on the same machine (a parallel test run, a service) are not this test's.
    mine = f"guidance-ttt-judge-{judge.process.pid}/"
    survivors = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid_line = next(
                line for line in status.read_text().splitlines() if line.startswith("Uid:")
            )
            groups = (status.parent / "cgroup").read_text()
        except (OSError, StopIteration):
            continue  # the process ended meanwhile
        if int(uid_line.split()[1]) == SANDBOX_UID and mine in groups:
            survivors.append(status.parent.name)
    assert survivors == []
