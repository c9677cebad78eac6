"""The journal-versus-Reef cross-check on plain values: every branch of `cross_check`.

Reef is an in-memory `ReportSource` holding report bodies made by the real `report_body` (the
same bodies the loop posts); the end-to-end cases against a real `reef serve` and the real run
process are in tests/harness/test_crash_resume.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from archive_builders import make_seed

from harness.adapters.reef.channel import StoredReport
from harness.library import Archive
from harness.run.crosscheck import JOURNAL_LOST, ReefDisagrees, cross_check
from harness.run.rollout import report_body
from harness.state import INVALID, VALID, ArchiveConfig, LibraryEntry

G, R = 1, 2
CONFIG = ArchiveConfig(rollout_n=R, groups_per_batch=G)


class MemoryReef:
    """Stored reports as Reef keeps them: the list view (receipts, score) and each payload."""

    def __init__(self) -> None:
        self.reports: list[StoredReport] = []
        self.payloads: dict[str, dict[str, Any]] = {}

    def post(self, entry: LibraryEntry, receipt: str | None = None) -> StoredReport:
        body = report_body(entry, G, R)
        record = StoredReport(
            f"report-{len(self.reports)}",
            len(self.reports) + 1,
            (receipt or entry.metadata["agent_record_id"],),
            body["score"],
        )
        self.reports.append(record)
        self.payloads[record.record_id] = body
        return record

    def stored_reports(self) -> list[StoredReport]:
        return list(self.reports)

    def report_payload(self, record_id: str) -> dict[str, Any] | None:
        return self.payloads.get(record_id)


def rollout(archive: Archive, step: int, rollout: int, reward: float = 0.47) -> LibraryEntry:
    parent = archive.select_parents(step)[0]
    return LibraryEntry(
        id=f"entry-{step}-{rollout}",
        parent_id=parent.id,
        problem_id=parent.problem_id,
        timestep=step + 1,
        guidance="g",
        execution_thinking="",
        solution="int main() {}",
        verifier_reward=reward,
        verifier_raw_score=reward * 100 if reward else None,
        verifier_status=VALID if reward else INVALID,
        verifier_message="ok" if reward else "wrong answer on case 2",
        summary="s",
        reusable_idea="s",
        failure_mode=None if reward else INVALID,
        metadata={
            "step": step,
            "group": 0,
            "rollout": rollout,
            "agent_record_id": f"receipt-{step}-{rollout}",
            "search_value": reward * 100 if reward else None,
            "guidance_format_ok": True,
        },
    )


@pytest.fixture
def state() -> tuple[Archive, MemoryReef]:
    """Step 0 complete and reported; step 1 with slot r0 journaled and reported."""
    archive, reef = Archive.from_seed(CONFIG, make_seed()), MemoryReef()
    for step, slots in ((0, (0, 1)), (1, (0,))):
        for slot in slots:
            entry = rollout(archive, step, slot, reward=0.0 if slot else 0.47)
            archive.submit(step, 0, entry)
            reef.post(entry)
    return archive, reef


def test_an_archive_that_agrees_with_reef_needs_nothing(state) -> None:
    archive, reef = state
    assert cross_check(archive, 1, reef) == []


def test_a_score_that_differs_from_the_journal_is_refused_naming_the_slot(state) -> None:
    archive, reef = state
    reef.reports[1] = StoredReport("report-1", 2, ("receipt-0-1",), 0.93)
    with pytest.raises(ReefDisagrees, match=r"step 0 g0r1: the journal holds reward 0\.0"):
        cross_check(archive, 1, reef)


def test_a_lost_in_flight_line_is_rebuilt_from_the_first_report_of_its_slot(state) -> None:
    archive, reef = state
    lost = rollout(archive, 1, 1, reward=0.0)
    first = reef.post(lost)
    reef.post(lost, receipt="receipt-duplicate")  # a second report Reef does not train on
    (rebuilt,) = cross_check(archive, 1, reef)
    assert (rebuilt.step, rebuilt.group, rebuilt.rollout) == (1, 0, 1)
    entry = rebuilt.entry
    assert entry.id == lost.id and entry.parent_id == lost.parent_id and entry.timestep == 2
    assert entry.verifier_reward == first.score and entry.verifier_status == INVALID
    assert entry.verifier_message == "wrong answer on case 2"
    assert entry.failure_mode == JOURNAL_LOST and entry.solution == ""
    assert entry.verifier_raw_score is None and not entry.is_valid  # never an archive node
    assert entry.metadata["agent_record_id"] == "receipt-1-1"
    assert entry.metadata["rebuilt_from_reef_report"] == first.record_id
    archive.submit(1, 0, entry)  # it fits the group the journal left open
    assert archive.step_finalized(1)


def test_a_slot_journaled_with_another_receipt_is_refused(state) -> None:
    archive, reef = state
    reef.post(archive.entries["entry-0-0"], receipt="receipt-of-another-run")
    with pytest.raises(ReefDisagrees, match=r"step 0 g0r0: .* references receipt\(s\)"):
        cross_check(archive, 1, reef)


def test_a_report_of_a_committed_or_later_step_without_a_journal_line_is_refused(state) -> None:
    archive, reef = state
    future = Archive.from_seed(CONFIG, make_seed())
    for step in range(3):
        future.select_parents(step)
    reef.post(rollout(future, 2, 0))
    with pytest.raises(ReefDisagrees, match=r"step 2 g0r0: .* not the in-flight step 1"):
        cross_check(archive, 1, reef)


def test_a_report_without_grid_metadata_is_refused_naming_it(state) -> None:
    archive, reef = state
    record = StoredReport("report-foreign", 99, ("receipt-foreign",), 1.0)
    reef.reports.append(record)
    reef.payloads[record.record_id] = {"score": 1.0, "feedback": "good", "metadata": {}}
    with pytest.raises(ReefDisagrees, match=r"report-foreign carries no step/group/rollout"):
        cross_check(archive, 1, reef)


def test_an_entry_without_receipt_or_slot_is_not_compared(state) -> None:
    # e.g. an entry of an archive imported from another run's library.json
    archive, reef = state
    imported = rollout(archive, 1, 1)
    archive.submit(1, 0, LibraryEntry.from_dict({**imported.to_dict(), "metadata": {}}))
    assert cross_check(archive, 1, reef) == []


def test_reports_of_a_superseded_journal_or_a_step_run_again_are_not_rebuilt(state) -> None:
    archive, reef = state
    lost = rollout(archive, 1, 1, reward=0.0)
    reef.post(lost)  # a report of the in-flight step with no journal line
    assert cross_check(archive, 1, reef, redo_in_flight=True) == []
    assert cross_check(archive, 1, reef, superseded=frozenset({"receipt-1-1"})) == []
    (rebuilt,) = cross_check(archive, 1, reef)
    assert rebuilt.rollout == 1
