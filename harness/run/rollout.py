"""One rollout, from the selected parent to the archive entry and its report (docs/design.md §6).

    guidance call (through Reef, one sample, receipt) -> strict parse
      malformed: guidance_format_error, reward 0, executor skipped
      else: executor -> <solution> extraction -> judge
    -> LibraryEntry with the full audit metadata -> report body

The run's arm (`harness.arms`) decides the one thing that differs between arms here: a guided
arm calls the guidance model; `unguided` and `best-of-n` put `UNGUIDED_INSTRUCTION` in place of
the guidance and make no guidance call (no receipt, so nothing to report to Reef). Every other
step is the same code for every arm.

`run_rollout` does the network work through three small interfaces (`GuidanceSource`, `Executor`,
`Scorer`) and returns a `FinishedRollout`; journaling and reporting are the caller's job, in
that order. Executor exceptions, and scorer exceptions other than a judge infrastructure fault,
become `execution_error`, as in the reference; a judge infrastructure fault
(`JudgeUnavailableError`) propagates, because that slot must not be journaled or reported.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.adapters.executor.backends import ExecutionBackend
from harness.adapters.executor.client import ExecutionResult, ExecutorAccessError
from harness.answers import GuidanceFormatError, extract_solution, extract_summary, parse_guidance
from harness.answers import rollout_entry as build_entry
from harness.arms import ADDS_TO_TREE, UNGUIDED_INSTRUCTION, Arm
from harness.contract import TaskContract
from harness.model_text import valid_data, valid_text
from harness.prompts import executor_prompt, guidance_prompt, guidance_request_body
from harness.request_shapes import RequestShape
from harness.scorer import JudgeUnavailableError, Scorer
from harness.state import (
    EXECUTION_ERROR,
    GUIDANCE_FORMAT_ERROR,
    PARSE_ERROR,
    LibraryEntry,
    LibraryNode,
    VerificationResult,
    group_uid,
)

PROMPT_MODE = "summary_only"
SUMMARY_SEMANTICS = "canonical_full_candidate"
ALGORITHM = "ttt-discover"
#: The reference's parse_error message (its harness/agent.py), for the task's language tag.
NO_SOLUTION_MESSAGE = "no {language} code block found in <solution>"

log = logging.getLogger(__name__)


class NonFiniteRewardError(RuntimeError):
    """A rollout produced a non-finite reward: a bug, so the run stops before reporting it."""


class GuidanceSource(Protocol):
    """The guidance model behind Reef: one completion and its receipt per call."""

    def guide(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], str]: ...


class Executor(Protocol):
    """The frozen executor (`harness.adapters.executor.client.ExecutionClient`)."""

    backend: ExecutionBackend

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> ExecutionResult: ...


@dataclass(frozen=True)
class Slot:
    """A rollout's coordinates in the step grid."""

    step: int
    group: int
    rollout: int

    def __str__(self) -> str:
        return f"step {self.step} g{self.group}r{self.rollout}"


@dataclass(frozen=True)
class RolloutSettings:
    """What every rollout of a run shares: the task, the guidance model's request settings and
    the grid (for the report)."""

    contract: TaskContract
    problem: str
    model: str
    guidance_max_tokens: int
    groups_per_step: int
    rollouts_per_group: int
    arm: Arm = field(default_factory=Arm)
    #: How the guidance body is shaped for its endpoint (`harness.request_shapes`).
    guidance_shape: RequestShape = field(default_factory=RequestShape)


@dataclass(frozen=True)
class RolloutTask:
    """One slot to run and the parent its group expands."""

    slot: Slot
    parent: LibraryNode
    parent_entry: LibraryEntry


@dataclass(frozen=True)
class FinishedRollout:
    """A rollout ready to be journaled and reported: its entry (metadata carries the receipt
    and both models' token usage) and its stage timings in seconds."""

    slot: Slot
    entry: LibraryEntry
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Candidate:
    """What the executor and judge made of a well-formed guidance (or why there is nothing)."""

    verification: VerificationResult
    result: ExecutionResult | None = None
    solution: str | None = None
    raw_summary: str | None = None


def run_rollout(
    task: RolloutTask,
    settings: RolloutSettings,
    guidance: GuidanceSource,
    executor: Executor,
    scorer: Scorer,
    on_stage: Callable[[str], None] = lambda stage: None,
) -> FinishedRollout:
    """Run one rollout of `task.slot`: exactly one guidance sample (an arm without a guidance
    model takes `UNGUIDED_INSTRUCTION` instead and calls nothing), then (if well formed) one
    executor call and one judge call. Returns the finished rollout; raises only for faults that
    must stop the run (Reef errors, `JudgeUnavailableError`, a non-finite reward)."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    arm = settings.arm
    response: Mapping[str, Any] = {}
    receipt: str | None = None
    prompt_record: dict[str, str] | None = None
    text = ""
    guidance_repairs = 0
    if arm.guided:
        prompt = guidance_prompt(settings.contract, settings.problem, task.parent_entry)
        body = settings.guidance_shape.apply(
            guidance_request_body(
                prompt, model=settings.model, max_tokens=settings.guidance_max_tokens
            )
        )
        prompt_record = prompt.to_dict()
        on_stage("guidance")
        response, receipt = guidance.guide(body)
        timings["guidance_s"] = time.monotonic() - started
        text, guidance_repairs = valid_text(_content(response))
    guidance_text: str | None = UNGUIDED_INSTRUCTION
    malformed: GuidanceFormatError | None = None
    if arm.guided:
        try:
            guidance_text = parse_guidance(text)
        except GuidanceFormatError as error:  # no repair, no retry: reward 0, executor skipped
            guidance_text, malformed = None, error
    if guidance_text is None:
        failure = VerificationResult.failure(GUIDANCE_FORMAT_ERROR, str(malformed))
        candidate = _Candidate(failure)
    else:
        candidate = _execute(guidance_text, task, settings, executor, scorer, on_stage, timings)
    if not math.isfinite(candidate.verification.reward):
        raise NonFiniteRewardError(f"{task.slot}: reward {candidate.verification.reward!r}")

    metadata = _audit_metadata(task, prompt_record, text, candidate)
    metadata.update(
        agent_record_id=receipt,
        guidance_response_usage=response.get("usage"),
        guidance_format_ok=guidance_text is not None,
        execution_backend=executor.backend.safe_dict(),
        arm=arm.name,
        parent_selection=arm.selection,
        run_seed=arm.run_seed,
    )
    repairs = dict(candidate.result.repairs or {}) if candidate.result else {}
    if guidance_repairs:
        repairs["raw_guidance_text"] = guidance_repairs
    if repairs:
        metadata["model_text_repairs"] = repairs
    if not arm.grows_tree:
        metadata[ADDS_TO_TREE] = False
    metadata = valid_data(metadata)  # the backstop: every string of the record valid UTF-8
    slot = task.slot
    entry = build_entry(
        parent=task.parent,
        step=slot.step,
        entry_id=arm.entry_id(slot.step, slot.group, slot.rollout),
        guidance=guidance_text,
        execution_thinking=candidate.result.reasoning if candidate.result else "",
        solution=candidate.solution,
        verification=candidate.verification,
        raw_summary=candidate.raw_summary,
        metadata=metadata,
    )
    timings["total_s"] = time.monotonic() - started
    return FinishedRollout(task.slot, entry, timings)


def _execute(
    guidance_text: str,
    task: RolloutTask,
    settings: RolloutSettings,
    executor: Executor,
    scorer: Scorer,
    on_stage: Callable[[str], None],
    timings: dict[str, float],
) -> _Candidate:
    """Executor call, solution extraction, judge. Executor exceptions and any scorer exception
    but its infrastructure error are `execution_error` (the reference's catch-all around both),
    a missing program is `parse_error`; the scorer's infrastructure error and an executor that
    refuses the key or the account (401/402/403) propagate."""
    contract = settings.contract
    prompt = executor_prompt(contract, settings.problem, task.parent_entry, guidance_text)
    on_stage("executor")
    mark = time.monotonic()
    slot = task.slot
    seed = settings.arm.sampling_seed(slot.step, slot.group, slot.rollout)
    try:
        result = executor.complete(prompt.messages(), seed=seed)
    except ExecutorAccessError:
        raise  # the key or the account is refused: the run stops (harness.run.step)
    except Exception as exc:  # any other executor failure is this rollout's execution_error
        failure = VerificationResult.failure(EXECUTION_ERROR, f"{type(exc).__name__}: {exc}")
        return _Candidate(failure)
    finally:
        timings["executor_s"] = time.monotonic() - mark
    solution = extract_solution(result.text, contract.solution_language)
    raw_summary = extract_summary(result.text)
    if solution is None:
        message = NO_SOLUTION_MESSAGE.format(language=contract.solution_language)
        failure = VerificationResult.failure(PARSE_ERROR, message)
        return _Candidate(failure, result, None, raw_summary)
    on_stage("judge")
    mark = time.monotonic()
    try:
        verification = scorer(solution)
    except JudgeUnavailableError:
        raise  # no verdict: the slot is neither journaled nor reported (harness.run.step)
    except Exception as exc:  # as the reference: the rollout's execution_error, reward 0
        log.exception("%s: the scorer raised; the rollout is an execution_error", slot)
        verification = VerificationResult.failure(EXECUTION_ERROR, f"{type(exc).__name__}: {exc}")
    finally:
        timings["judge_s"] = time.monotonic() - mark
    return _Candidate(verification, result, solution, raw_summary)


def _audit_metadata(
    task: RolloutTask, prompt: dict[str, str] | None, guidance_text: str, candidate: _Candidate
) -> dict[str, Any]:
    """The entry metadata of the rollout record (docs/running.md), plus the slot, so a report can
    be rebuilt from the entry alone on resume."""
    slot, result = task.slot, candidate.result
    return {
        "group_uid": group_uid(slot.step + 1, slot.group),
        "selected_node_id": task.parent.id,
        "selected_parent_entry_id": task.parent_entry.id,
        "selected_parent_solution_sha256": hashlib.sha256(
            task.parent_entry.solution.strip().encode("utf-8")
        ).hexdigest(),
        "step": slot.step,
        "group": slot.group,
        "rollout": slot.rollout,
        "guidance_generation_attempts": 1,
        "raw_guidance_text": guidance_text,
        "guidance_prompt": prompt,
        "execution_text": result.text if result else "",
        "prompt_mode": PROMPT_MODE,
        "summary_semantics": SUMMARY_SEMANTICS,
        # The reference's `{}` when no executor answer came (malformed guidance, a failed call).
        "execution_response_metadata": result.response_metadata() if result else {},
        "execution_response_usage": result.response_usage() if result else {},
        "verification_artifacts": dict(candidate.verification.artifacts),
    }


def report_body(entry: LibraryEntry, groups_per_step: int, rollouts_per_group: int) -> dict:
    """The `/reef/report` body of a journaled rollout (the receipt goes in `references`): score =
    reward (0 for every failure kind), feedback `"<status>: <message>"`, the grid metadata and
    `search_value`, the child's raw verifier score.
    Built from the entry alone, so a resumed run posts exactly what the crashed one would have."""
    meta = entry.metadata
    step, group = int(meta["step"]), int(meta["group"])
    if not math.isfinite(entry.verifier_reward):
        raise NonFiniteRewardError(f"entry {entry.id}: reward {entry.verifier_reward!r}")
    return {
        "score": float(entry.verifier_reward),
        "feedback": f"{entry.verifier_status}: {entry.verifier_message}",
        "metadata": {
            "step": step,
            "group": group,
            "rollout": int(meta["rollout"]),
            "groups_per_step": groups_per_step,
            "rollouts_per_group": rollouts_per_group,
            "algorithm": ALGORITHM,
            "comparison_set": f"tttd-step-{step}-group-{group}",
            "parent_id": entry.parent_id,
            # The reference's search value: the raw verifier score of the candidate this rollout
            # produced (null when it produced none), not the parent's value.
            "search_value": entry.verifier_raw_score,
            "guidance_ttt": True,
            "prompt_mode": PROMPT_MODE,
            "archive_timestep": entry.timestep,
            "library_entry_id": entry.id,
        },
    }


def _content(response: Mapping[str, Any]) -> str:
    """The guidance answer text (`choices[0].message.content`); "" when absent, which the
    strict parser then refuses like any other malformed answer."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return ""
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, str) else ""
