"""The harness's only door to Reef: the guidance call, the report, and its read-backs.

Everything goes through `reef_client.ReefClient` (the protocol is not re-implemented): the
guidance call is `inference_with_record` on `/v1/chat/completions`, whose receipt
(`x-reef-agent-record-id`) is the record id a report must reference, and the report is
`ReefClient.report`. The read-backs serve resume: the stored reports (receipts and scores, and one
report's payload), so the harness can cross-check its journal with what Reef holds and never
posts a slot twice (Reef accepts a second report of a slot and stores it), and the runtime load
id Reef currently serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reef_client import ReefClient, ReefClientError

#: A guidance answer may take long (8192 tokens with thinking); matches serve.yaml's timeout-s.
GUIDANCE_TIMEOUT_S = 7200.0
REPORT_TIMEOUT_S = 120.0
RECORDS_PAGE = 100  # Reef 0.1.3 serves at most 100 records per page


@dataclass(frozen=True)
class StoredReport:
    """One stored report as Reef's record list shows it."""

    record_id: str
    sequence: int
    references: tuple[str, ...]
    score: float | None

    @classmethod
    def from_summary(cls, record: Mapping[str, Any]) -> StoredReport:
        """From one entry of `GET /reef/scenarios/{s}/records` (unknown shapes become empty)."""
        score = record.get("score")
        numeric = isinstance(score, int | float) and not isinstance(score, bool)
        return cls(
            str(record.get("agent_record_id")),
            int(record.get("sequence") or 0),
            tuple(str(ref) for ref in record.get("references") or ()),
            float(score) if numeric else None,
        )


class ReefChannel:
    """Reef for one scenario, with the bearer token (never logged). Thread-safe: each call is
    one independent HTTP request."""

    def __init__(
        self,
        url: str,
        scenario: str,
        *,
        token: str | None,
        guidance_timeout_s: float = GUIDANCE_TIMEOUT_S,
        report_timeout_s: float = REPORT_TIMEOUT_S,
    ) -> None:
        self.url = url.rstrip("/")
        self.scenario = scenario
        self._guidance = ReefClient(self.url, token=token, timeout_s=guidance_timeout_s)
        self._reports = ReefClient(self.url, token=token, timeout_s=report_timeout_s)

    def guide(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """One guidance completion; returns the response body and its receipt. Raises
        `ReefClientError` on an HTTP error or a missing receipt."""
        return self._guidance.inference_with_record(self.scenario, "/v1/chat/completions", body)

    def report(self, body: Mapping[str, Any], receipt: str) -> dict[str, Any]:
        """Post one rollout's report referencing exactly its own receipt; returns Reef's answer
        (`agent_record_id` of the stored report)."""
        return self._reports.report(self.scenario, dict(body), references=[receipt])

    def reported_receipts(self) -> set[str]:
        """Every inference receipt that a stored report of this scenario references (all pages).
        A scenario Reef does not know yet has none."""
        return {ref for report in self.stored_reports() for ref in report.references}

    def stored_reports(self) -> list[StoredReport]:
        """Every report Reef stores for this scenario, in Reef's sequence order, as the record
        list gives them (receipts referenced and score; no payload). A scenario Reef does not
        know yet has none: Reef's scenario list (`GET /reef/scenarios`: the loaded scenarios and
        every durable registration) is read first, so a new run's first look does not leave an
        `UnknownScenario ... 404` warning in reef.log; a 404 of the record list still means
        none."""
        found: list[StoredReport] = []
        if not self._scenario_listed():
            return found
        after = 0
        while True:
            path = (
                f"/reef/scenarios/{self.scenario}/records?request_type=report"
                f"&limit={RECORDS_PAGE}&after_sequence={after}"
            )
            try:
                page = self._reports.get(path)
            except ReefClientError as exc:
                if exc.status == 404:
                    return found
                raise
            for record in page.get("records", []):
                found.append(StoredReport.from_summary(record))
            after = page.get("next_after_sequence")
            if after is None:
                return found

    def _scenario_listed(self) -> bool:
        """False only when Reef's scenario list answers and does not name this scenario."""
        try:
            page = self._reports.get("/reef/scenarios")
        except ReefClientError:
            return True  # no list: ask for the records, whose 404 says the same
        rows = page.get("scenarios") if isinstance(page, Mapping) else None
        if not isinstance(rows, list):
            return True
        return any(
            isinstance(row, Mapping) and row.get("scenario") == self.scenario for row in rows
        )

    def report_payload(self, record_id: str) -> dict[str, Any] | None:
        """The payload (score, feedback, metadata) of one stored report, or None when Reef no
        longer retains its body."""
        try:
            detail = self._reports.get(f"/reef/scenarios/{self.scenario}/records/{record_id}")
        except ReefClientError as exc:
            if exc.status == 404:
                return None
            raise
        payload = detail.get("payload") if isinstance(detail, Mapping) else None
        return payload if isinstance(payload, dict) else None

    def runtime_load_id(self) -> str | None:
        """The runtime load id Reef serves this scenario with (`GET /reef/status`), or None when
        Reef reports none (e.g. a record-only service)."""
        page = self._reports.get("/reef/status")
        scenarios = page.get("scenarios") if isinstance(page, Mapping) else None
        block = scenarios.get(self.scenario) if isinstance(scenarios, Mapping) else None
        value = block.get("current_runtime_load_id") if isinstance(block, Mapping) else None
        return None if value is None else str(value)
