"""What a resumed run repairs before its first step, so nothing is lost or done twice.

Each repair is said out loud (a log warning and an event), never silent: journal slots of the
in-flight step whose line was lost although Reef holds their report are rebuilt from that report
(`rebuild_lost_slots`); an in-flight step whose rollouts were served by a load Reef no longer
serves (a restarted Reef: `serving_load_changed`) runs again from the committed archive
(`redo_in_flight_step`); and a `committed-library.json` that is missing or does not match the
hash the last commit recorded is rebuilt from the committed store (`check_committed_library`).
The store is the durable source of truth; Reef's stored reports are the record of what was
already reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from harness.library import Archive, ArchiveError
from harness.observe.events import EventSink
from harness.run.crosscheck import ReefDisagrees, ReportSource, cross_check, describe
from harness.storage.run_files import read_serving_load
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


def serving_load_changed(
    state: StateDirectory, step: int, serving: Callable[[], str | None]
) -> tuple[str, str] | None:
    """The load the in-flight `step`'s guidance calls were served under and the one Reef serves
    now (`serving()`, its `/reef/status`), when the two differ: Reef restarted since the step
    began and serves under a new load, and tttd trains a step only from reports of one load
    (`tttd/grouping.py`), so the step's reports so far can never train. None when they agree,
    when no load was noted for this step (`write_serving_load`) or when Reef names none."""
    noted = read_serving_load(state.root)
    if noted is None or noted[0] != step:
        return None
    current = serving()
    if current is None or current == noted[1]:
        return None
    return noted[1], current


def redo_in_flight_step(
    state: StateDirectory, step: int, events: EventSink, loads: tuple[str, str]
) -> bool:
    """Run the in-flight `step` again from the committed archive, because the serving load its
    rollouts were reported under is gone (`loads`: that load and the one Reef serves now,
    `serving_load_changed`): its journal is set aside (`StateDirectory.supersede_in_flight`),
    said out loud (a log warning and an `in_flight_superseded` event). Returns whether any
    journaled rollout was set aside."""
    superseded = state.supersede_in_flight()
    if not superseded:
        return False
    slots = [[record.group, record.rollout] for record in superseded]
    log.warning(
        "step %d: Reef restarted in the middle of the step (serving load %s, now %s); its %d "
        "journaled rollout(s) were served by the Reef that stopped and can never train, so the "
        "step runs again from the committed archive (the journal is kept in %s as superseded-*)",
        step,
        loads[0],
        loads[1],
        len(superseded),
        state.store.root,
    )
    events.emit(
        "in_flight_superseded", step=step, slots=slots, served_under=loads[0], now_serving=loads[1]
    )
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
