"""The records mean what the reference's mean: a step summary's `best_raw_score` is the archive's
best after the step (the step's own best is `step_best_raw_score`), a summary written before
that key existed is read with its meaning moved, the Harbor metadata's `agent_record_ids` are
this invocation's well-formed rollouts, and the executor backend's record has the reference's
keys."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.adapters.executor.backends import PRESET_DIALECTS, ExecutionBackend, backend_from_name
from harness.storage.resume_state import (
    LEGACY_OWN_DIALECTS,
    ResumeState,
    RunIdentity,
    StepOutcome,
)

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

    from harness.run.step_loop import well_formed_receipts

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


#: The reference's record of an executor backend (its harness/execution.py
#: `ExecutionBackend.safe_dict`), in its order: the entry's `execution_backend` and
#: resume-state.json's `executor_backend`.
REFERENCE_BACKEND_KEYS = [
    "name",
    "model",
    "base_url",
    "api_key_env",
    "temperature",
    "max_tokens",
    "timeout_s",
    "concurrency",
    "max_retries",
    "retry_backoff_s",
    "request_options",
]


@pytest.mark.parametrize("preset", ["gpt_oss_120b", "openrouter_glm_5_2"])
def test_the_executor_backend_records_have_the_references_keys(tmp_path: Path, preset: str) -> None:
    """Reference harness/execution.py: `safe_dict()` holds eleven keys, and its agent.py and
    run_controller.py write it as the entry's `execution_backend` and resume-state.json's
    `executor_backend`. A run that keeps the preset's request shape writes the same keys, so a
    tool that rebuilds the reference's backend from them works (differences row 68)."""
    backend = backend_from_name(preset)
    record = backend.safe_dict()  # what harness.run.rollout writes as `execution_backend`
    assert list(record) == REFERENCE_BACKEND_KEYS
    path = tmp_path / "resume-state.json"
    ResumeState(IDENTITY, record, "summary_only", 0, ()).save(path)
    assert list(json.loads(path.read_text())["executor_backend"]) == sorted(REFERENCE_BACKEND_KEYS)
    assert ExecutionBackend.from_safe_dict(record) == backend


def test_a_chosen_request_shape_is_recorded_beside_the_references_keys() -> None:
    """Ours (differences rows 68 and 74): where `harness.executor.request` picks another
    dialect or drops fields, the body is not one the reference sends, and the record says so
    with `dialect` and `drop` beside the reference's keys."""
    backend = replace(backend_from_name("gpt_oss_120b"), dialect="openai", drop=("seed",))
    record = backend.safe_dict()
    assert list(record) == [*REFERENCE_BACKEND_KEYS, "dialect", "drop"]
    assert (record["dialect"], record["drop"]) == ("openai", ["seed"])
    assert ExecutionBackend.from_safe_dict(json.loads(json.dumps(record))) == backend


def test_a_resume_state_that_recorded_the_presets_own_shape_is_read_as_written_today(
    tmp_path: Path,
) -> None:
    """A record written while `executor_backend` always carried `dialect` and `drop` is read
    without them where they are the backend's own shape, so a resume warns of no change."""
    assert dict(PRESET_DIALECTS) == LEGACY_OWN_DIALECTS
    path = tmp_path / "resume-state.json"
    for backend in (
        backend_from_name("openrouter_glm_5_2"),
        backend_from_name("gpt_oss_120b"),
        replace(backend_from_name("gpt_oss_120b"), dialect="openrouter"),
    ):
        written = {**backend.safe_dict(), "dialect": backend.dialect, "drop": []}
        ResumeState(IDENTITY, written, "summary_only", 0, ()).save(path)
        loaded = ResumeState.load(path)
        assert loaded is not None and loaded.executor_backend == backend.safe_dict()
