"""`guidance-ttt rehearse --backend tinker`: the trained loop on Reef's Tinker backend against the
Tinker stand-in — real Reef (its Tinker trainer and sampler, the tttd recipe and loss), the real
local judge, receipts, reports, training steps and the Tinker gate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from harness.run.crash_hook import ENV_VAR
from harness.storage.resume_state import RESUME_STATE, ResumeState


def _events(state_dir):
    path = state_dir / "guidance-run" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rehearse_on_tinker_refuses_an_arm_without_guidance_before_starting_anything(tmp_path):
    state = tmp_path / "state"
    command = [sys.executable, "-m", "harness.cli.entry", "rehearse", str(state)]
    refused = subprocess.run(
        [*command, "--backend", "tinker", "--arm", "unguided"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--backend tinker trains the guidance model" in refused.stderr
    assert "arm unguided" in refused.stderr
    assert not state.exists()


@pytest.mark.slow
def test_a_rehearsal_on_tinker_killed_before_its_commit_resumes_from_tinkers_checkpoint(tmp_path):
    """Three trained steps on Tinker with a SIGKILL between Reef's commit of step 2 and the
    harness's: every step trained by Reef's Tinker backend, each on a durable checkpoint."""
    pytest.importorskip("tinker", reason="needs the Tinker SDK (the tinker extra, 0.33.1)")
    state = tmp_path / "state"
    command = [sys.executable, "-m", "harness.cli.entry", "rehearse", str(state)]
    command += ["--backend", "tinker", "--groups", "1", "--rollouts", "4", "--steps"]
    # SIGKILL when step 1 is reported, trained and committed by Reef on Tinker, but not yet by
    # the harness: the restarted run pairs its archive with Reef's two committed steps.
    crash = {**os.environ, ENV_VAR: "before_archive_commit:2"}
    killed = subprocess.run([*command, "2"], env=crash, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    stored = ResumeState.load(state / RESUME_STATE)
    assert stored is not None and stored.next_step == 1
    manifest = state / "checkpoints" / "tinker" / "incumbent.json"
    trained_before_the_kill = json.loads(manifest.read_text())["state_path"]

    resumed = subprocess.run([*command, "3"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    stored = ResumeState.load(state / RESUME_STATE)
    assert stored is not None and stored.next_step == 3
    summaries = stored.step_summaries
    assert [summary["recovered_commit"] for summary in summaries] == [False, True, False]
    assert [summary["sampled_rollouts"] for summary in summaries] == [4, 4, 4]
    # Step 2 trained from step 1's durable checkpoint, kept by the stand-in across the kill.
    kept = json.loads((state / "tinker-stand-in" / "checkpoints.json").read_text())
    final = json.loads(manifest.read_text())["state_path"]
    assert trained_before_the_kill in kept and final in kept and final != trained_before_the_kill
    assert kept[trained_before_the_kill]["optimizer_steps"] == 2
    assert kept[final]["optimizer_steps"] == 3
    starts = [event for event in _events(state) if event["event"] == "run_started"]
    assert len(starts) == 2
    assert stored.identity.mode == "trained" and stored.identity.training_backend == "tinker"
    summaries = [event for event in _events(state) if event["event"] == "step_summary"]
    assert summaries and {summary["mode"] for summary in summaries} == {"trained"}
    for summary in summaries:  # each step's metrics are Reef's Tinker training of that step
        metrics = summary["train_metrics"]
        assert metrics["optimizer_steps"] == 1 and "loss:sum" in metrics
    incumbent = json.loads(manifest.read_text())
    assert incumbent["sampler_path"].startswith("tinker://")
    text = (state / "serve-tinker.yaml").read_text()
    assert "tttd.deployment:TTTDTinkerDeployment" in text and "tml-" not in text
