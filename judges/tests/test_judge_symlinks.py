"""The judge writes nothing through a symbolic link in its state directory.

Submissions, results and the verdict cache live under `--state-dir`; a link placed there would
send the judge's writes elsewhere. Each is refused naming the path, the linked-to file is left
as it was, and a judge started on a state directory with a linked `submissions/` stops at
start in one line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.service.process import JudgeProcess
from judges.verdicts.cache import CACHE_FILE, VerdictStore
from judges.verdicts.nofollow import SymlinkRefused
from judges.verdicts.store import SubmissionStore

OUTSIDE = "not the judge's\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside.txt"
    target.write_text(OUTSIDE)
    return target


def test_a_result_is_not_written_through_a_link(tmp_path: Path, outside: Path) -> None:
    store = SubmissionStore(tmp_path / "state")
    sid = store.create("0", "cpp", "int main() {}")
    result = store.path(sid) / "result.json"
    result.symlink_to(outside)
    with pytest.raises(SymlinkRefused, match="symbolic link"):
        store.save_result(sid, b"{}")
    temporary = store.path(sid) / ".result.json.tmp"
    result.unlink()
    temporary.symlink_to(outside)  # a link at the temporary name is refused too
    with pytest.raises(SymlinkRefused):
        store.save_result(sid, b"{}")
    assert outside.read_text() == OUTSIDE


def test_the_verdict_cache_is_not_opened_through_a_link(tmp_path: Path, outside: Path) -> None:
    (tmp_path / CACHE_FILE).symlink_to(outside)
    with pytest.raises(SymlinkRefused, match=CACHE_FILE):
        VerdictStore(tmp_path / CACHE_FILE, 1 << 20)
    assert outside.read_text() == OUTSIDE


@pytest.mark.slow
def test_a_judge_on_a_linked_submissions_folder_stops_at_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (state / "submissions").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "judges",
            "--port",
            "0",
            "--state-dir",
            str(state),
            "--generated-cases",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("guidance-ttt-judge: error: ") and "symbolic link" in lines[-1]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def start_refused(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A judge started on `state`, expected to stop at start."""
    return subprocess.run(
        [sys.executable, "-m", "judges", "--port", "0", "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def outside_submission(folder: Path) -> Path:
    """A submission's files outside the state directory, for links to point at."""
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"sid": 1, "pid": "0", "lang": "cpp", "ts": 0}))
    (folder / "source.code").write_text(OUTSIDE)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("linked", ["bucket", "submission", "generated"])
def test_a_judge_on_a_linked_state_folder_stops_at_start_in_one_line(
    tmp_path: Path, linked: str
) -> None:
    state = tmp_path / "state"
    elsewhere = outside_submission(tmp_path / "elsewhere")
    before = sorted(path.name for path in elsewhere.iterdir())
    if linked == "bucket":
        (state / "submissions").mkdir(parents=True)
        (state / "submissions" / "0").symlink_to(elsewhere, target_is_directory=True)
    elif linked == "submission":
        (state / "submissions" / "0").mkdir(parents=True)
        (state / "submissions" / "0" / "1").symlink_to(elsewhere, target_is_directory=True)
    else:
        state.mkdir()
        (state / "generated").symlink_to(elsewhere, target_is_directory=True)
    done = start_refused(state, "--generated-cases", "1")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("guidance-ttt-judge: error: ") and "symbolic link" in lines[-1]
    assert "Traceback" not in done.stderr
    assert sorted(path.name for path in elsewhere.iterdir()) == before
    assert (elsewhere / "source.code").read_text() == OUTSIDE


@pytest.mark.slow
def test_links_and_a_fifo_in_the_state_directory_are_not_followed_and_the_judge_serves(
    tmp_path: Path,
) -> None:
    """Before start: a leftover `.incoming-5` linked to a folder outside (its files must stay),
    and an unfinished submission 1 whose `source.code` links to a file outside (never judged
    as its source, never removed). After a submission is judged: its `result.json` becomes a
    FIFO (read, it would block), then a link to a file outside (it would be served). Each is a
    judge error saying why, the outside files are as they were, and /health still answers."""
    state = tmp_path / "state"
    bucket = state / "submissions" / "0"
    bucket.mkdir(parents=True)
    leftover = outside_submission(tmp_path / "leftover")
    (bucket / ".incoming-5").symlink_to(leftover, target_is_directory=True)
    secret = tmp_path / "secret.txt"
    secret.write_text(OUTSIDE)
    (bucket / "1").mkdir()
    (bucket / "1" / "meta.json").write_text(json.dumps({"sid": 1, "pid": "0", "lang": "cpp"}))
    (bucket / "1" / "source.code").symlink_to(secret)
    with JudgeProcess(state, "--generated-cases", "1", "--workers", "1") as judge:
        unfinished = wait_final(judge, 1)
        assert unfinished["status"] == "error" and unfinished["errorKind"] == "judge"
        assert "source.code is a symbolic link" in unfinished["error"]
        assert not (bucket / ".incoming-5").exists() and (leftover / "source.code").is_file()
        code = {"pid": "0", "lang": "cpp", "code": "int main() { return 0; }\n"}
        sid = httpx.post(f"{judge.url}/submit", json=code, timeout=30).json()["sid"]
        assert wait_final(judge, sid)["status"] == "done"
        result = bucket / str(sid) / "result.json"
        result.unlink()
        os.mkfifo(result)
        served = httpx.get(f"{judge.url}/result/{sid}", timeout=30).json()
        assert served["errorKind"] == "judge" and "is a FIFO" in served["error"], served
        assert httpx.get(f"{judge.url}/health", timeout=10).json()["ok"] is True
        result.unlink()
        result.symlink_to(secret)
        served = httpx.get(f"{judge.url}/result/{sid}", timeout=30)
        assert OUTSIDE.strip() not in served.text and "symbolic link" in served.json()["error"]
        log = judge.log_path.read_text()
    assert secret.read_text() == OUTSIDE and (leftover / "meta.json").is_file()
    assert "Traceback" not in log


def wait_final(judge: JudgeProcess, sid: int, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = httpx.get(f"{judge.url}/result/{sid}", timeout=10).json()
        if answer["status"] != "queued":
            return answer
        time.sleep(0.1)
    raise AssertionError(f"submission {sid} not judged within {timeout:g} s")


@pytest.mark.slow
def test_a_linked_programs_folder_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path,
) -> None:
    from judges.kinds import load_problem
    from judges.sandbox.runner import Sandbox
    from judges.verdicts.judging import CompileLimits
    from judges.verdicts.programs import ProgramCache

    scratch = Path(tempfile.mkdtemp(prefix="guidance-ttt-judge-test-"))  # reachable by the box
    try:
        package = scratch / "problems" / "7"
        (package / "testdata").mkdir(parents=True)
        (package / "testdata" / "1.in").write_text("1\n")
        (package / "chk.cc").write_text("int main() { return 0; }\n")
        (package / "config.yaml").write_text(
            "type: default\nchecker: chk.cc\ntime: 1s\nmemory: 64m\n"
            "subtasks:\n- score: 100\n  n_cases: 1\n"
        )
        (scratch / "include").mkdir()
        (scratch / "include" / "testlib.h").write_text("// not used by this checker\n")
        problem = load_problem(package, testlib=scratch / "include")
        sandbox = Sandbox(scratch / "box")
        try:
            elsewhere = tmp_path / "elsewhere"
            elsewhere.mkdir()
            (tmp_path / "state").mkdir()
            (tmp_path / "state" / "programs").symlink_to(elsewhere, target_is_directory=True)
            cache = ProgramCache(sandbox, tmp_path / "state" / "programs", CompileLimits())
            with pytest.raises(SymlinkRefused, match="programs is a symbolic link"):
                cache.program(problem)
            assert list(elsewhere.iterdir()) == []
        finally:
            sandbox.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
