"""What a resumed run repairs before its first step, so nothing is lost or done twice.

Two repairs, each said out loud (a log warning and an event), never silent: journal slots of the
in-flight step whose line was lost although Reef holds their report are rebuilt from that report
(`rebuild_lost_slots`), and a `committed-library.json` that is missing or does not match the
hash the last commit recorded is rebuilt from the committed store (`check_committed_library`).
The store is the durable source of truth; Reef's stored reports are the record of what was
already reported.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from harness.library import Archive, ArchiveError
from harness.observe.events import EventSink
from harness.run.crosscheck import ReefDisagrees, ReportSource, cross_check, describe
from harness.storage.library_json import MAX_LIBRARY_BYTES, write_library_json
from harness.storage.resume_state import RESUME_STATE, ResumeState
from harness.storage.run_files import COMMITTED_LIBRARY
from harness.storage.state_files import StateFileError, read_bytes
from harness.storage.store import ArchiveStore, JournalRecord, read_committed

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


def check_committed_library(state_dir: Path, store_root: Path, events: EventSink) -> None:
    """Check `committed-library.json` against the hash the last commit recorded; when it is
    missing, differs, or no hash was recorded, rebuild it from the committed store and say so
    (log warning and `committed_library_rebuilt` event). Nothing is ever silently ignored."""
    stored = ResumeState.load(state_dir / RESUME_STATE)
    if stored is None:
        return  # nothing committed yet: there is no committed library to pair with
    path = state_dir / COMMITTED_LIBRARY
    expected = stored.committed_library_sha256
    try:
        actual = hashlib.sha256(read_bytes(path, max_bytes=MAX_LIBRARY_BYTES)).hexdigest()
        problem = None if actual == expected else "differs from the hash the last commit recorded"
    except StateFileError as exc:
        problem = str(exc)
    if expected is None:
        problem = f"{state_dir / RESUME_STATE} records no hash for it"
    if problem is None:
        return
    archive, step = read_committed(store_root)
    rebuilt = write_library_json(archive, path)
    message = (
        f"{path}: {problem}; rebuilt from the committed archive of step {step} in {store_root}"
    )
    if expected is not None and rebuilt != expected:
        message += " (the rebuilt file does not match the recorded hash either: the store changed)"
    log.warning("%s", message)
    events.emit("committed_library_rebuilt", path=str(path), step=step, reason=problem)
