"""The records mean what the reference's mean: a step summary's `best_raw_score` is the archive's
best after the step (the step's own best is `step_best_raw_score`), a summary written before
that key existed is read with its meaning moved, and the Harbor metadata's `agent_record_ids`
are this invocation's well-formed rollouts."""

from __future__ import annotations

import json
from pathlib import Path

from harness.storage.resume_state import ResumeState, RunIdentity, StepOutcome

IDENTITY = RunIdentity("m", "gpt_oss_120b", "high", 1, 2, 64, 128, 32, 1, 2)


def test_best_raw_score_is_the_archives_and_the_steps_own_is_kept_apart() -> None:
    outcome = StepOutcome(0, 1.0, [[0.2, 0.3]], 2, 2, 30.0, archive_best_raw_score=45.8)
    summary = outcome.summary(2, {"train/grad_norm": 0.5}, False)
    assert summary["best_raw_score"] == 45.8  # the seed (45.8) is still the archive's best
    assert summary["step_best_raw_score"] == 30.0


def test_a_summary_from_before_step_best_raw_score_is_read_with_its_meaning_moved(
    tmp_path: Path,
) -> None:
    summary = StepOutcome(0, 1.0, [[0.2, 0.3]], 2, 2, 30.0, 45.8).summary(2, {}, False)
    legacy = {k: v for k, v in summary.items() if k != "step_best_raw_score"}
    legacy["best_raw_score"] = 30.0  # then it was the step's own best
    path = tmp_path / "resume-state.json"
    state = ResumeState(IDENTITY, {"name": "gpt_oss_120b"}, "summary_only", 1, (summary,))
    path.write_text(json.dumps({**state.to_json(), "step_summaries": [legacy]}))
    loaded = ResumeState.load(path)
    assert loaded is not None
    assert loaded.step_summaries[0]["step_best_raw_score"] == 30.0
    assert loaded.step_summaries[0]["best_raw_score"] is None  # not recorded then


def test_agent_record_ids_cover_this_invocations_rollouts_only() -> None:
    from dataclasses import replace
    from types import SimpleNamespace

    from archive_builders import make_entry

    from harness.run.runner import well_formed_receipts

    entries = {}
    for step, rollout, ok in [(0, 0, True), (0, 1, False), (1, 0, True), (1, 1, True)]:
        entry = make_entry("root", step, status="valid" if ok else "guidance_format_error")
        meta = {"group": 0, "rollout": rollout, "guidance_format_ok": ok}
        receipt = {"agent_record_id": f"r{step}{rollout}"}
        entries[entry.id] = replace(entry, metadata={**meta, **receipt})
    archive = SimpleNamespace(entries=entries)  # the only part of an Archive the function reads
    assert well_formed_receipts(archive, from_step=1) == ("r10", "r11")  # a resumed invocation
    assert well_formed_receipts(archive) == ("r00", "r10", "r11")  # all_agent_record_ids


def test_a_run_identity_from_before_task_texts_read_the_full_text() -> None:
    from dataclasses import asdict

    stored = {k: v for k, v in asdict(IDENTITY).items() if k != "task_text"}
    assert RunIdentity.from_dict(stored).task_text == "full"
    assert RunIdentity.from_dict(asdict(IDENTITY)).task_text == "reference"
    assert IDENTITY.first_difference(RunIdentity.from_dict(stored)) == (
        "task_text",
        "reference",
        "full",
    )
