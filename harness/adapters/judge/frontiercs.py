"""The FrontierCS judge client: the `Scorer` that speaks the judge's HTTP protocol.

`FrontierCSScorer` submits a program (multipart `POST /submit`), polls `GET /result/{sid}` until
the first final answer or the attempt's deadline, and hands that answer to
`harness.adapters.judge.verdict.judge_verdict`. What it owns is the transport and its patience
(`JudgeSettings`):

* the candidate's own transport-level failures are verdicts with reward 0: an evaluation still
  queued at the deadline and an empty program are `invalid`; a submission the judge refuses as
  too large (413) is `environment_error`, as the reference's judge client makes every refused
  submit (docs/differences.md, row 10);
* a verdict's artifacts carry the reference's keys (`code`, `problem_id`, `submission_id`,
  `judge_status`, and `score_unbounded` or `judge_logs` from `judge_verdict`) and ours
  (`judge_attempt`, `elapsed_s`, the case records' summaries);
* judge infrastructure faults are never a reward: unreachable judge, 5xx, a body that is not
  JSON or misses its fields, a result the judge lost, and whatever `judge_verdict` calls a
  broken judge's answer. Each attempt that hits one is retried with exponential backoff; when
  the attempts are spent the client raises `JudgeUnavailableError` and the caller stops before
  reporting the slot (judges/README.md);
* a submit refused with another 4xx (unknown problem id or language) is a configuration error:
  `JudgeUnavailableError` at once, without retrying.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.adapters.judge.token import judge_headers, unauthorized_hint
from harness.adapters.judge.verdict import (
    SCORE_CHECK_PATH,
    CaseCheck,
    Scoring,
    judge_verdict,
    load_case_check,
)
from harness.contract import load_contract
from harness.scorer import JudgeFault, JudgeUnavailableError
from harness.state import ENVIRONMENT_ERROR, INVALID, VerificationResult
from harness.validation import http_url

log = logging.getLogger(__name__)

#: Where the project's local judge listens by default (`python -m judges`, judges/README.md).
DEFAULT_JUDGE_URL = "http://127.0.0.1:8081"
#: The verdict message of a submission the judge refused as too large (HTTP 413).
SUBMISSION_TOO_LARGE = "judge submission failed with HTTP 413: the program is too large"


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
            headers=judge_headers(),  # the judge's access token, where one is set
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        #: The judge's last final answer (its per-case records), None before one.
        self.last_answer: dict[str, Any] | None = None

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
        """The suite the judge serves this problem on (`GET /problems`, see
        `harness.adapters.judge.suites`);
        `JudgeUnavailableError` when the judge does not answer or does not list the problem."""
        from harness.adapters.judge.suites import judge_suite

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
        self.last_answer = answer  # what `guidance-ttt score --cases` shows, case by case
        artifacts = {
            "code": code,
            "problem_id": str(self.settings.problem_id),
            "submission_id": sid,
            "judge_attempt": attempt,
            "elapsed_s": round(time.monotonic() - started, 3),
        }
        if answer is None:
            return VerificationResult.failure(
                INVALID,
                f"evaluation timed out after {self.settings.deadline_s:g}s",
                **artifacts,
                judge_status="timeout",
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
        if response.status_code == 413:  # the reference: an environment_error, reward 0
            return VerificationResult.failure(ENVIRONMENT_ERROR, SUBMISSION_TOO_LARGE, code=code)
        if response.status_code >= 500:
            raise JudgeFault(f"submit answered {response.status_code}: {response.text[:200]}")
        if response.status_code == 401:  # not retried: the same token is refused again
            raise JudgeUnavailableError(
                f"judge at {self.settings.base_url} refused the submission with 401"
                + unauthorized_hint(401),
                attempts=1,
            )
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


def _code_part(lang: str, code: str) -> tuple[str, bytes, str]:
    """The multipart file part of a submission, named as FrontierCS's clients name it."""
    if lang == "python":
        return ("solution.py", code.encode(), "text/x-python")
    return ("solution.cpp", code.encode(), "text/x-c++src")


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
