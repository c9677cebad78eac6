"""Typed records shared by the archive, the judge client and the rollout loop.

Records that cross a boundary (files, HTTP bodies) are validated when they are built from raw
data: an unknown key or a wrong type is an error that names the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Verifier statuses (SPEC §1). Every status except VALID is a failure kind with reward 0.
VALID = "valid"
INVALID = "invalid"
ENVIRONMENT_ERROR = "environment_error"
EXECUTION_ERROR = "execution_error"
PARSE_ERROR = "parse_error"
GUIDANCE_FORMAT_ERROR = "guidance_format_error"
STATUSES = (VALID, INVALID, ENVIRONMENT_ERROR, EXECUTION_ERROR, PARSE_ERROR, GUIDANCE_FORMAT_ERROR)


@dataclass(frozen=True)
class VerificationResult:
    """One candidate's verdict. `reward` is what training sees; `raw_score` is the judge's number
    (None when there is none). Only `valid` results carry a positive reward."""

    reward: float
    raw_score: float | None
    valid: bool
    status: str
    message: str
    artifacts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verifier status {self.status!r}; expected one of {STATUSES}")
        if not math.isfinite(self.reward):
            raise ValueError(f"verifier reward must be finite, got {self.reward!r}")
        if self.valid != (self.status == VALID):
            raise ValueError(f"valid={self.valid} contradicts status {self.status!r}")

    @classmethod
    def failure(cls, status: str, message: str, **artifacts: Any) -> VerificationResult:
        """A candidate failure: reward 0, no raw score."""
        return cls(0.0, None, False, status, message, dict(artifacts))
