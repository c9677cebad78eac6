"""`guidance-ttt rehearse --task DIR` on a task made by `guidance-ttt task new`, kept under a
private (mode 700) folder outside the repository, and a 5-step rehearsal whose best-so-far rises
above its seed (the stand-in executor's finer and wider strip widths are real improvements of
the shelf packer). Real `reef serve`, the real local judge (FrontierCS problem 1 from the design
data folder, skipped when absent), the scripted stand-in models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from judge_fakes import LocalJudge

from harness import results
from harness.rehearsal.rehearse import RehearsalOptions, rehearse
from harness.settings.run_settings import RunSettings
from harness.storage.store import read_committed
from tests.rehearsal_support import JUDGE_POLL_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
FRONTIERCS = REPO.parent / "shared" / "data" / "frontiercs"
SUMMARY = "Greedy by value density: take items in order of value per unit of weight."


def cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_rehearse_task_runs_a_task_made_by_task_new(tmp_path: Path) -> None:
    if not (FRONTIERCS / "problems" / "1" / "config.yaml").is_file():
        pytest.skip(f"the FrontierCS problems are absent from {FRONTIERCS}")
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    task = private / "tasks" / "treasure_again"
    done = cli("task", "new", str(task), "--frontiercs", str(FRONTIERCS), "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seed_program = REPO / "harbor" / "treasure_packing" / "solution" / "solution.cpp"
    (task / "solution" / "solution.cpp").write_text(seed_program.read_text())
    (private / "summary.txt").write_text(SUMMARY)
    with LocalJudge(tmp_path / "judge", "--frontiercs", str(FRONTIERCS)) as judge:
        seed = cli(
            "task", "seed", str(task), "solution/solution.cpp",
            "--summary-file", str(private / "summary.txt"), "--judge-url", judge.url,
            cwd=tmp_path,
        )  # fmt: skip
        assert seed.returncode == 0, seed.stdout + seed.stderr
        check = cli("task", "check", str(task), "--judge-url", judge.url, cwd=tmp_path)
        assert check.returncode == 0, check.stdout + check.stderr
        done = cli(
            "rehearse", "--task", str(task), "--judge-url", judge.url,
            "--steps", "1", "--groups", "1", "--rollouts", "2",
            cwd=private,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The state directory is named after the task, not after its path.
    state = private / "work" / "rehearsal-treasure_again"
    archive, _ = read_committed(state / "guidance-run" / "archive")
    step_one = [e for e in archive.entries.values() if e.timestep == 1]
    assert len(step_one) == 2
    assert all(e.is_valid for e in step_one)  # the stand-in's edits of the task's own seed
    settings = RunSettings.load(state / "serve-frozen.yaml", environ={})
    assert settings.task == str(task) and settings.scenario == "guidance-ttt-treasure-again"


def test_a_five_step_rehearsal_improves_on_its_seed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    options = RehearsalOptions(
        steps=5, groups=2, rollouts=2, cases=2, judge_seed=11, judge_poll_s=JUDGE_POLL_S
    )
    result = rehearse(state, options)
    view = results.load_run(state)
    seed = results.seed_entry(view.archive).verifier_raw_score
    assert result.next_step == 5  # steps 0..4
    assert result.best is not None and seed is not None
    assert result.best.verifier_raw_score > seed
    valid = [e for e in view.archive.entries.values() if e.timestep >= 1 and e.is_valid]
    # The edits differ: the plots show a spread of scores, not one repeated value.
    assert len({round(e.verifier_raw_score or 0, 4) for e in valid}) >= 3
