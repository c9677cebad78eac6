"""Whatever ends a command that starts services, nothing it started outlives it.

`guidance-ttt rehearse` and `guidance-ttt experiment` run as a user runs them (a subprocess of
the CLI, with real `reef serve`, its Reef service and the local judge); once a step is under way
they get the signal. SIGINT (Ctrl-C), SIGTERM and SIGHUP: exit 128 + the signal, one stopping
line naming the exact command that resumes, no traceback (the step's rollouts still in flight
emit nothing once the run's event sinks start closing); a second SIGINT while stopping ends
it at once. Along the Ctrl-C scenario, the rehearsal's own judge answers only its token (401
without), a second `rehearse` on its directory is refused in one line naming the holder, and
the token is in no file of the state directory. SIGKILL of the command: its services die by
their parent-death signal. In every case no process it started survives: none has the state
directory in its command line or as its working directory afterwards. The resumed run
completes with every slot once and every rollout journaled before the signal unchanged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from harness.adapters.judge.token import TOKEN_ENV
from harness.rehearsal.stand_ins import task_dir
from harness.settings.run_settings import RunSettings
from harness.storage.store import read_committed, read_in_flight

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[2]


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


def _pid(line: str) -> int:
    return int(line.split(":", 1)[0])


def _started_by_others(state: Path, own: set[int]) -> list[str]:
    """The processes under `state` (`_processes_under`) that descend from none of the pids in
    `own` (the running rehearsal and every process it had there): what another command started.
    The run's own processes come and go as its steps do (its artifact cache's git), and some of
    its services are not its children; a process that ends while its ancestry is read counts
    for nothing."""
    others = []
    for line in _processes_under(state):
        pid = _pid(line)
        while pid not in own and pid > 1:
            try:
                stat = (Path("/proc") / str(pid) / "stat").read_text()
            except OSError:
                break
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid
        else:
            if pid not in own:
                others.append(line)
    return others


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
    assert f"stopping ({signal.Signals(signum).name}): the step in progress is kept" in stderr
    _wait_for(lambda: not _processes_under(state), 30, "the rehearsal's processes to end")


GRID = ["--groups", "2", "--rollouts", "2"]
CLI = [sys.executable, "-m", "harness.cli.entry"]


def _rehearse(state: Path, steps: int) -> subprocess.Popen[str]:
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.entry",
            "rehearse",
            str(state),
            "--steps",
            str(steps),
            *GRID,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _events(state: Path) -> bytes:
    path = state / "guidance-run" / "events.jsonl"
    return path.read_bytes() if path.is_file() else b""


def _step_one(archive_root: Path, entries) -> dict[tuple[int, int], tuple[str, float | None]]:
    return {
        (int(e.metadata["group"]), int(e.metadata["rollout"])): (e.solution, e.verifier_raw_score)
        for e in entries
        if e.timestep >= 1 and int(e.metadata["step"]) == 1
    }


def _journaled(state: Path) -> dict[tuple[int, int], tuple[str, float | None]]:
    root = state / "guidance-run" / "archive"
    return _step_one(root, [r.entry for r in read_in_flight(root, 1)])


def _stop_mid_step(state: Path, process: subprocess.Popen[str], *signals: int, along=None) -> str:
    """Call `along()` (checks of the running rehearsal) once the first step has started, wait
    until step 1 (of a 2×2 grid) has a journaled rollout, send `signals` back to back, return
    stderr after the exit; no output of the run may hold a traceback. (The checks run during
    step 0, so that however long they take on a loaded machine, the run is still in step 1
    when the signal comes.)"""
    try:
        _wait_for(lambda: b'"step_started"' in _events(state), 300, "the first step")
        assert _processes_under(state), "the rehearsal started no process"
        if along is not None:
            along()
        _wait_for(lambda: _events(state).count(b'"rollout_finished"') >= 5, 300, "step 1")
        for signum in signals:
            process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    return stderr


def _resume_to_the_end(state: Path, kept: dict) -> None:
    """The same command completes the run: both steps committed, every slot of each once, and
    what step 1's journal held before the signal unchanged."""
    resumed = _rehearse(state, steps=2)
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, (stdout + stderr)[-3000:]
    root = state / "guidance-run" / "archive"
    archive, committed = read_committed(root)
    assert committed == 1
    slots: dict[int, list[tuple[int, int]]] = {}
    for entry in archive.entries.values():
        if entry.timestep >= 1:
            meta = entry.metadata
            slots.setdefault(int(meta["step"]), []).append((meta["group"], meta["rollout"]))
    grid = [(g, r) for g in range(2) for r in range(2)]
    assert {step: sorted(found) for step, found in slots.items()} == {0: grid, 1: grid}
    final = _step_one(root, archive.entries.values())
    assert kept and all(final[slot] == kept[slot] for slot in kept)
    assert not _processes_under(state)


def _judge_of(state: Path) -> tuple[str, str]:
    """The rehearsal's own judge: its URL (the run's settings copy) and the access token in its
    environment (readable in /proc by its owner only)."""
    url = RunSettings.load(state / "serve-frozen.yaml", environ={}, base_dir=state).judge_url
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"judges" in command and str(state / "judge").encode() in command:
            for item in environ:
                if item.startswith(TOKEN_ENV.encode() + b"="):
                    return url, item.split(b"=", 1)[1].decode()
            pytest.fail(f"the rehearsal's judge has no {TOKEN_ENV} in its environment")
    pytest.fail("the rehearsal's judge is not running")


def _only_the_run_reaches_its_judge_and_its_directory(
    state: Path, process: subprocess.Popen[str], tokens: list[str]
) -> None:
    """While the rehearsal runs: its judge answers 401 without its token and 200 with it, and
    a second `rehearse` on its directory is refused in one line naming the holder's pid,
    having started nothing."""
    url, token = _judge_of(state)
    tokens.append(token)
    assert httpx.get(url + "/problems", timeout=30).status_code == 401
    wrong = {"Authorization": "Bearer " + "x" * 43}
    assert httpx.get(url + "/problems", headers=wrong, timeout=30).status_code == 401
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.get(url + "/problems", headers=bearer, timeout=30).status_code == 200
    own = {process.pid, *(_pid(line) for line in _processes_under(state))}
    second = subprocess.run(
        [*CLI, "rehearse", str(state), "--steps", "2", *GRID],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in (second.stdout + second.stderr).splitlines() if line.strip()]
    assert second.returncode == 2, lines
    assert len(lines) == 1 and f"{state} is in use by pid {process.pid}" in lines[0], lines
    assert "guidance-ttt rehearse" in lines[0]
    started = _started_by_others(state, own)
    assert not started, f"the refused command started {started}"


def test_ctrl_c_mid_step_stops_in_one_line_and_the_resumed_run_loses_nothing(tmp_path: Path):
    state = tmp_path / "state"
    process = _rehearse(state, steps=2)
    tokens: list[str] = []
    stderr = _stop_mid_step(
        state,
        process,
        signal.SIGINT,
        along=lambda: _only_the_run_reaches_its_judge_and_its_directory(state, process, tokens),
    )
    assert process.returncode == 130, stderr[-2000:]
    (token,) = tokens
    assert token not in stderr
    holding = [p for p in state.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert not holding, f"the judge's token was written to {holding}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    resume = f"guidance-ttt rehearse {state} --steps 2 {' '.join(GRID)}"
    stop = (
        "guidance-ttt rehearse: stopping (SIGINT): the step in progress is kept in the journal; "
        f"resume with: {resume}"
    )
    # The stand-in executor refuses one call of step 1 by script (harness.rehearsal.stand_ins);
    # when that refused rollout finishes before the signal, the run's own warning about it
    # comes first. The stop itself is one line, the last.
    assert lines[-1] == stop and lines.count(stop) == 1, stderr
    assert all(line.startswith("step 1: ") for line in lines[:-1]), stderr
    _wait_for(lambda: not _processes_under(state), 30, "the rehearsal's processes to end")
    _, committed = read_committed(state / "guidance-run" / "archive")
    assert committed == 0, "the signal came in step 1: step 0 is committed, step 1 is not"
    _resume_to_the_end(state, _journaled(state))


def test_a_second_ctrl_c_while_stopping_ends_at_once_and_loses_no_journal_line(tmp_path: Path):
    state = tmp_path / "state"
    process = _rehearse(state, steps=2)
    stderr = _stop_mid_step(state, process, signal.SIGINT, signal.SIGINT)
    assert process.returncode == 130, stderr[-2000:]
    assert stderr.count("stopping (SIGINT)") == 1, stderr
    _wait_for(lambda: not _processes_under(state), 60, "the rehearsal's processes to end")
    _resume_to_the_end(state, _journaled(state))


def test_sigkill_of_rehearse_leaves_no_survivor(tmp_path: Path):
    """No handler runs for SIGKILL: the judge and `reef serve` get their parent-death signal
    (SIGTERM) from the kernel, and `reef serve` stops its own service on it."""
    state = tmp_path / "state"
    process = _rehearse(state, steps=40)
    try:
        _wait_for(lambda: b'"step_started"' in _events(state), 300, "the first step")
        started = _processes_under(state)
        assert any("reef" in p for p in started) and any("judges" in p for p in started)
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _wait_for(lambda: not _processes_under(state), 60, "the rehearsal's processes to end")


def test_ctrl_c_of_an_experiment_mid_step_leaves_no_survivor_and_no_traceback(tmp_path: Path):
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    directory = tmp_path / "experiment"
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "name": "stopped",
                "stand_ins": True,
                "arms": ["guidance-ttt"],
                "seeds": [0],
                "steps": 40,
                "groups": 1,
                "rollouts": 2,
            }
        )
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli.entry",
            "experiment",
            str(plan),
            "--dir",
            str(directory),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run = directory / "guidance-ttt-s0"
    try:
        _wait_for(lambda: b'"step_started"' in _events(run), 300, "the run's first step")
        started = _processes_under(directory)
        assert any("reef" in p for p in started) and any("judges" in p for p in started)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr[-2000:]
    assert "guidance-ttt experiment: stopping (SIGINT)" in stderr
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    _wait_for(lambda: not _processes_under(directory), 60, "the experiment's processes to end")
