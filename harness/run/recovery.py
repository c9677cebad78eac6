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
    store: ArchiveStore,
    archive: Archive,
    step: int,
    reef: ReportSource,
    events: EventSink,
    redo_in_flight: bool = False,
) -> tuple[JournalRecord, ...]:
    """Cross-check the journal with Reef's stored reports (`harness.run.crosscheck`; a
    disagreement raises `ReefDisagrees` naming the slot) and journal the in-flight slots whose
    line was lost but whose report Reef holds, rebuilt from that report, so they are neither
    run nor reported again (none when the in-flight step runs again: `redo_in_flight`).
    Returns their journal records."""
    superseded = store.superseded_receipts()
    rebuilt = cross_check(archive, step, reef, superseded, redo_in_flight)
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


def redo_in_flight_step(state: StateDirectory, step: int, events: EventSink) -> bool:
    """Run the in-flight `step` again from the committed archive: its journal is set aside
    (`StateDirectory.supersede_in_flight`), said out loud (a log warning and an
    `in_flight_superseded` event). The run's gate asks for it when the serving load those
    rollouts were reported under is gone (`StepGate.redoes_open_step`). Returns whether any
    journaled rollout was set aside."""
    superseded = state.supersede_in_flight()
    if not superseded:
        return False
    slots = [[record.group, record.rollout] for record in superseded]
    log.warning(
        "step %d: Reef restarted in the middle of the step; its %d journaled rollout(s) were "
        "served by the Reef that stopped and can never train, so the step runs again from the "
        "committed archive (the journal is kept in %s as superseded-*)",
        step,
        len(superseded),
        state.store.root,
    )
    events.emit("in_flight_superseded", step=step, slots=slots)
    return True


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
