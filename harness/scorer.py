"""The judge boundary: the `Scorer` interface and the FrontierCS judge client.

A scorer turns one candidate program into one `VerificationResult`. The FrontierCS client speaks
the judge's HTTP protocol (multipart submit, poll `GET /result/{sid}`) and hardens what it reads:

* **A consistent `done` result is a valid candidate**, whatever its score: one in which every case
  failed is `valid` with score 0, as in the reference (it becomes an archive child).
* **Candidate failures** become `invalid` with reward 0 and the judge's message: a compile error
  of the candidate, a score that disagrees with its per-case verdicts (the stderr `Ratio:`
  exploit among them), a non-finite score or ratio, an evaluation still queued at the deadline,
  a submission too large.
* **Judge infrastructure faults** are never a reward: unreachable judge, 5xx, a body that is not
  JSON or misses its fields, a judge-side exception (an `error` answer that is not the
  candidate's compile failure, e.g. "checker compile failed"), a result the judge lost. Each
  attempt that hits one is retried with exponential backoff; when the attempts are spent the
  client raises `JudgeUnavailableError` and the caller stops before reporting the slot
  (docs/judge.md).

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
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from harness.contract import load_contract
from harness.state import INVALID, VALID, VerificationResult
from harness.validation import http_url

log = logging.getLogger(__name__)

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


class Scorer(Protocol):
    """Scores one candidate program. Returns a verdict for every candidate; raises only when no
    verdict can be obtained (`JudgeUnavailableError`), never turns such a fault into a reward."""

    def __call__(self, code: str) -> VerificationResult: ...

    def suite(self) -> str:
        """The name of the suite the judge scores on (`harness.suites`); raises
        `JudgeUnavailableError` when the judge cannot say."""
        ...


class JudgeUnavailableError(RuntimeError):
    """The judge failed as infrastructure on every attempt, so the candidate has no verdict.

    The caller must not report a reward for this candidate; it stops the step and resumes later.
    """

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class JudgeFault(Exception):
    """One attempt met a judge infrastructure fault. `FrontierCSScorer` retries the attempt and
    raises `JudgeUnavailableError` when none is left; it never escapes a scorer call."""


@dataclass(frozen=True)
class JudgeSettings:
    """Where the judge is and how patiently to talk to it. Defaults are the reference protocol:
    submit timeout min(30, remaining), poll every 2 s with min(10, remaining) per request, and a
    340 s deadline per attempt counted from before the submit."""

    base_url: str
    problem_id: str
    lang: str = "cpp"
    deadline_s: float = 340.0
    poll_interval_s: float = 2.0
    submit_timeout_s: float = 30.0
    poll_timeout_s: float = 10.0
    attempts: int = 4
    retry_backoff_s: float = 5.0

    def __post_init__(self) -> None:
        try:  # the same URL rule serve.yaml's judge_url is held to
            http_url(self.base_url)
        except ValueError as exc:
            raise ValueError(f"judge url {self.base_url!r} {exc}") from None
        if not str(self.problem_id).strip():
            raise ValueError("judge problem id is empty; set judge_problem_id in contract.json")
        for name in ("deadline_s", "poll_interval_s", "submit_timeout_s", "poll_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"judge setting {name}={getattr(self, name)!r} must be > 0")
        if self.attempts < 1 or self.retry_backoff_s < 0:
            raise ValueError(
                f"judge retries need attempts >= 1 and backoff >= 0, got attempts={self.attempts}"
                f" backoff={self.retry_backoff_s}"
            )


_SUBMIT_LOCKS: dict[str, threading.Lock] = {}
_SUBMIT_LOCKS_GUARD = threading.Lock()


def _submit_lock(base_url: str) -> threading.Lock:
    """The one lock that serialises `POST /submit` to a judge URL across every client of this
    process."""
    with _SUBMIT_LOCKS_GUARD:
        return _SUBMIT_LOCKS.setdefault(base_url.rstrip("/"), threading.Lock())


@dataclass(frozen=True)
class Scoring:
    """A task's scoring rule: where the raw score comes from and its direction (see above)."""

    direction: str = "max"
    verifier: str = "frontiercs"

    def reward(self, raw: float) -> float:
        """The training reward of a raw score: `raw` (max) or `1 / raw` (min, raw > 0)."""
        return raw if self.direction == "max" else 1.0 / raw


class FrontierCSScorer:
    """A `Scorer` backed by a FrontierCS-protocol judge (the external one or `judges/`).

    Thread-safe: rollouts score concurrently from a worker pool through one shared connection
    pool (one TLS context and keep-alive connections, instead of a client per candidate, which
    cost ~20 ms of CPU each). Submits to one judge URL are serialised across every client of the
    process (the FrontierCS judge gives concurrent submits the same sid); polling stays
    concurrent. Call `close()` when done.
    """

    def __init__(
        self,
        settings: JudgeSettings,
        case_check: CaseCheck | None = None,
        scoring: Scoring | None = None,
    ) -> None:
        self.settings = settings
        self.case_check = case_check
        self.scoring = scoring or Scoring()
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/"),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )

    def close(self) -> None:
        """Close the connection pool; the scorer must not be called afterwards."""
        self._client.close()

    def __enter__(self) -> FrontierCSScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def for_task(
        cls, task_dir: Path, base_url: str, problem_id: str | None = None, **options: Any
    ) -> FrontierCSScorer:
        """Build the client for a task directory: its judge problem (`judge_problem_id` unless
        `problem_id` overrides it), the contract's language (`ContractError` when the contract is
        not valid), its scoring rule, and its case check when it ships one. `options` are further
        `JudgeSettings` fields (deadline, retries, ...)."""
        contract = load_contract(Path(task_dir))
        path = Path(task_dir) / SCORE_CHECK_PATH
        check = load_case_check(path) if path.is_file() else None
        options.setdefault("lang", contract.language.judge_lang)
        problem = str(problem_id or contract.judge_problem_id)
        settings = JudgeSettings(base_url=base_url, problem_id=problem, **options)
        return cls(settings, check, Scoring(contract.score_direction, contract.verifier))

    def suite(self) -> str:
        """The suite the judge serves this problem on (`GET /problems`, see `harness.suites`);
        `JudgeUnavailableError` when the judge does not answer or does not list the problem."""
        from harness.suites import judge_suite

        try:
            return judge_suite(self.settings.base_url, self.settings.problem_id)
        except RuntimeError as exc:
            raise JudgeUnavailableError(str(exc), attempts=1) from exc

    def __call__(self, code: str) -> VerificationResult:
        """Judge `code` and return its hardened verdict. Infrastructure faults are retried with
        backoff `retry_backoff_s · 2^k`; after `attempts` tries, `JudgeUnavailableError`."""
        if not code.strip():
            return VerificationResult.failure(INVALID, "empty program: nothing to submit")
        fault: JudgeFault | None = None
        for attempt in range(1, self.settings.attempts + 1):
            try:
                return self._evaluate_once(code, attempt)
            except JudgeFault as exc:
                fault = exc
                log.warning("judge fault (attempt %d/%d): %s", attempt, self.settings.attempts, exc)
                if attempt < self.settings.attempts:
                    time.sleep(self.settings.retry_backoff_s * 2 ** (attempt - 1))
        raise JudgeUnavailableError(
            f"judge at {self.settings.base_url} failed on all {self.settings.attempts} attempts; "
            f"last fault: {fault}. Check that the judge is running, then resume the run.",
            attempts=self.settings.attempts,
        )

    def _evaluate_once(self, code: str, attempt: int) -> VerificationResult:
        # One submit at a time per judge: the FrontierCS Node judge hands the same sid to
        # concurrent submits (and then serves one program's result to all of them). The deadline
        # starts once this client may submit, so queueing here costs no judging time.
        with _submit_lock(self.settings.base_url):
            started = time.monotonic()
            deadline = started + self.settings.deadline_s
            sid = self._submit(self._client, code, deadline)
        if isinstance(sid, VerificationResult):
            return sid
        answer = self._poll(self._client, sid, deadline)
        artifacts = {
            "judge_sid": sid,
            "judge_attempt": attempt,
            "elapsed_s": round(time.monotonic() - started, 3),
        }
        if answer is None:
            return VerificationResult.failure(
                INVALID, f"evaluation timed out after {self.settings.deadline_s:g}s", **artifacts
            )
        return judge_verdict(answer, self.case_check, artifacts, self.scoring)

    def _submit(self, client: httpx.Client, code: str, deadline: float) -> str | VerificationResult:
        timeout = min(self.settings.submit_timeout_s, max(deadline - time.monotonic(), 0.001))
        try:
            response = client.post(
                "/submit",
                data={"pid": str(self.settings.problem_id), "lang": self.settings.lang},
                files={"code": _code_part(self.settings.lang, code)},
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            raise JudgeFault(f"submit failed: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 413:
            return VerificationResult.failure(
                INVALID, "program too large: the judge refused it (413)"
            )
        if response.status_code >= 500:
            raise JudgeFault(f"submit answered {response.status_code}: {response.text[:200]}")
        if response.status_code >= 400:
            # Not retried: the same request would be refused again (wrong problem id or lang).
            raise JudgeUnavailableError(
                f"judge refused the submission with {response.status_code}: {response.text[:200]}"
                f" — check judge_problem_id {self.settings.problem_id!r} and lang "
                f"{self.settings.lang!r} against GET {self.settings.base_url}/problems",
                attempts=1,
            )
        body = _json_object(response)
        sid = body.get("sid") if body is not None else None
        if isinstance(sid, bool) or not isinstance(sid, int | str) or not str(sid).strip():
            raise JudgeFault(f"submit answered without a sid: {response.text[:200]!r}")
        return str(sid)

    def _poll(self, client: httpx.Client, sid: str, deadline: float) -> dict[str, Any] | None:
        """Poll until the first final answer (kept, never re-read) or the deadline. Before a final
        answer, 404 and transport errors mean "not yet". Returns None when the judge was still
        working at the deadline; raises `JudgeFault` when it stopped answering properly."""
        last = "no answer"
        still_working = False
        unreadable_answer = False
        while (remaining := deadline - time.monotonic()) > 0:
            timeout = min(self.settings.poll_timeout_s, remaining)
            try:
                response = client.get(f"/result/{sid}", timeout=timeout)
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
                # A poll cut short by the deadline says nothing new about the judge.
                cut_short = (
                    isinstance(exc, httpx.TimeoutException)
                    and timeout < self.settings.poll_timeout_s
                )
                still_working = still_working and cut_short
            else:
                body = _json_object(response) if response.status_code == 200 else None
                status = body.get("status") if body is not None else None
                if status in ("done", "error"):
                    return body
                if response.status_code == 404 and unreadable_answer:
                    # A read-once judge has forgotten an answer that we could not parse.
                    raise JudgeFault(f"judge lost the result of sid {sid}")
                unreadable_answer = response.status_code == 200 and body is None
                still_working = status in ("queued", "running")
                last = f"{response.status_code} {response.text[:200]!r}"
            time.sleep(max(min(self.settings.poll_interval_s, deadline - time.monotonic()), 0))
        if still_working:
            return None
        raise JudgeFault(
            f"no final answer for sid {sid} within {self.settings.deadline_s:g}s; last: {last}"
        )


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
    if status == "error":
        message = str(answer.get("error", ""))
        kind = answer.get("errorKind")  # the local judge labels its errors; FrontierCS does not
        if kind == "compile" or (kind is None and is_candidate_compile_failure(message)):
            return VerificationResult.failure(INVALID, _clip(message), **artifacts)
        raise JudgeFault(f"judge-side exception: {_clip(message)}")
    cases, score = answer.get("cases"), answer.get("score")
    if status != "done" or "score" not in answer or not isinstance(cases, list) or not cases:
        raise JudgeFault(f"malformed final answer: {_clip(repr(dict(answer)))}")
    if not all(isinstance(case, Mapping) for case in cases):
        raise JudgeFault("malformed final answer: a case is not a JSON object")
    artifacts = {**artifacts, "case_count": len(cases)}
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
        if problem is not None:
            return _inconsistent(f"case {index}: {problem}", artifacts)
        ratios.append(float(ratio))
    expected = 100.0 * math.fsum(ratios) / len(ratios)
    if abs(score - expected) > SCORE_TOLERANCE:
        return _inconsistent(
            f"score {score!r} disagrees with 100 × mean case ratio {expected!r}", artifacts
        )
    artifacts["case_ratios"] = ratios
    # Every case failing is still a judged candidate: valid with score 0, as in the reference.
    failed = [(i, case) for i, case in enumerate(cases, start=1) if ratios[i - 1] == 0.0]
    if scoring.verifier == "value":
        return _certified_value(answer, cases, failed, scoring, artifacts)
    message = f"score {float(score):.6f} over {len(cases)} cases"
    if failed:
        message += f"; {len(failed)} cases scored 0, first: {_describe_case(*failed[0])}"
    if scoring.direction == "min" and score <= 0:
        return VerificationResult.failure(
            INVALID, _clip(f"{message}; a min-direction score must be positive"), **artifacts
        )
    reward = scoring.reward(float(score))
    return VerificationResult(reward, float(score), True, VALID, _clip(message), artifacts)


def _certified_value(
    answer: Mapping[str, Any],
    cases: list[Any],
    failed: list[tuple[int, Mapping[str, Any]]],
    scoring: Scoring,
    artifacts: dict[str, Any],
) -> VerificationResult:
    """The raw score of a `value` task: the mean `value` the verifier certified, valid only when
    every case was certified (ratio 1) and the judge's mean agrees with the cases' values."""
    uncertified = failed or [
        (i, case) for i, case in enumerate(cases, start=1) if case.get("scoreRatio") != 1.0
    ]
    if uncertified:
        return VerificationResult.failure(
            INVALID, _clip(f"no certified value; {_describe_case(*uncertified[0])}"), **artifacts
        )
    values = [case.get("value") for case in cases]
    value = answer.get("value")
    if not all(_finite(item) for item in values) or not _finite(value):
        return _inconsistent(f"certified cases without a finite value: {values!r}", artifacts)
    expected = math.fsum(values) / len(values)
    if abs(value - expected) > SCORE_TOLERANCE * max(1.0, abs(expected)):
        problem = f"value {value!r} disagrees with the case mean {expected!r}"
        return _inconsistent(problem, artifacts)
    if scoring.direction == "min" and value <= 0:
        return VerificationResult.failure(
            INVALID, f"value {value!r}: a min-direction value must be positive", **artifacts
        )
    artifacts["case_values"] = [float(item) for item in values]
    message = f"value {float(value):.9g} certified on {len(cases)} cases"
    reward = scoring.reward(float(value))
    return VerificationResult(reward, float(value), True, VALID, message, artifacts)


def _code_part(lang: str, code: str) -> tuple[str, bytes, str]:
    """The multipart file part of a submission, named as FrontierCS's clients name it."""
    if lang == "python":
        return ("solution.py", code.encode(), "text/x-python")
    return ("solution.cpp", code.encode(), "text/x-c++src")


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


def _describe_case(index: int, case: Mapping[str, Any]) -> str:
    return f"case {index} {case.get('status', '?')}: {str(case.get('msg', '')).strip()[:200]}"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _clip(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."
