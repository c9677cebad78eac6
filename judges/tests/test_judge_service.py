"""The local judge service over real HTTP: `python -m judges` in a subprocess on 127.0.0.1.

Covers the FrontierCS surface (health, problems, submit as multipart, JSON or urlencoded with
the lang aliases, result polling), refusals that must not hurt the service (missing field,
unknown problem id, unknown lang, full queue), compile errors, the stderr-ratio exploit, and
persistence: results readable again, surviving a restart, unfinished work redone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.service import testing
from judges.service.process import JudgeProcess, cgroup_missing

PROGRAMS = Path(__file__).parent / "programs"
SHELF = (PROGRAMS / "shelf_packer.cpp").read_text()
CASES = 2

pytestmark = pytest.mark.slow
CGROUP_MISSING = cgroup_missing()


def submit(url: str, code: str, **fields: str) -> httpx.Response:
    """A multipart submission the way FrontierCS clients send it (a file part named `code`)."""
    data = {"pid": "0", "lang": "cpp", **fields}
    files = {"code": ("solution.cpp", code.encode(), "text/x-c++src")}
    return httpx.post(f"{url}/submit", data=data, files=files, timeout=30)


def wait_final(url: str, sid: int, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/result/{sid}", timeout=10)
        assert answer.status_code == 200, answer.text
        if answer.json()["status"] != "queued":
            return answer.json()
        time.sleep(0.1)
    raise AssertionError(f"submission {sid} not judged within {timeout} s")


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgeProcess]:
    state = tmp_path_factory.mktemp("judge-state")
    with JudgeProcess(state, "--generated-cases", str(CASES), "--seed", "5") as running:
        yield running


def test_port_zero_announces_a_loopback_address(judge: JudgeProcess) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", judge.url)
    assert not judge.url.endswith(":0")


def test_health_and_listing_label_the_generated_suite(judge: JudgeProcess) -> None:
    assert httpx.get(f"{judge.url}/health").json()["ok"] is True
    (problem,) = httpx.get(f"{judge.url}/problems").json()["problems"]
    assert problem["id"] == "0" and problem["cases"] == CASES
    assert problem["suite"]["kind"] == "generated"
    assert problem["suite"]["name"] == f"generated:5:{CASES}"
    assert problem["suite"]["comparableToFrontierCS"] is False


def test_multipart_submission_is_judged_and_its_result_can_be_read_again(
    judge: JudgeProcess,
) -> None:
    answer = submit(judge.url, SHELF)
    assert answer.status_code == 200
    sid = answer.json()["sid"]
    assert isinstance(sid, int)
    result = wait_final(judge.url, sid)
    assert result["status"] == "done", result
    assert len(result["cases"]) == CASES
    ratios = [case["scoreRatio"] for case in result["cases"]]
    assert all(0.1 < ratio < 1 for ratio in ratios)
    assert result["score"] == pytest.approx(100 * sum(ratios) / CASES, abs=1e-9)
    for case in result["cases"]:
        assert case["msg"].startswith("points ") and "(cells=" in case["msg"]
        assert case["runStatus"] == "Accepted" and case["ok"] is False
        assert case["status"] == "Wrong Answer"  # partial points, as FrontierCS reports them
        width, height = re.search(r"W=(\d+), H=(\d+)", case["msg"]).groups()
        assert case["output"].splitlines()[0] == f"{width} {height}"  # the program's stdout
    assert httpx.get(f"{judge.url}/result/{sid}").json() == result  # not read-once
    short = httpx.get(f"{judge.url}/result/{sid}", params={"short": "1"}).json()
    assert short == {"status": "done", "passed": False}


def test_json_and_urlencoded_submissions_accept_the_lang_aliases(judge: JudgeProcess) -> None:
    sids = []
    for lang in ("c++", "cxx", "cpp17", "gnu++17"):
        answer = httpx.post(f"{judge.url}/submit", json={"pid": 0, "lang": lang, "code": SHELF})
        assert answer.status_code == 200, answer.text
        sids.append(answer.json()["sid"])
    form = httpx.post(f"{judge.url}/submit", data={"pid": "0", "lang": "CPP", "code": SHELF})
    assert form.status_code == 200, form.text
    sids.append(form.json()["sid"])
    assert sids == sorted(sids) and len(set(sids)) == len(sids)
    scores = {wait_final(judge.url, sid)["score"] for sid in sids}
    assert len(scores) == 1  # the same program scores the same, however it was sent


@pytest.mark.parametrize(
    ("body", "missing"),
    [({"lang": "cpp", "code": "int main(){}"}, ["pid"]), ({"pid": "0", "lang": "cpp"}, ["code"])],
)
def test_missing_field_is_a_400_naming_it(judge: JudgeProcess, body: dict, missing: list) -> None:
    answer = httpx.post(f"{judge.url}/submit", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"] == "pid/lang/code required"
    assert answer.json()["missing"] == missing


def test_unknown_problem_id_is_refused_and_the_judge_keeps_serving(judge: JudgeProcess) -> None:
    answer = submit(judge.url, SHELF, pid="999")
    assert answer.status_code == 400
    assert "unknown problem id '999'" in answer.json()["error"]
    assert httpx.get(f"{judge.url}/health").json()["ok"] is True
    assert wait_final(judge.url, submit(judge.url, SHELF).json()["sid"])["status"] == "done"


def test_unsupported_language_is_refused(judge: JudgeProcess) -> None:
    answer = submit(judge.url, "print(1)", lang="python3")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "unsupported lang 'python3' for problem 0" in error and "it takes cpp" in error


def test_result_of_unknown_or_malformed_sid(judge: JudgeProcess) -> None:
    assert httpx.get(f"{judge.url}/result/987654").status_code == 404
    assert httpx.get(f"{judge.url}/result/987654").json() == {"error": "not found"}
    assert httpx.get(f"{judge.url}/result/abc").status_code == 400


def test_compile_error_is_an_error_record_with_the_compiler_message(judge: JudgeProcess) -> None:
    result = wait_final(
        judge.url, submit(judge.url, "int main() { this is not C++ }\n").json()["sid"]
    )
    assert result["status"] == "error"
    assert result["error"].startswith("Error: compile failed: ")
    assert "error:" in result["error"]  # g++'s own diagnostic
    assert result["errorKind"] == "compile"


def test_program_claiming_a_ratio_on_stderr_and_failing_gets_ratio_zero(
    judge: JudgeProcess,
) -> None:
    result = wait_final(
        judge.url, submit(judge.url, (PROGRAMS / "fake_ratio.cpp").read_text()).json()["sid"]
    )
    assert result["status"] == "done"
    assert result["score"] == 0
    for case in result["cases"]:
        assert case["scoreRatio"] == 0 and case["scoreRatioUnbounded"] == 0
        assert case["msg"] == "Nonzero Exit Status: exit status 1"
        assert "Ratio: 1.0" in case["stderr"] and "Ratio" not in case["msg"]


def test_results_and_a_queued_submission_survive_a_restart_and_sids_keep_increasing(
    tmp_path: Path,
) -> None:
    """One judge stopped (SIGTERM, a clean stop) with one result stored and one submission
    accepted but not yet judged; the next judge on the same state directory serves the stored
    result, judges the accepted submission, and numbers new submissions after both."""
    state = tmp_path / "state"
    slow = (PROGRAMS / "infinite_loop.cpp").read_text()
    first = JudgeProcess(state, "--generated-cases", "1", "--seed", "9").start()
    try:
        sid = submit(first.url, SHELF).json()["sid"]
        result = wait_final(first.url, sid)
        queued = submit(first.url, slow).json()["sid"]
        assert httpx.get(f"{first.url}/result/{queued}").json() == {"status": "queued"}
    finally:
        assert first.stop() == 0  # SIGTERM is a clean stop
    with JudgeProcess(state, "--generated-cases", "1", "--seed", "9") as second:
        assert httpx.get(f"{second.url}/result/{sid}").json() == result
        assert httpx.get(f"{second.url}/result/{sid}").json() == result
        late = wait_final(second.url, queued)
        assert late["status"] == "done"
        assert late["cases"][0]["runStatus"] == "Time Limit Exceeded"
        assert submit(second.url, SHELF).json()["sid"] == queued + 1


def test_full_queue_refuses_with_503_and_retry_after(tmp_path: Path) -> None:
    """Room for one waiting submission: while a program that runs to its time limit holds one of
    the engine's two dispatchers (DISPATCHERS), at most two of the next five are taken (one by
    the other dispatcher, one waiting) and the others are refused with 503 and Retry-After;
    every accepted one is judged, and then there is room again."""
    args = ("--generated-cases", "1", "--seed", "9", "--workers", "1", "--limit", "max-queue=1")
    slow = (PROGRAMS / "infinite_loop.cpp").read_text()
    with JudgeProcess(tmp_path / "state", *args) as judge:
        first = submit(judge.url, slow)
        assert first.status_code == 200, first.text
        answers = [submit(judge.url, SHELF) for _ in range(5)]
        codes = [answer.status_code for answer in answers]
        assert codes.count(200) <= 2 and codes.count(503) == 5 - codes.count(200), codes
        for refused in (answer for answer in answers if answer.status_code == 503):
            assert "queue full" in refused.json()["error"]
            assert int(refused.headers["Retry-After"]) > 0
        for answer in [first, *(answer for answer in answers if answer.status_code == 200)]:
            assert wait_final(judge.url, answer.json()["sid"])["status"] == "done"
        assert submit(judge.url, SHELF).status_code == 200  # room again once judged


def test_port_in_use_is_a_startup_failure(tmp_path: Path, judge: JudgeProcess) -> None:
    port = judge.url.rsplit(":", 1)[1]
    command = [sys.executable, "-m", "judges", "--port", port, "--generated-cases", "1"]
    command += ["--state-dir", str(tmp_path / "state")]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 2
    assert "guidance-ttt-judge: error:" in finished.stderr


def test_startup_failure_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-problems"
    command = [sys.executable, "-m", "judges", "--port", "0", "--problems", str(missing)]
    command += ["--state-dir", str(tmp_path / "state")]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert f"problems directory {missing} does not exist" in finished.stderr


@pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}")
def test_startup_names_the_cgroup_bound_in_force(judge: JudgeProcess) -> None:
    log = judge.log_path.read_text()
    assert re.search(r"sandbox bound: cgroup v[12]: each sandboxed run gets its own group", log)
    # and which CPU bound is in force, and how time limits are judged
    assert re.search(r"; CPU: each run at most one CPU, all runs equal|CPU NOT BOUNDED", log)
    assert "time limits: a case's CPU time against its limit" in log


def test_without_a_cgroup_the_judge_refuses_to_start_unless_told(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "judges", "--port", "0", "--generated-cases", "1"]
    command += ["--state-dir", str(tmp_path / "state")]
    off = {**os.environ, testing.VARIABLE: "cgroup=off"}  # no cgroup, as on a host without one
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120, env=off)
    assert finished.returncode == 2
    (line,) = [x for x in finished.stderr.splitlines() if x.startswith("guidance-ttt-judge:")]
    assert "no cgroup can bound a run's memory here" in line
    assert "--accept-per-process-limits" in line
    flags = ("--generated-cases", "1", "--accept-per-process-limits")
    with JudgeProcess(tmp_path / "state", *flags, test_mode=("cgroup=off",)) as weak:
        assert httpx.get(f"{weak.url}/health", timeout=10).json()["ok"] is True
        assert "sandbox bound: PER-PROCESS RLIMITS ONLY" in weak.log_path.read_text()
