"""SIGTERM or SIGHUP to a command that starts services stops everything it started.

`guidance-ttt rehearse` runs as a user runs it (a subprocess of the CLI, with real `reef serve`,
its Reef service and the local judge); once its first step is under way it gets the signal.
It must exit with 128 + the signal, and no process it started may survive it: none has the
state directory in its command line or as its working directory afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.rehearsal.stand_ins import task_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[1]


def _processes_under(state: Path) -> list[str]:
    """Processes whose command line names `state` or whose working directory is inside it."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(state) in command or cwd.startswith(str(state)):
            found.append(f"{proc.name}: {command.strip()[:200]}")
    return found


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_to_rehearse_stops_every_process_it_started(tmp_path: Path, signum: int):
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    state = tmp_path / "state"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli.entry", "rehearse", str(state), "--steps", "40"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events = state / "guidance-run" / "events.jsonl"
    try:
        _wait_for(
            lambda: events.is_file() and b'"step_started"' in events.read_bytes(),
            300,
            "the rehearsal's first step",
        )
        started = _processes_under(state)
        assert any("reef" in p for p in started) and any("judges" in p for p in started)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signum, stderr[-2000:]
    assert f"stopped by {signal.Signals(signum).name}" in stderr
    _wait_for(lambda: not _processes_under(state), 30, "the rehearsal's processes to end")
