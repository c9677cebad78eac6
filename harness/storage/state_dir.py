"""A run's state directory as one object: opening it, and the ordered commit of a step.

`StateDirectory.open` makes `guidance-run/`, removes the temporary files that an atomic write cut
short left behind, opens the archive store (or, for a new run, creates it from the seed archive
the caller builds) and replays the in-flight step's journal into the working archive.

`commit(step, resume)` is the one ordered commit of a step (docs/design.md §7): the archive store
(the step's journal sealed, the head replaced), then `committed-library.json` (the committed
archive in the Discover `library.json` layout, atomically), then `resume-state.json`, which
records the library file's SHA-256 and is written last, so the step it names as `next_step` is
the one a restarted run continues. Each part is idempotent: a commit cut short by a crash is made
again on resume, the store's part skipped when the store already holds the step. On resume,
`check_committed_library` compares the library file with the recorded hash and rebuilds it from
the store (the durable source of truth) when it is missing or differs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from harness.library import Archive
from harness.state import ArchiveConfig
from harness.storage.atomic import remove_stale_temps
from harness.storage.library_json import MAX_LIBRARY_BYTES, write_library_json
from harness.storage.resume_state import RESUME_STATE, ResumeState
from harness.storage.run_files import ARCHIVE_DIR, COMMITTED_LIBRARY, RUN_DIR
from harness.storage.state_files import StateFileError, read_bytes
from harness.storage.store import HEAD, ArchiveStore, JournalRecord, read_committed

__all__ = ["LibraryRebuilt", "StateDirectory"]


def _no_crash(point: str) -> None:
    """The default crash hook: nothing (the run passes `harness.run.crash_hook.crash_point`)."""


@dataclass(frozen=True)
class LibraryRebuilt:
    """A `committed-library.json` rebuilt from the store on resume, and why."""

    path: Path
    step: int
    reason: str
    store: Path
    matches_record: bool

    def message(self) -> str:
        text = (
            f"{self.path}: {self.reason}; rebuilt from the committed archive of step {self.step}"
            f" in {self.store}"
        )
        if not self.matches_record:
            text += " (the rebuilt file does not match the recorded hash either: the store changed)"
        return text


class StateDirectory:
    """The single writer of a run's state directory (the store's lock holds while it is open).

    Use: `is_new(root)` to know whether a seed is needed, `open(...)` once, the working
    `archive` and `store` for the steps (`store.record_rollout` per rollout), `commit` once per
    step, `close()` at the end (or `with`).
    """

    def __init__(
        self,
        root: Path,
        store: ArchiveStore,
        archive: Archive,
        committed_step: int,
        in_flight: tuple[JournalRecord, ...],
        crash: Callable[[str], None],
    ) -> None:
        self.root = root
        self.store = store
        #: The working archive: the last commit with the in-flight step's journal replayed.
        self.archive = archive
        #: The in-flight step's journaled rollouts (journal order), already in `archive`.
        self.in_flight = in_flight
        self._committed = committed_step
        self._crash = crash

    @staticmethod
    def is_new(root: Path) -> bool:
        """True when `root` holds no archive yet (a new run, which starts from its seed)."""
        return not os.path.lexists(Path(root) / ARCHIVE_DIR / HEAD)

    @classmethod
    def open(
        cls,
        root: Path,
        config: ArchiveConfig,
        new_archive: Callable[[], Archive],
        *,
        crash: Callable[[str], None] = _no_crash,
    ) -> StateDirectory:
        """Open the state directory `root` for a run with `config`: a new run's store is created
        from `new_archive()` (its seed), an existing one is opened (a different config, a broken
        head or another writer is refused by the store, never replaced) and its journal
        replayed. `crash(point)` is called before and after the store's part of each commit."""
        root = Path(root)
        (root / RUN_DIR).mkdir(parents=True, exist_ok=True)
        remove_stale_temps(root / RUN_DIR)  # a resume-state write cut short leaves its temp file
        if cls.is_new(root):
            store = ArchiveStore.create(root / ARCHIVE_DIR, new_archive())
        else:
            store = ArchiveStore.open(root / ARCHIVE_DIR, config)
        try:
            restored = store.load()
        except BaseException:
            store.close()
            raise
        return cls(
            root, store, restored.archive, restored.committed_step, restored.in_flight, crash
        )

    def supersede_in_flight(self) -> tuple[JournalRecord, ...]:
        """Set the in-flight step's journal aside (`ArchiveStore.supersede_in_flight`): `archive`
        becomes the committed archive again and `in_flight` empty. Returns the rollouts set
        aside."""
        superseded = self.in_flight
        restored = self.store.supersede_in_flight()
        self.archive, self.in_flight = restored.archive, restored.in_flight
        return superseded

    @property
    def committed_step(self) -> int | None:
        """The step the committed archive carries (None before the first commit)."""
        return self._committed if self._committed >= 0 else None

    @property
    def next_step(self) -> int:
        """The step after the archive's last commit: the in-flight one."""
        return self._committed + 1

    @property
    def resume_state_path(self) -> Path:
        return self.root / RESUME_STATE

    @property
    def library_path(self) -> Path:
        return self.root / COMMITTED_LIBRARY

    def resume_state(self) -> ResumeState | None:
        """The last commit record, validated; None when nothing was committed yet."""
        return ResumeState.load(self.resume_state_path)

    def commit(self, step: int, resume: ResumeState) -> ResumeState:
        """Commit `step`: the store (skipped when it already holds the step), then the library
        file, then `resume` with the library's SHA-256, in that order. Returns what was saved."""
        if step > self._committed:  # else committed before a crash: the commit is idempotent
            self._crash("before_archive_commit")
            self.store.commit_step(self.archive, step)
            self._committed = step
            self._crash("after_archive_commit")
        library_sha = write_library_json(self.archive, self.library_path)
        saved = replace(resume, committed_library_sha256=library_sha)
        saved.save(self.resume_state_path)
        return saved

    def check_committed_library(self) -> LibraryRebuilt | None:
        """Check `committed-library.json` against the hash the last commit recorded; when it is
        missing, differs, or no hash was recorded, rebuild it from the committed store and say
        why (the caller reports it: nothing is silently repaired). None when it is sound or
        nothing was committed yet."""
        stored = self.resume_state()
        if stored is None:
            return None  # nothing committed yet: there is no committed library to pair with
        expected = stored.committed_library_sha256
        try:
            data = read_bytes(self.library_path, max_bytes=MAX_LIBRARY_BYTES)
            actual = hashlib.sha256(data).hexdigest()
            differs = "differs from the hash the last commit recorded"
            problem = None if actual == expected else differs
        except StateFileError as exc:
            problem = str(exc)
        if expected is None:
            problem = f"{self.resume_state_path} records no hash for it"
        if problem is None:
            return None
        archive, step = read_committed(self.store.root)
        rebuilt = write_library_json(archive, self.library_path)
        return LibraryRebuilt(
            self.library_path, step, problem, self.store.root, expected in (None, rebuilt)
        )

    def close(self) -> None:
        """Release the store's writer lock."""
        self.store.close()

    def __enter__(self) -> StateDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
