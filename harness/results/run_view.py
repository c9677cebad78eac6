"""Reading a run's state directory without taking any lock.

`load_run(state_dir)` reads what a running or finished run has made durable: the committed
archive (from the archive store, or `guidance-run/committed-library.json` for an archive made
elsewhere), `resume-state.json`, the journaled rollouts of the in-flight step, and
`events.jsonl`. It returns a `RunView`, a frozen snapshot that everything else in
`harness.results` computes from; it never writes and never waits on the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.library import Archive
from harness.observe.events import read_events
from harness.state import LibraryEntry
from harness.storage.library_json import read_library_json
from harness.storage.resume_state import RESUME_STATE, ResumeState
from harness.storage.run_files import ARCHIVE_DIR, COMMITTED_LIBRARY, EVENTS_FILE, RUN_DIR
from harness.storage.state_files import exists
from harness.storage.store import HEAD, missing_slots, read_committed, read_in_flight

#: Where the run keeps its archive store, relative to the state directory.
STORE_CANDIDATES = (ARCHIVE_DIR,)


class RunNotFound(FileNotFoundError):
    """The directory holds no run this tool can read."""


@dataclass(frozen=True)
class RunView:
    """A read-only snapshot of one run's state directory."""

    state_dir: Path
    archive: Archive  # the committed archive
    committed_step: int  # -1 before the first commit
    resume: ResumeState | None
    in_flight: tuple[tuple[int, int, LibraryEntry], ...]  # (group, rollout, entry) of next step
    events: tuple[dict[str, Any], ...]
    archive_source: Path  # the store directory or the library.json read

    @property
    def next_step(self) -> int:
        """The step the run is at (running, or next to run)."""
        return self.committed_step + 1

    @property
    def direction(self) -> str:
        """`max` or `min`: which way scores improve."""
        return self.archive.config.score_direction

    def missing_slots(self) -> list[tuple[int, int]]:
        """The `(group, rollout)` slots of the in-flight step with no journaled rollout."""
        return missing_slots(self.archive.config, ((g, r) for g, r, _ in self.in_flight))

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        """The logged events of one kind, oldest first."""
        return [e for e in self.events if e.get("event") == kind]


def find_store(state_dir: Path) -> Path | None:
    """The archive store directory under `state_dir` (the one holding `archive-head.json`)."""
    for candidate in (Path(state_dir) / c for c in STORE_CANDIDATES):
        if exists(candidate / HEAD):  # whatever is there; reading it names what is wrong
            return candidate
    return None


def load_run(state_dir: Path) -> RunView:
    """Read a run's state directory: the archive store (or, for an archive made elsewhere,
    `guidance-run/committed-library.json`), the resume state and the event log. Raises
    `RunNotFound` naming what was looked for when there is no archive."""
    state_dir = Path(state_dir)
    store = find_store(state_dir)
    resume = ResumeState.load(state_dir / RESUME_STATE)
    in_flight: list[tuple[int, int, LibraryEntry]] = []
    if store is not None:
        archive, committed = read_committed(store)
        in_flight = [(r.group, r.rollout, r.entry) for r in read_in_flight(store, committed + 1)]
        source = store
    elif exists(state_dir / COMMITTED_LIBRARY):
        source = state_dir / COMMITTED_LIBRARY
        archive = read_library_json(source)
        committed = archive.last_step()
    else:
        looked = ", ".join(str(state_dir / c / HEAD) for c in STORE_CANDIDATES)
        raise RunNotFound(
            f"{state_dir} holds no run: none of {looked} or {state_dir / COMMITTED_LIBRARY} "
            "exists; pass the state directory of a run (e.g. work/<task>)"
        )
    events = read_events(_events_path(state_dir))
    return RunView(state_dir, archive, committed, resume, tuple(in_flight), tuple(events), source)


def _events_path(state_dir: Path) -> Path:
    for candidate in (state_dir / RUN_DIR / EVENTS_FILE, state_dir / EVENTS_FILE):
        if exists(candidate):
            return candidate
    return state_dir / RUN_DIR / EVENTS_FILE
