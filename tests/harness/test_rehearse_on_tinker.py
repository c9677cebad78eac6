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
from harness.storage.store import read_committed, read_in_flight


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
def test_a_rehearsal_on_tinker_killed_mid_step_and_before_its_commit_resumes_each_time(tmp_path):
    """Three trained steps on Tinker through two SIGKILLs: in the middle of step 1 (two of its
    reports in Reef), and between Reef's commit of step 2 and the harness's. Every step is
    trained by Reef's Tinker backend once, on calls of one serving load, each on a durable
    checkpoint, and the archive pairs with Reef's committed count."""
    pytest.importorskip("tinker", reason="needs the Tinker SDK (the tinker extra, 0.33.1)")
    state = tmp_path / "state"
    archive = state / "guidance-run" / "archive"
    command = [sys.executable, "-m", "harness.cli.entry", "rehearse", str(state)]
    command += ["--backend", "tinker", "--groups", "1", "--rollouts", "4", "--steps"]
    # SIGKILL after the 6th report: step 0 committed, two of step 1's four slots reported.
    mid_step = {**os.environ, ENV_VAR: "after_report:6"}
    killed = subprocess.run([*command, "2"], env=mid_step, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    stored = ResumeState.load(state / RESUME_STATE)
    assert stored is not None and stored.next_step == 1
    reported_before = read_in_flight(archive, 1)
    assert len(reported_before) == 2
    dead = {str(record.entry.metadata["agent_record_id"]) for record in reported_before}

    # The restarted Reef serves under a new load: step 1 runs again from the committed archive.
    # SIGKILL when step 2 is trained and committed by Reef on Tinker, but not by the harness.
    before_commit = {**os.environ, ENV_VAR: "before_archive_commit:2"}
    killed = subprocess.run([*command, "3"], env=before_commit, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    stored = ResumeState.load(state / RESUME_STATE)
    assert stored is not None and stored.next_step == 2
    manifest = state / "checkpoints" / "tinker" / "incumbent.json"
    trained_before_the_kill = json.loads(manifest.read_text())["state_path"]

    resumed = subprocess.run([*command, "3"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    stored = ResumeState.load(state / RESUME_STATE)
    assert stored is not None and stored.next_step == 3
    assert read_committed(archive)[1] == 2
    summaries = stored.step_summaries
    assert [summary["recovered_commit"] for summary in summaries] == [False, False, True]
    assert [summary["sampled_rollouts"] for summary in summaries] == [4, 4, 4]
    events = _events(state)
    redone = [event for event in events if event["event"] == "in_flight_superseded"]
    assert [(event["step"], len(event["slots"])) for event in redone] == [(1, 2)]
    # Told by the load: the restarted Reef serves under a load of a new incarnation.
    served_under, now_serving = redone[0]["served_under"], redone[0]["now_serving"]
    assert served_under.rpartition(":")[0] != now_serving.rpartition(":")[0]
    # The reports of the stopped Reef's load never became rewards of the committed step 1.
    assert len(list(archive.glob("superseded-step-000001-*.jsonl"))) == 1
    committed, _ = read_committed(archive)
    receipts = {str(e.metadata.get("agent_record_id")) for e in committed.entries.values()}
    assert dead and not dead & receipts
    assert len([e for e in committed.entries.values() if e.metadata.get("step") == 1]) == 4
    reef_log = (state / "reef" / "reef-serve.log").read_text()
    assert "mixed_release_ids" not in reef_log and "discarded" not in reef_log
    assert "dropping stale training batch" not in reef_log
    # Each step trained once from the last durable checkpoint, kept by the stand-in across kills.
    kept = json.loads((state / "tinker-stand-in" / "checkpoints.json").read_text())
    final = json.loads(manifest.read_text())["state_path"]
    assert trained_before_the_kill in kept and final == trained_before_the_kill
    assert kept[final]["optimizer_steps"] == 3
    starts = [event for event in events if event["event"] == "run_started"]
    assert len(starts) == 3
    assert stored.identity.mode == "trained" and stored.identity.training_backend == "tinker"
    step_summaries = [event for event in events if event["event"] == "step_summary"]
    assert step_summaries and {summary["mode"] for summary in step_summaries} == {"trained"}
    for summary in step_summaries:  # each step's metrics are Reef's Tinker training of that step
        metrics = summary["train_metrics"]
        assert metrics["optimizer_steps"] == 1 and "loss:sum" in metrics
    incumbent = json.loads(manifest.read_text())
    assert incumbent["sampler_path"].startswith("tinker://")
    text = (state / "serve-tinker.yaml").read_text()
    assert "tttd.deployment:TTTDTinkerDeployment" in text and "tml-" not in text
