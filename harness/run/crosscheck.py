"""On resume, the journal and Reef's stored reports must tell the same story.

The journal is checksummed (harness/storage/store.py), so damage to it is caught on load; what a
checksum cannot catch is a journal that is internally sound but disagrees with what Reef holds
and trained on (a hand-edited record whose checksum was recomputed, a state directory paired
with the wrong Reef). `cross_check` compares them before any slot runs:

- every archive entry of a rollout whose receipt has a stored report: each such report's score
  must equal the entry's reward; otherwise `ReefDisagrees`, naming the slot;
- every stored report whose receipt no archive entry holds is read in full (its payload names
  its slot). A report of the in-flight step whose slot the journal lacks — the journal line was
  lost (a torn or cut last line) after the report was posted — is rebuilt from Reef's record
  (`rebuilt_entry`) and returned, so the loop journals it and never runs or reports that slot a
  second time. Any other such report (a slot journaled with another receipt, a committed step,
  a later step, a report without the grid metadata) is `ReefDisagrees`, naming it.

A journaled slot with no stored report is not a disagreement: it is the crash between journal
line and report, whose report the loop posts (harness/run/step.py).

Reports of a superseded journal (a step run again under a new serving load,
`ArchiveStore.supersede_in_flight`) are Reef's record of calls that never trained: their
receipts (`superseded`) are skipped, and so, when the in-flight step runs again
(`redo_in_flight`), is every other stored report of that step — none is rebuilt into it.

The rebuilt entry keeps what Reef trained on — the reward, the status and message of the
feedback, the receipt and the grid slot — but Reef never held the program, so the entry has no
solution and no raw score: it never becomes an archive node (`failure_mode` `journal_lost`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.adapters.reef.channel import StoredReport
from harness.library import Archive
from harness.state import STATUSES, LibraryEntry, group_uid

log = logging.getLogger(__name__)

JOURNAL_LOST = "journal_lost"


class ReefDisagrees(RuntimeError):
    """The journal and Reef's stored reports disagree; the message names the slot."""


class ReportSource(Protocol):
    """What the cross-check reads from Reef (`harness.adapters.reef.channel.ReefChannel`)."""

    def stored_reports(self) -> list[StoredReport]: ...

    def report_payload(self, record_id: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class RebuiltSlot:
    """A slot of the in-flight step rebuilt from Reef's report: journal it, do not run it."""

    step: int
    group: int
    rollout: int
    entry: LibraryEntry


def _slot_name(step: int, group: int, rollout: int) -> str:
    return f"step {step} g{group}r{rollout}"


def cross_check(
    archive: Archive,
    in_flight_step: int,
    reef: ReportSource,
    superseded: frozenset[str] = frozenset(),
    redo_in_flight: bool = False,
) -> list[RebuiltSlot]:
    """Compare `archive` (committed steps plus the replayed in-flight journal) with Reef's stored
    reports; return the in-flight slots to rebuild from Reef. Reports of `superseded` receipts,
    and with `redo_in_flight` the in-flight step's other reports, are not compared. Raises
    `ReefDisagrees`."""
    by_receipt: dict[str, list[StoredReport]] = {}
    reports = reef.stored_reports()
    for report in reports:
        for receipt in report.references:
            by_receipt.setdefault(receipt, []).append(report)

    journaled: dict[tuple[int, int, int], LibraryEntry] = {}
    for entry in archive.entries.values():
        slot = _journaled_slot(entry)
        if slot is None:  # the seed, or an entry imported from another run's library.json
            continue
        journaled[slot] = entry
        receipt = str(entry.metadata["agent_record_id"])
        for report in by_receipt.get(receipt, ()):
            if report.score != entry.verifier_reward:
                raise ReefDisagrees(
                    f"{_slot_name(*slot)}: the journal holds reward {entry.verifier_reward!r} but "
                    f"Reef's stored report {report.record_id} for its receipt {receipt} has score "
                    f"{report.score!r}; the archive would not match what Reef trained on — "
                    "restore the state directory that belongs to this Reef, or start a new run"
                )

    known = {str(e.metadata["agent_record_id"]) for e in journaled.values()}
    rebuilt: dict[tuple[int, int], RebuiltSlot] = {}
    for report in sorted(reports, key=lambda r: r.sequence):
        if known.intersection(report.references) or superseded.intersection(report.references):
            continue
        payload = reef.report_payload(report.record_id)
        if payload is None:
            log.warning("Reef no longer retains report %s; not checked", report.record_id)
            continue
        where = f"Reef's report {report.record_id}"
        slot = _slot_of(payload.get("metadata"), where)
        step, group, rollout = slot
        if redo_in_flight and step == in_flight_step:
            log.info("%s: %s is of the step that runs again; not rebuilt", _slot_name(*slot), where)
            continue
        holder = journaled.get(slot)
        if holder is not None:
            raise ReefDisagrees(
                f"{_slot_name(*slot)}: {where} references receipt(s) {list(report.references)} "
                f"but the journal holds receipt {holder.metadata.get('agent_record_id')} for that "
                "slot; the state directory and Reef disagree — use the state directory that "
                "belongs to this Reef scenario, or a new scenario"
            )
        if step != in_flight_step:
            raise ReefDisagrees(
                f"{_slot_name(*slot)}: {where} has no journaled rollout, and its step is not the "
                f"in-flight step {in_flight_step}; the state directory and Reef disagree — use "
                "the state directory that belongs to this Reef scenario, or a new scenario"
            )
        if (group, rollout) not in rebuilt:  # Reef trains on the first report of a slot
            entry = rebuilt_entry(archive, slot, report, payload)
            rebuilt[(group, rollout)] = RebuiltSlot(step, group, rollout, entry)
    return [rebuilt[key] for key in sorted(rebuilt)]


def rebuilt_entry(
    archive: Archive, slot: tuple[int, int, int], report: StoredReport, payload: Mapping[str, Any]
) -> LibraryEntry:
    """The archive entry of a slot whose journal line was lost, from Reef's stored report: the
    reward Reef trained on, the feedback's status and message, the receipt; no program."""
    step, group, rollout = slot
    metadata = payload.get("metadata")
    assert isinstance(metadata, Mapping)  # _slot_of checked it
    feedback = str(payload.get("feedback", ""))
    status, _, message = feedback.partition(": ")
    if status not in STATUSES:
        raise ReefDisagrees(
            f"{_slot_name(*slot)}: Reef's report {report.record_id} has feedback {feedback!r}, "
            "not '<status>: <message>' as this harness reports; it was not made by this run"
        )
    if report.score is None or len(report.references) != 1:
        raise ReefDisagrees(
            f"{_slot_name(*slot)}: Reef's report {report.record_id} has score {report.score!r} "
            f"and receipts {list(report.references)}; this harness reports one score and one "
            "receipt"
        )
    parents = archive.select_parents(step)
    return LibraryEntry(
        id=str(metadata.get("library_entry_id")),
        parent_id=metadata.get("parent_id"),
        problem_id=parents[group].problem_id,
        timestep=step + 1,
        guidance="",
        execution_thinking="",
        solution="",
        verifier_reward=report.score,
        verifier_raw_score=None,
        verifier_status=status,
        verifier_message=message,
        summary="",
        reusable_idea="",
        failure_mode=JOURNAL_LOST,
        metadata={
            "group_uid": group_uid(step + 1, group),
            "selected_node_id": parents[group].id,
            "step": step,
            "group": group,
            "rollout": rollout,
            "agent_record_id": report.references[0],
            "guidance_format_ok": status != "guidance_format_error",
            "search_value": metadata.get("search_value"),
            "rebuilt_from_reef_report": report.record_id,
        },
    )


def _journaled_slot(entry: LibraryEntry) -> tuple[int, int, int] | None:
    """The grid slot of a rollout entry this harness made (it carries its receipt and slot)."""
    if entry.timestep < 1 or not entry.metadata.get("agent_record_id"):
        return None
    try:
        return _slot_of(entry.metadata, "")
    except ReefDisagrees:
        return None


def _slot_of(metadata: Any, where: str) -> tuple[int, int, int]:
    keys = ("step", "group", "rollout")
    values = [metadata.get(k) if isinstance(metadata, Mapping) else None for k in keys]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ReefDisagrees(
            f"{where} carries no step/group/rollout grid metadata ({values}); it was not made by "
            "this harness — use a Reef scenario of this run only"
        )
    return values[0], values[1], values[2]


def describe(rebuilt: Sequence[RebuiltSlot]) -> str:
    """One line for the log: which slots were rebuilt from Reef."""
    return ", ".join(_slot_name(r.step, r.group, r.rollout) for r in rebuilt)
