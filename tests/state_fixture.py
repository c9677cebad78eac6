"""A realistic run state directory, made by the real code, for the observability tests.

`build_state_dir(root)` plays a small run the way the rollout loop and the run controller do,
but with scripted model answers and judge verdicts: the real `Archive` selects parents (rank-prior
PUCT), the real `ArchiveStore` journals every rollout and commits every step, `ResumeState`
writes `resume-state.json` with the controller's own step summaries (`StepOutcome.summary`),
and the real `EventLog` writes `events.jsonl`. The last step is left in flight with some slots
journaled, as after a crash or while a run is going; with `in_flight_slots=0` the run is a
finished one (its `run_started` asked for exactly the committed steps, and `run_finished` is
logged, as `harness.run.step_loop` does). Nothing here talks to a model, a judge or
Reef: verdicts and token counts come from a seeded generator, and the train metrics are the
illustrative ones a bridge fake would report.

`FixtureRun` carries the facts the tests compare against, computed here from the generated
verdicts, independently of `harness.results`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.answers import rollout_entry
from harness.library import Archive
from harness.observe.events import EventLog
from harness.state import (
    EXECUTION_ERROR,
    GUIDANCE_FORMAT_ERROR,
    INVALID,
    PARSE_ERROR,
    VALID,
    ArchiveConfig,
    LibraryEntry,
    VerificationResult,
)
from harness.storage.resume_state import RESUME_STATE, ResumeState, RunIdentity, StepOutcome
from harness.storage.run_files import EVENTS_FILE
from harness.storage.store import ArchiveStore
from tests.archive_builders import make_seed

STORE_DIR = Path("guidance-run") / "archive"
SEED_SCORE = 27.8105
SEED_SOLUTION = '#include <cstdio>\nint main() { std::puts("0 0"); }'
GUIDANCE_MODEL = "Qwen/Qwen3-8B"
EXECUTOR_MODEL = "z-ai/glm-5.2"


@dataclass
class FixtureRun:
    """What `build_state_dir` made, for assertions."""

    state_dir: Path
    groups: int
    rollouts: int
    committed_steps: int
    seed_score: float
    best_score: float = 0.0
    best_entry_id: str = ""
    best_update: int = 0
    best_lineage_entry_ids: list[str] = field(default_factory=list)
    statuses: dict[int, dict[str, int]] = field(default_factory=dict)  # step -> status counts
    cumulative_best: list[float] = field(default_factory=list)  # per update 0..committed
    valid: list[int] = field(default_factory=list)  # per step
    step_best: list[float | None] = field(default_factory=list)  # per step, valid only
    in_flight_done: list[tuple[int, int]] = field(default_factory=list)
    executor_tokens: tuple[int, int] = (0, 0)  # committed + in-flight (prompt, completion)
    guidance_tokens: tuple[int, int] = (0, 0)


def _identity(groups: int, rollouts: int, mode: str = "trained") -> RunIdentity:
    trained = mode == "trained"  # a frozen run has no LoRA and no tensor-parallel sizes
    return RunIdentity(
        model=GUIDANCE_MODEL,
        executor="openrouter_glm_5_2",
        gpt_oss_reasoning_effort="high",
        groups_per_step=groups,
        rollouts_per_group=rollouts,
        guidance_max_tokens=8192,
        sequence_length=12288,
        lora_rank=32 if trained else 0,
        inference_tensor_parallel_size=1 if trained else 0,
        megatron_tensor_parallel_size=2 if trained else 0,
        mode=mode,
    )


def _seed() -> LibraryEntry:
    return make_seed(score=SEED_SCORE, solution=SEED_SOLUTION)


def _status_for(
    rng: random.Random, g: int, r: int, parse_error_slot: tuple[int, int] | None = None
) -> str:
    """Mostly valid, with each failure kind present in every step (and, when asked, a
    `parse_error` in `parse_error_slot`: an executor answer without a program)."""
    if (g, r) == parse_error_slot:
        return PARSE_ERROR
    if (g, r) == (0, 1):
        return GUIDANCE_FORMAT_ERROR
    if (g, r) == (1, 2):
        return INVALID
    return EXECUTION_ERROR if rng.random() < 0.1 else VALID


def _rollout(
    rng: random.Random,
    archive: Archive,
    step: int,
    g: int,
    r: int,
    parent_entry: LibraryEntry,
    parent_node_id: str,
    score_change: tuple[float, float],
    text: str = "",
    parse_error_slot: tuple[int, int] | None = None,
) -> tuple[LibraryEntry, dict[str, int], dict[str, int] | None]:
    status = _status_for(rng, g, r, parse_error_slot)
    guidance_usage = {"prompt_tokens": 900 + rng.randrange(200), "completion_tokens": 300}
    executor_usage = None
    parent_score = float(parent_entry.verifier_raw_score or 0.0)
    guidance = (
        None if status == GUIDANCE_FORMAT_ERROR else f"Step {step} idea {g}.{r}: try ring {r}{text}"
    )
    if status == VALID:
        score = round(min(parent_score + rng.uniform(*score_change), 99.0), 4)
        verdict = VerificationResult(score / 100, score, True, VALID, "70/70 cases accepted")
        solution: str | None = f"// step {step} g{g} r{r}\nint main() {{ return {r}; }}"
    elif status == GUIDANCE_FORMAT_ERROR:
        verdict = VerificationResult.failure(
            status, "expected exactly one complete <guidance> block"
        )
        solution = None
    elif status == PARSE_ERROR:
        verdict = VerificationResult.failure(status, f"no <solution> block in the answer{text}")
        solution = None
    else:
        verdict = VerificationResult.failure(status, f"{status}: case 3 rejected")
        solution = f"// broken {step} {g} {r}\nint main() {{ return 1; }}"
    if status != GUIDANCE_FORMAT_ERROR:
        executor_usage = {"prompt_tokens": 4000 + rng.randrange(1000), "completion_tokens": 2500}
    metadata: dict[str, Any] = {
        "group_uid": f"{step + 1}:{g}",
        "selected_node_id": parent_node_id,
        "selected_parent_entry_id": parent_entry.id,
        "guidance_format_ok": status != GUIDANCE_FORMAT_ERROR,
        "guidance_generation_attempts": 1,
        "raw_guidance_text": f"<guidance>{guidance}</guidance>" if guidance else "I think...",
        "prompt_mode": "summary_only",
        "summary_semantics": "canonical_full_candidate",
        "execution_backend": {"name": "openrouter_glm_5_2", "model": EXECUTOR_MODEL},
        "execution_response_metadata": {
            "provider": "openai_compatible",
            "backend": "gpt_oss_120b",
            "api_attempts": 1,
            "api_elapsed_s": 40.0,
            "purpose": "execution",
            "finish_reason": "stop",
        },
        "execution_response_usage": executor_usage,
        "execution_text": ""
        if status == GUIDANCE_FORMAT_ERROR
        else f"I would pack rings here, but I ran out of room.{text}"
        if status == PARSE_ERROR
        else f"<solution>\n{solution}\n</solution>\n<summary>Ring packer {g}.{r}{text}</summary>",
        "verification_artifacts": {},
        "agent_record_id": f"receipt-{step}-{g}-{r}",
        "guidance_response_usage": guidance_usage,
    }
    entry = rollout_entry(
        parent=archive.nodes[parent_node_id],
        step=step,
        guidance=guidance,
        execution_thinking="",
        solution=solution,
        verification=verdict,
        raw_summary=None
        if solution is None
        else f"Ring packer variant {g}.{r} of step {step}.{text}",
        metadata=metadata,
        entry_id=f"e-{step:02d}-{g}-{r}",
    )
    return entry, guidance_usage, executor_usage


def build_state_dir(
    state_dir: Path,
    *,
    groups: int = 2,
    rollouts: int = 4,
    committed_steps: int = 3,
    in_flight_slots: int = 3,
    seed: int = 7,
    score_change: tuple[float, float] = (-2.0, 9.0),
    labels: dict[str, str] | None = None,
    text: str = "",
    parse_error_slot: tuple[int, int] | None = None,
) -> FixtureRun:
    """Play `committed_steps` committed steps and one in-flight step with `in_flight_slots`
    journaled rollouts into `state_dir`, with the real store, resume state and event log. A
    valid child scores its parent's score plus a change drawn uniformly from `score_change`
    (`(0.0, 0.0)`: every valid child is an unchanged copy of its parent). `labels` go into the
    `run_started` event as the step loop writes them (e.g. `{"mode": "frozen", "suite": ...}`).
    `text` is appended to every guidance, summary and raw answer (what a model could write);
    `parse_error_slot` makes that slot of every step an executor answer without a program."""
    rng = random.Random(seed)
    config = ArchiveConfig(rollout_n=rollouts, groups_per_batch=groups)
    archive = Archive.from_seed(config, _seed())
    fact = FixtureRun(state_dir, groups, rollouts, committed_steps, SEED_SCORE)
    store = ArchiveStore.create(state_dir / STORE_DIR, archive)
    archive = store.load().archive
    events = EventLog(state_dir / "guidance-run" / EVENTS_FILE)
    identity = _identity(groups, rollouts, (labels or {}).get("mode", "trained"))
    summaries: list[dict[str, Any]] = []
    best, best_entry, best_update = SEED_SCORE, archive.best_entry(), 0
    fact.cumulative_best.append(best)
    tokens = {"executor": [0, 0], "guidance": [0, 0]}
    total_steps = committed_steps + (1 if in_flight_slots else 0)
    events.emit(
        "run_started",
        state_dir=str(state_dir),
        start_step=0,
        steps=total_steps + 2 if in_flight_slots else committed_steps,
        groups=groups,
        rollouts=rollouts,
        best_raw_score=SEED_SCORE,
        guidance_model=GUIDANCE_MODEL,
        executor_model=EXECUTOR_MODEL,
        **(labels or {}),
    )
    for step in range(total_steps):
        parents = archive.select_parents(step)
        events.emit(
            "step_started",
            step=step,
            groups=groups,
            rollouts=rollouts,
            parents=[p.id for p in parents],
            resumed_slots=[],
        )
        in_flight = step == committed_steps
        slots = [(g, r) for g in range(groups) for r in range(rollouts)]
        if in_flight:
            slots = slots[:in_flight_slots]
        rewards: list[list[float]] = [[] for _ in range(groups)]
        counts: dict[str, int] = {}
        step_best: float | None = None
        for g, r in slots:
            parent = parents[g]
            entry, guide_usage, exec_usage = _rollout(
                rng,
                archive,
                step,
                g,
                r,
                archive.entry_of(parent.id),
                parent.id,
                score_change,
                text,
                parse_error_slot,
            )
            store.record_rollout(archive, step, g, r, entry)
            for role, usage in (("guidance", guide_usage), ("executor", exec_usage)):
                if usage:
                    tokens[role][0] += usage["prompt_tokens"]
                    tokens[role][1] += usage["completion_tokens"]
            for stage in ("guidance", "executor", "judge", "reported"):
                events.emit("rollout_stage", step=step, group=g, rollout=r, stage=stage)
            events.emit(
                "rollout_finished",
                step=step,
                group=g,
                rollout=r,
                status=entry.verifier_status,
                reward=entry.verifier_reward,
                raw_score=entry.verifier_raw_score,
                guidance_ok=entry.verifier_status != GUIDANCE_FORMAT_ERROR,
                timings={"guidance_s": 3.0, "executor_s": 40.0, "judge_s": 10.0, "total_s": 53.0},
                usage=exec_usage or {"prompt_tokens": 0, "completion_tokens": 0},
            )
            if in_flight:
                fact.in_flight_done.append((g, r))
                continue
            rewards[g].append(entry.verifier_reward)
            counts[entry.verifier_status] = counts.get(entry.verifier_status, 0) + 1
            score = entry.verifier_raw_score
            if entry.is_valid and score is not None:
                step_best = score if step_best is None else max(step_best, score)
            if entry.is_valid and score is not None and score > best:
                best, best_entry, best_update = score, entry, step + 1
        if in_flight:
            break
        store.commit_step(archive, step)
        valid = counts.get(VALID, 0)
        outcome = StepOutcome(
            step=step,
            elapsed_s=600.0 + step,
            group_rewards=rewards,
            valid_rollouts=valid,
            well_formed_guidance=groups * rollouts - counts.get(GUIDANCE_FORMAT_ERROR, 0),
            best_raw_score=step_best,  # the step's own best, as `harness.run.step.step_outcome`
            archive_best_raw_score=best,  # the archive's best after the step, the seed included
        )
        metrics = {"train/grad_norm": 0.4 + step / 10, "train/global_batch_size": groups * rollouts}
        summary = outcome.summary(rollouts, metrics, False)
        summaries.append(summary)
        ResumeState(
            identity,
            {"name": "openrouter_glm_5_2", "model": EXECUTOR_MODEL},
            "summary_only",
            step + 1,
            tuple(summaries),
        ).save(state_dir / RESUME_STATE)
        events.emit("step_summary", **summary)
        events.emit("training_wait", step=step, phase="training", elapsed_s=2.0, missing_slots=[])
        events.emit("step_committed", step=step, next_step=step + 1)
        fact.statuses[step] = counts
        fact.valid.append(valid)
        fact.step_best.append(step_best)
        fact.cumulative_best.append(best)
    if not in_flight_slots:
        events.emit("run_finished", next_step=committed_steps, best_raw_score=best)
    events.close()
    store.close()
    fact.best_score = best
    fact.best_entry_id = best_entry.id if best_entry else ""
    fact.best_update = best_update
    fact.best_lineage_entry_ids = _lineage_entries(archive, fact.best_entry_id)
    fact.executor_tokens = (tokens["executor"][0], tokens["executor"][1])
    fact.guidance_tokens = (tokens["guidance"][0], tokens["guidance"][1])
    return fact


def _lineage_entries(archive: Archive, entry_id: str) -> list[str]:
    """Entry ids from the seed root down to `entry_id`, following `selected_parent_entry_id`."""
    chain = [entry_id]
    entry = archive.entries[entry_id]
    while entry.timestep > 0:
        entry = archive.entries[entry.metadata["selected_parent_entry_id"]]
        chain.append(entry.id)
    return chain[::-1]
