"""One judge per state directory (judges/verdicts/state_lock.py), with real judge processes: a
second judge on a directory in use is refused in one line naming the holder's pid and leaves
every file there as it was; the lock goes with its holder, however the holder ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from judges.service.process import JudgeProcess

pytestmark = pytest.mark.slow


def second_judge(state: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "judges", "--port", "0", "--generated-cases", "1"]
    command += ["--state-dir", str(state), "--accept-per-process-limits"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def snapshot(state: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `state` but the first judge's own log: size and mtime."""
    return {
        str(path.relative_to(state)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(state.rglob("*"))
        if path.name != "service.log"
    }


def test_a_second_judge_on_a_state_directory_in_use_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with JudgeProcess(state, "--generated-cases", "1") as first:
        assert first.process is not None
        before = snapshot(state)
        refused = second_judge(state)
        assert snapshot(state) == before  # nothing read into a judge, nothing written
        assert httpx.get(f"{first.url}/health", timeout=10).json()["ok"] is True
    assert refused.returncode == 2
    lines = [x for x in refused.stderr.splitlines() if x.startswith("guidance-ttt-judge:")]
    assert len(lines) == 1, refused.stderr
    holder = f"(pid {first.process.pid})"
    assert f"state directory {state} is in use by another judge {holder}" in lines[0]
    assert "judge listening" not in refused.stdout
    # once the holder has stopped, the directory is free again
    with JudgeProcess(state, "--generated-cases", "1") as again:
        assert httpx.get(f"{again.url}/health", timeout=10).json()["ok"] is True


def test_a_killed_judge_leaves_no_lock_behind(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = JudgeProcess(state, "--generated-cases", "1").start()
    assert first.process is not None
    first.process.kill()  # SIGKILL: no clean-up of its own
    first.process.wait()
    assert (state / "judge.lock").read_text().strip() == str(first.process.pid)
    with JudgeProcess(state, "--generated-cases", "1") as second:
        assert second.process is not None
        assert (state / "judge.lock").read_text().strip() == str(second.process.pid)
    assert os.path.exists(state / "judge.lock")
