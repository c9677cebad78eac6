"""The judge boundary: the `Scorer` interface and the two errors that cross it.

A scorer turns one candidate program into one `VerificationResult`. This module holds only the
contract, so a test can replace the judge with an honest fake; the pieces behind it are:

* `harness.adapters.judge.frontiercs.FrontierCSScorer`: the `Scorer` that speaks the FrontierCS
  judge's HTTP protocol (multipart submit, poll `GET /result/{sid}`), with its timing
  (`JudgeSettings`) and retries;
* `harness.adapters.judge.verdict`: the pure mapping from one final judge answer to a verdict (the
  score hardening of docs/task.md) and the task's part of it (`Scoring`, the case check).

The error contract: a candidate's own failure (compile error, inconsistent score, timeout, a
submission too large) is a verdict, `invalid` with reward 0. A judge infrastructure fault is never a
reward: each attempt that meets one raises `JudgeFault` inside the client and is retried; when the
attempts are spent the scorer raises `JudgeUnavailableError` and the caller stops before reporting
the slot (judges/README.md).
"""

from __future__ import annotations

from typing import Protocol

from harness.state import VerificationResult


class Scorer(Protocol):
    """Scores one candidate program. Returns a verdict for every candidate; raises only when no
    verdict can be obtained (`JudgeUnavailableError`), never turns such a fault into a reward."""

    def __call__(self, code: str) -> VerificationResult: ...

    def suite(self) -> str:
        """The name of the suite the judge scores on (`harness.adapters.judge.suites`); raises
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
