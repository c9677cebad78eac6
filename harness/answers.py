"""Reading model answers back: the strict guidance parser, summary and solution extraction, and
the entry a rollout leaves in the archive (docs/design.md §1, §3).

The guidance parser is deliberately unforgiving: no repair, no fallback, no retry. A malformed
answer is a `guidance_format_error` rollout with reward 0, which is the signal the guidance
model is trained on.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from harness.archive.summary_filter import summary_code_problem
from harness.contract import CPP_LANGUAGES, PYTHON_LANGUAGES, fence_tag
from harness.state import LibraryEntry, LibraryNode, VerificationResult

__all__ = [
    "GUIDANCE_CLOSE",
    "GUIDANCE_EMPTY",
    "GUIDANCE_NOT_ONE_BLOCK",
    "GUIDANCE_NOT_TERMINAL",
    "GUIDANCE_OPEN",
    "NO_CANONICAL_SUMMARY",
    "SOLUTION_CLOSE",
    "SOLUTION_OPEN",
    "SUMMARY_CLOSE",
    "SUMMARY_OPEN",
    "GuidanceFormatError",
    "canonical_summary",
    "extract_solution",
    "extract_summary",
    "parse_guidance",
    "rollout_entry",
]

GUIDANCE_OPEN, GUIDANCE_CLOSE = "<guidance>", "</guidance>"
SUMMARY_OPEN, SUMMARY_CLOSE = "<summary>", "</summary>"
SOLUTION_OPEN, SOLUTION_CLOSE = "<solution>", "</solution>"

GUIDANCE_NOT_ONE_BLOCK = "expected exactly one complete <guidance> block"
GUIDANCE_NOT_TERMINAL = "the <guidance> block must be terminal"
GUIDANCE_EMPTY = "the <guidance> block is empty"

#: The stored summary of a candidate whose executor answer held none, worded as the reference's
#: (its harness/agent.py): the guidance model reads it in place of a summary.
NO_CANONICAL_SUMMARY = "The execution model did not emit a usable canonical summary."

#: A code fence as the reference reads one: three backticks, one of the language's tags (any
#: case) right after them, then the body up to the next three backticks, surrounding whitespace
#: dropped. Nothing else is special: a one-line fence counts, and whatever follows the tag on
#: its line (`cpp17`'s `17`, an info string) is part of the body, as in the reference.
_FENCES = {
    tag: re.compile(
        "```(?:" + "|".join(re.escape(t) for t in tags) + r")\s*(.*?)\s*```",
        re.IGNORECASE | re.DOTALL,
    )
    for tag, tags in (("cpp", CPP_LANGUAGES), ("python", PYTHON_LANGUAGES))
}


class GuidanceFormatError(ValueError):
    """The guidance answer is malformed; `str(error)` is one of the three fixed messages."""


def parse_guidance(text: str) -> str:
    """The guidance of a policy answer: on the stripped text, exactly one `<guidance>` and one
    `</guidance>` (else NOT_ONE_BLOCK), the close tag after the open tag with only whitespace
    after it (else NOT_TERMINAL), non-empty inner text (else EMPTY).
    Text before the block (e.g. a thinking trace) is allowed. Returns the stripped inner text;
    raises `GuidanceFormatError` otherwise."""
    stripped = text.strip()
    start, end = stripped.find(GUIDANCE_OPEN), stripped.find(GUIDANCE_CLOSE)
    if stripped.count(GUIDANCE_OPEN) != 1 or stripped.count(GUIDANCE_CLOSE) != 1:
        raise GuidanceFormatError(GUIDANCE_NOT_ONE_BLOCK)
    # A close tag before the open tag is "not terminal", as in the reference.
    if end < start + len(GUIDANCE_OPEN) or stripped[end + len(GUIDANCE_CLOSE) :].strip():
        raise GuidanceFormatError(GUIDANCE_NOT_TERMINAL)
    inner = stripped[start + len(GUIDANCE_OPEN) : end].strip()
    if not inner:
        raise GuidanceFormatError(GUIDANCE_EMPTY)
    return inner


def extract_summary(text: str) -> str | None:
    """The executor's terminal summary: the stripped answer must end with `</summary>`; the
    summary is the text after the last `<summary>`. None if absent or empty."""
    stripped = text.strip()
    if not stripped.endswith(SUMMARY_CLOSE):
        return None
    start = stripped.rfind(SUMMARY_OPEN)
    if start < 0:
        return None
    inner = stripped[start + len(SUMMARY_OPEN) : -len(SUMMARY_CLOSE)].strip()
    return inner or None


def extract_solution(text: str, solution_language: str) -> str | None:
    """The candidate program: the body of the last code fence tagged for the task's language
    (cpp/c++/cxx or python/py, any case; see `_FENCES`), stripped. If a
    `<solution>...</solution>` block exists only its inside is searched. None when no such
    fence exists or its body is empty."""
    scope = text
    start = text.find(SOLUTION_OPEN)
    if start >= 0:
        end = text.find(SOLUTION_CLOSE, start)
        if end >= 0:
            scope = text[start + len(SOLUTION_OPEN) : end]
    matches = list(_FENCES[fence_tag(solution_language)].finditer(scope))
    return (matches[-1].group(1).strip() or None) if matches else None


def canonical_summary(raw_summary: str | None) -> str:
    """The stored `summary` of a candidate: the extracted summary, or a fixed sentence saying
    that no usable canonical summary was emitted."""
    if raw_summary is not None and raw_summary.strip():
        return raw_summary.strip()
    return NO_CANONICAL_SUMMARY


def rollout_entry(
    *,
    parent: LibraryNode,
    step: int,
    guidance: str | None,
    execution_thinking: str,
    solution: str | None,
    verification: VerificationResult,
    raw_summary: str | None,
    metadata: Mapping[str, Any],
    entry_id: str | None = None,
) -> LibraryEntry:
    """The archive entry of one finished rollout of `step` that expanded `parent`.

    `guidance` is None for malformed guidance (stored as ""); the canonical summary rule fills
    `summary` and `reusable_idea`, and the raw extraction is kept as
    `metadata.raw_model_summary`; `failure_mode` is the status unless the candidate is valid.
    A summary that carries code (`summary_code_problem`, the summary filter of
    `harness.archive.summary_filter`) is withheld: the entry keeps the fixed
    no-summary sentence, `metadata.raw_model_summary` is None, and the withheld text and the
    reason are recorded as `metadata.withheld_model_summary` and `metadata.summary_withheld`.
    The score and reward are untouched.
    """
    withheld = summary_code_problem(raw_summary, solution)
    extra: dict[str, Any] = {}
    if withheld is not None:
        extra = {"withheld_model_summary": raw_summary, "summary_withheld": withheld}
        raw_summary = None
    summary = canonical_summary(raw_summary)
    return LibraryEntry(
        id=entry_id or str(uuid.uuid4()),
        parent_id=parent.id,
        problem_id=parent.problem_id,
        timestep=step + 1,
        guidance=guidance or "",
        execution_thinking=execution_thinking,
        solution=solution or "",
        verifier_reward=verification.reward,
        verifier_raw_score=verification.raw_score,
        verifier_status=verification.status,
        verifier_message=verification.message,
        summary=summary,
        reusable_idea=summary,
        failure_mode=None if verification.valid else verification.status,
        metadata={**metadata, **extra, "raw_model_summary": raw_summary},
    )
