"""The judge writes nothing through a symbolic link in its state directory.

Submissions, results and the verdict cache live under `--state-dir`; a link placed there would
send the judge's writes elsewhere. Each is refused naming the path, the linked-to file is left
as it was, and a judge started on a state directory with a linked `submissions/` stops at
start in one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
