"""From one final FrontierCS judge answer to a verdict: the score hardening, and the task's part.

Pure, apart from `load_case_check` reading a task's file: no network, no judge process. What it
decides (docs/task.md, "Score hardening"):

* **A consistent `done` result is a valid candidate**, whatever its score: one in which every case
  failed is `valid` with score 0, as in the reference (it becomes an archive child).
* **Candidate failures** become `invalid` with reward 0: a compile error of the candidate, a
  score that disagrees with its per-case verdicts (the stderr `Ratio:` exploit among them), a
  non-finite score or ratio.
* **The message never carries text the candidate controls.** It is the entry's
  `verifier_message` and goes to Reef in the report's feedback, so it is `accepted` for a valid
  candidate (the reference's; FrontierCS results carry no message) and a sentence of ours for a
  failure. What the candidate can write into a judge answer (a failed case's stderr, a compile
  log quoting its source, the text a case check quotes) goes only into the verdict's artifacts,
  bounded to `DETAIL_LIMIT` characters: `case_detail` (the per-case summary), `judge_logs` (an
  error answer's `logs` or `stderr`, else its text; the reference's key) and `score_check`.
  Those stay in the archive entry's `verification_artifacts` and reach neither Reef nor a
  prompt (docs/differences.md, row 37).
* **Answers only a broken judge produces** raise `harness.scorer.JudgeFault` (infrastructure,
  retried by the client): a body missing its fields, a judge-side exception (an `error` answer
  that is not the candidate's compile failure, e.g. "checker compile failed").

A non-finite score is `invalid`, not an infrastructure fault: the judge derives every ratio by
regex from a case message, and a failed run's message is the candidate's own stderr, so the
candidate can provoke it (`Ratio: .` parses as NaN). Treating it as infrastructure would let a
candidate stall the run; treating it as a number would let it poison training.

The generic FrontierCS checks live here (every ratio finite in [0, 1], score = 100 × mean ratio).
What the raw score is and how it becomes a training reward is declared by the task (`Scoring`,
from `contract.json`): the raw score is the judge's `score` (`verifier: frontiercs`) or the
`value` a verifier certified on every case (`verifier: value`); the reward is the raw score for
direction `max` and its inverse `1 / raw` for direction `min` (TTT-Discover's shaping for its
minimisation problems), so the reward always grows as the raw score improves and a failure's
reward 0 stays the worst.
What a genuine checker verdict looks like is task knowledge: a task supplies it as a case check
(`tests/score_check.py` in the task directory, loaded by `load_case_check`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.scorer import JudgeFault
from harness.state import INVALID, VALID, VerificationResult

#: A task's consistency check for one case of a `done` result: a description of what is
#: inconsistent, or None when the case is consistent. It must never raise on any JSON value.
CaseCheck = Callable[[Mapping[str, Any]], "str | None"]

#: Where a task directory keeps its case check; the in-container verifier imports the same file.
SCORE_CHECK_PATH = Path("tests") / "score_check.py"

#: `error` answers whose message contains one of these are the candidate's compile failure,
#: unless the words before it name a judge-side program (`JUDGE_PROGRAMS`: "checker compile
#: failed" is the judge's own fault); every other `error` answer is a judge-side exception
#: (infrastructure). An explicit `errorKind` ("compile" or "judge", set by the local judge) wins.
COMPILE_FAILURE_MARKERS = (
    "compile failed",
    "compilation failed",
    "compile error",
    "compilation error",
)
JUDGE_PROGRAMS = ("checker", "interactor", "validator", "testlib", "generator")

SCORE_TOLERANCE = 1e-6
MESSAGE_LIMIT = 600
#: The bound on each artifact that may hold candidate-controlled text (see above).
DETAIL_LIMIT = 600
#: A valid candidate's message, as the reference stores and reports it.
ACCEPTED = "accepted"
#: The message of a candidate the judge could not compile (its log is `judge_logs`).
COMPILE_FAILED = "the candidate did not compile (the judge's log is in judge_logs)"


@dataclass(frozen=True)
class Scoring:
    """A task's scoring rule: where the raw score comes from and its direction (see above)."""

    direction: str = "max"
    verifier: str = "frontiercs"

    def reward(self, raw: float) -> float:
        """The training reward of a raw score: `raw` (max) or `1 / raw` (min, raw > 0)."""
        return raw if self.direction == "max" else 1.0 / raw


def judge_verdict(
    answer: Mapping[str, Any],
    case_check: CaseCheck | None,
    artifacts: dict[str, Any],
    scoring: Scoring | None = None,
) -> VerificationResult:
    """Map one final FrontierCS answer to a verdict, applying the score hardening (docs/task.md,
    "Score hardening").
    Raises `JudgeFault` for answers that only a broken judge produces. `scoring` is the task's
    rule (raw score and reward; default: the judge's score, max)."""
    scoring = scoring or Scoring()
    status = answer.get("status")
    cache = answer.get("verdictCache")  # the local judge's verdict cache: a stored verdict
    if isinstance(cache, Mapping) and isinstance(cache.get("hit"), bool):
        artifacts = {**artifacts, "judge_cache_hit": cache["hit"]}
    if status == "error":
        # Read as the reference reads an error answer (its harness/scorer.py): the text is
        # `message`, else `error` (FrontierCS answers in `error`), the logs `logs`, else `stderr`.
        message = str(answer.get("message") or answer.get("error") or "")
        logs = answer.get("logs") or answer.get("stderr")
        kind = answer.get("errorKind")  # the local judge labels its errors; FrontierCS does not
        if kind == "compile" or (kind is None and is_candidate_compile_failure(message)):
            kept = _clip(str(logs) if logs else message, DETAIL_LIMIT)
            return VerificationResult.failure(
                INVALID, COMPILE_FAILED, **artifacts, judge_status="error", judge_logs=kept
            )
        raise JudgeFault(f"judge-side exception: {_clip(message)}")
    cases, score = answer.get("cases"), answer.get("score")
    if status != "done" or "score" not in answer or not isinstance(cases, list) or not cases:
        raise JudgeFault(f"malformed final answer: {_clip(repr(dict(answer)))}")
    if not all(isinstance(case, Mapping) for case in cases):
        raise JudgeFault("malformed final answer: a case is not a JSON object")
    artifacts = {
        **artifacts,
        "judge_status": status,
        "score_unbounded": answer.get("scoreUnbounded"),
        "case_count": len(cases),
    }
    if isinstance(answer.get("suite"), Mapping):  # the local judge labels generated suites
        artifacts["judge_suite"] = dict(answer["suite"])
    if not _finite(score):
        return _inconsistent(f"the judge reported a non-finite score {score!r}", artifacts)
    ratios: list[float] = []
    for index, case in enumerate(cases, start=1):
        ratio = case.get("scoreRatio")
        if not _finite(ratio):
            return _inconsistent(f"case {index} has a non-finite ratio {ratio!r}", artifacts)
        if not 0.0 <= ratio <= 1.0:
            return _inconsistent(f"case {index} has ratio {ratio!r} outside [0, 1]", artifacts)
        problem = case_check(case) if case_check is not None else None
        if problem is not None:  # the check may quote the case's message: an artifact only
            artifacts["score_check"] = _clip(f"case {index}: {problem}", DETAIL_LIMIT)
            return _inconsistent(f"case {index} fails the task's score check", artifacts)
        ratios.append(float(ratio))
    expected = 100.0 * math.fsum(ratios) / len(ratios)
    if abs(score - expected) > SCORE_TOLERANCE:
        return _inconsistent(
            f"score {score!r} disagrees with 100 × mean case ratio {expected!r}", artifacts
        )
    artifacts["case_ratios"] = ratios
    # Every case failing is still a judged candidate: valid with score 0, as in the reference.
    failed = [(i, case) for i, case in enumerate(cases, start=1) if ratios[i - 1] == 0.0]
    if scoring.verifier in ("value", "geomean"):
        return _certified_value(answer, cases, failed, scoring, artifacts)
    detail = f"score {float(score):.6f} over {len(cases)} cases"
    if failed:
        detail += f"; {len(failed)} cases scored 0, first: {_describe_case(*failed[0], msg=True)}"
    artifacts["case_detail"] = _clip(detail, DETAIL_LIMIT)
    if scoring.direction == "min" and score <= 0:
        return VerificationResult.failure(
            INVALID, f"score {float(score):g}: a min-direction score must be positive", **artifacts
        )
    reward = scoring.reward(float(score))
    return VerificationResult(reward, float(score), True, VALID, ACCEPTED, artifacts)


def _certified_value(
    answer: Mapping[str, Any],
    cases: list[Any],
    failed: list[tuple[int, Mapping[str, Any]]],
    scoring: Scoring,
    artifacts: dict[str, Any],
) -> VerificationResult:
    """The raw score of a `value` task: the mean `value` the verifier certified, valid only when
    every case was certified (ratio 1) and the judge's mean agrees with the cases' values. For a
    `geomean` task the mean is geometric, over the cases that carry a `value` (the timed ones;
    the others are correctness checks), and the values must be positive."""
    uncertified = failed or [
        (i, case) for i, case in enumerate(cases, start=1) if case.get("scoreRatio") != 1.0
    ]
    if uncertified:
        artifacts["case_detail"] = _clip(_describe_case(*uncertified[0], msg=True), DETAIL_LIMIT)
        return VerificationResult.failure(
            INVALID, f"no certified value; {_describe_case(*uncertified[0])}", **artifacts
        )
    geometric = scoring.verifier == "geomean"
    values = [case.get("value") for case in cases if not geometric or "value" in case]
    value = answer.get("value")
    if not values or not all(_finite(item) for item in values) or not _finite(value):
        return _inconsistent(f"certified cases without a finite value: {values!r}", artifacts)
    if geometric and min(values) <= 0:
        return _inconsistent(f"a geometric mean of non-positive values {values!r}", artifacts)
    expected = (
        math.exp(math.fsum(math.log(item) for item in values) / len(values))
        if geometric
        else math.fsum(values) / len(values)
    )
    if abs(value - expected) > SCORE_TOLERANCE * max(1.0, abs(expected)):
        problem = f"value {value!r} disagrees with the case mean {expected!r}"
        return _inconsistent(problem, artifacts)
    if scoring.direction == "min" and value <= 0:
        return VerificationResult.failure(
            INVALID, f"value {value!r}: a min-direction value must be positive", **artifacts
        )
    artifacts["case_values"] = [float(item) for item in values]
    metrics = [case.get("metrics") for case in cases if isinstance(case.get("metrics"), Mapping)]
    if metrics:  # an evaluator task's other metrics (judges.problems.evaluator)
        artifacts["metrics"] = dict(metrics[0]) if len(metrics) == 1 else [*map(dict, metrics)]
    detail = f"value {float(value):.9g} certified on {len(cases)} cases"
    if geometric:
        detail = (
            f"geometric mean {float(value):.9g} of {len(values)} timed cases; "
            f"{len(cases)} cases passed"
        )
    artifacts["case_detail"] = detail
    reward = scoring.reward(float(value))
    return VerificationResult(reward, float(value), True, VALID, ACCEPTED, artifacts)


def is_candidate_compile_failure(message: str) -> bool:
    """Whether a FrontierCS `error` message is the candidate's compile failure (a candidate
    failure) rather than a judge-side fault such as the checker failing to compile."""
    text = message.lower()
    for marker in COMPILE_FAILURE_MARKERS:
        at = text.find(marker)
        if at >= 0 and not any(program in text[:at] for program in JUDGE_PROGRAMS):
            return True
    return False


def load_case_check(path: Path) -> CaseCheck:
    """Load a task's case check from a Python file defining `check_case(case) -> str | None`.
    Loaded by path (not by package import) so the harness stays ignorant of task packages."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(
            f"score check {path} does not exist; a task ships it as {SCORE_CHECK_PATH}"
        )
    name = "_score_check_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load score check {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check = getattr(module, "check_case", None)
    if not callable(check):
        raise TypeError(f"score check {path} must define check_case(case) -> str | None")
    return check


def _inconsistent(problem: str, artifacts: dict[str, Any]) -> VerificationResult:
    return VerificationResult.failure(
        INVALID, _clip(f"inconsistent judge result, score rejected: {problem}"), **artifacts
    )


def case_verdict(case: Mapping[str, Any]) -> str:
    """A judged case's verdict for a person: the judge's status, except that a case scored
    strictly between 0 and 1 is `partial (ratio 0.6000)` (the judge's record calls every case
    below 1 "Wrong Answer", a partially correct answer included)."""
    ratio = case.get("scoreRatio")
    if _finite(ratio) and 0.0 < ratio < 1.0:
        return f"partial (ratio {float(ratio):.4f})"
    return str(case.get("status", "?"))[:40]


def _describe_case(index: int, case: Mapping[str, Any], *, msg: bool = False) -> str:
    """`case <i> <verdict>` (`case_verdict`), with the case's message (candidate text:
    artifacts only) when `msg`."""
    text = f"case {index} {case_verdict(case)}"
    return f"{text}: {str(case.get('msg', '')).strip()[:200]}" if msg else text


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
