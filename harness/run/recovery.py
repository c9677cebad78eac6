"""What a resumed run repairs before its first step, so nothing is lost or done twice.

Two repairs, each said out loud (a log warning and an event), never silent: journal slots of the
in-flight step whose line was lost although Reef holds their report are rebuilt from that report
(`rebuild_lost_slots`), and a `committed-library.json` that is missing or does not match the
hash the last commit recorded is rebuilt from the committed store (`check_committed_library`).
The store is the durable source of truth; Reef's stored reports are the record of what was
already reported.
"""

from __future__ import annotations

import logging

from harness.library import Archive, ArchiveError
from harness.observe.events import EventSink
from harness.run.crosscheck import ReefDisagrees, ReportSource, cross_check, describe
from harness.storage.state_dir import StateDirectory
from harness.storage.store import ArchiveStore, JournalRecord

log = logging.getLogger(__name__)


def rebuild_lost_slots(
    store: ArchiveStore, archive: Archive, step: int, reef: ReportSource, events: EventSink
) -> tuple[JournalRecord, ...]:
    """Cross-check the journal with Reef's stored reports (`harness.run.crosscheck`; a
    disagreement raises `ReefDisagrees` naming the slot) and journal the in-flight slots whose
    line was lost but whose report Reef holds, rebuilt from that report, so they are neither
    run nor reported again. Returns their journal records."""
    rebuilt = cross_check(archive, step, reef)
    records = []
    for slot in rebuilt:
        try:
            store.record_rollout(archive, slot.step, slot.group, slot.rollout, slot.entry)
        except ArchiveError as exc:
            raise ReefDisagrees(
                f"step {slot.step} g{slot.group}r{slot.rollout}: Reef's report does not fit the "
                f"archive ({exc}); use the state directory that belongs to this Reef scenario"
            ) from exc
        records.append(JournalRecord(slot.step, slot.group, slot.rollout, slot.entry))
    if rebuilt:
        log.warning(
            "the journal had lost %d reported slot(s) (%s); rebuilt from Reef's stored reports "
            "without running or reporting them again (their programs are not recoverable)",
            len(rebuilt),
            describe(rebuilt),
        )
        events.emit(
            "slots_rebuilt_from_reef",
            step=step,
            slots=[[r.group, r.rollout] for r in rebuilt],
            reports=[r.entry.metadata["rebuilt_from_reef_report"] for r in rebuilt],
        )
    return tuple(records)


def check_committed_library(state: StateDirectory, events: EventSink) -> None:
    """Have the state directory check `committed-library.json` against the hash the last commit
    recorded (and rebuild it from the store where it is missing or differs), and say so: a log
    warning and a `committed_library_rebuilt` event. Nothing is ever silently ignored."""
    rebuilt = state.check_committed_library()
    if rebuilt is None:
        return
    log.warning("%s", rebuilt.message())
    reason = rebuilt.reason
    events.emit(
        "committed_library_rebuilt", path=str(rebuilt.path), step=rebuilt.step, reason=reason
    )
