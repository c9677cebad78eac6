"""Durable archive persistence: a per-step rollout journal plus one small commit per step.

Layout of a store directory (see docs/archive.md for the crash-safety argument):

    archive-head.json      the committed state: config, nodes, PUCT statistics, best node, and
                           the list of entry segments with their committed byte lengths
    entries-base.jsonl     entries (and groups) of the archive the run started from
    step-000000.jsonl      journal of step 0: one line per finished rollout, fsynced before
    step-000001.jsonl      the rollout is reported; at commit one line with the step's groups
    ...                    is appended and the file becomes that step's entry segment
    superseded-step-000001-0.jsonl
                           an in-flight journal set aside by `supersede_in_flight` (its step
                           runs again from the committed archive); kept, never replayed

Per rollout the store writes one journal line (O(size of the rollout)); per step it appends
one groups line and atomically replaces the head, whose size is bounded by the node count.
Entries are never rewritten. `library.json` is only produced on export.

Tamper evidence: every record carries its own checksum, verified on every load
(harness/storage/store_records.py); a record altered after it was written refuses the load with
`StoreError` naming file and line. A torn final line of the in-flight journal (a crash
mid-append) is still cut off silently: it never reached the disk whole, so it was never
reported.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.library import Archive, ArchiveError, require_same_config
from harness.state import ArchiveConfig, LibraryEntry, LibraryNode
from harness.storage.atomic import (
    SymlinkRefusedError,
    append_durable_line,
    atomic_write_bytes,
    fsync_dir,
    open_nofollow,
    remove_stale_temps,
    truncate_durable,
)
from harness.storage.library_json import write_library_json
from harness.storage.store_records import (
    BASE_SEGMENT,
    FORMAT,
    FORMAT_VERSION,
    HEAD,
    JournalRecord,
    StoreError,
    encode_record,
    journal_name,
    read_committed,
    read_committed_parts,
    read_head,
    read_in_flight,
    read_journal,
)

__all__ = [
    "BASE_SEGMENT",
    "HEAD",
    "ArchiveStore",
    "JournalRecord",
    "Restored",
    "StoreError",
    "journal_name",
    "missing_slots",
    "read_committed",
    "read_in_flight",
]

LOCK = ".writer.lock"
#: The name prefix of an in-flight journal set aside (`ArchiveStore.supersede_in_flight`).
SUPERSEDED = "superseded-"


@dataclass(frozen=True)
class Restored:
    """What `ArchiveStore.load` returns. `archive` is the last committed state with the journaled
    rollouts of the in-flight step (`in_flight`, in journal order) already replayed into it, so
    the caller only runs `missing_slots()` of step `next_step`."""

    archive: Archive
    committed_step: int  # -1 when no step has been committed yet
    in_flight: tuple[JournalRecord, ...]

    @property
    def next_step(self) -> int:
        """The step to run (or finish) next."""
        return self.committed_step + 1

    def missing_slots(self) -> list[tuple[int, int]]:
        """`(group, rollout)` slots of `next_step` that have no journaled rollout, in order."""
        return missing_slots(self.archive.config, ((r.group, r.rollout) for r in self.in_flight))


def missing_slots(config: ArchiveConfig, done: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The `(group, rollout)` slots of a step's grid that are not in `done`, in group-major
    order."""
    filled = set(done)
    return [
        (g, r)
        for g in range(config.groups_per_batch)
        for r in range(config.rollout_n)
        if (g, r) not in filled
    ]


def _replay(archive: Archive, step: int, records: list[JournalRecord], path: Path) -> None:
    archive.select_parents(step)
    seen: set[tuple[int, int]] = set()
    for record in records:
        slot = (record.group, record.rollout)
        if slot in seen:
            raise StoreError(f"{path}: slot group={slot[0]} rollout={slot[1]} is journaled twice")
        seen.add(slot)
        try:
            archive.submit(step, record.group, record.entry)
        except ArchiveError as exc:
            raise StoreError(f"{path}: journaled rollout does not replay: {exc}") from exc


# --- the writer ------------------------------------------------------------------------------


class ArchiveStore:
    """The single writer of a store directory (an exclusive lock enforces that).

    Use: `create` (new directory) or `open` (existing, config pinned), then `load()` once, then
    `record_rollout` per finished rollout and `commit_step` once per step.
    """

    def __init__(self, root: Path, lock_fd: int) -> None:
        self.root = root
        self._lock_fd = lock_fd
        self._segments: dict[str, int] = {}
        self._committed_step = -1
        self._committed_T = 0
        self._slots: dict[tuple[int, int], str] = {}  # in-flight slot -> entry id
        self._loaded = False

    @staticmethod
    def _lock(root: Path) -> int:
        for directory in (root.parent, root):  # guidance-run/ and guidance-run/archive/
            if directory.is_symlink():
                raise SymlinkRefusedError(directory)
        root.mkdir(parents=True, exist_ok=True)
        fd = open_nofollow(root / LOCK, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise StoreError(f"{root} is in use by another writer") from exc
        return fd

    @classmethod
    def create(cls, root: Path, archive: Archive) -> ArchiveStore:
        """Start a store in a new directory from `archive` (from a seed or an imported
        `library.json`); every step it contains must be complete. Refuses an existing store."""
        root = Path(root)
        if os.path.lexists(root / HEAD):
            raise StoreError(f"{root} already holds an archive; open it, or use a new directory")
        open_groups = [uid for uid, g in archive.groups.items() if not g.finalized]
        if open_groups:
            raise StoreError(
                f"cannot start a store from an archive with unfinished groups {open_groups[:4]}: "
                "import a committed library.json"
            )
        store = cls(root, cls._lock(root))
        lines = [encode_record({"entry": e.to_dict()}) for e in archive.entries.values()]
        lines.append(encode_record({"groups": {u: g.to_dict() for u, g in archive.groups.items()}}))
        data = b"".join(line + b"\n" for line in lines)
        atomic_write_bytes(root / BASE_SEGMENT, data)
        store._write_head(archive, archive.last_step(), {BASE_SEGMENT: len(data)})
        store._committed_T = archive.puct_T
        store._loaded = True
        return store

    @classmethod
    def open(cls, root: Path, config: ArchiveConfig | None = None) -> ArchiveStore:
        """Open an existing store for writing, recovering from an interrupted run (a torn journal
        tail or an unfinished commit is cut off, stale temp files are removed). With `config`,
        refuses a store made with other settings."""
        root = Path(root)
        if not os.path.lexists(root / HEAD):
            raise StoreError(f"{root} holds no archive ({HEAD} is missing)")
        store = cls(root, cls._lock(root))
        try:
            remove_stale_temps(root)
            if config is not None:
                stored = ArchiveConfig.from_dict(read_head(root)["config"])
                require_same_config(stored, config)
        except BaseException:
            store.close()
            raise
        return store

    def load(self) -> Restored:
        """Read the committed archive and replay the in-flight step's journal into it (parents
        re-selected, journaled rollouts re-submitted in order). Selection is deterministic, so
        `select_parents(next_step)` then returns the parents the crashed process had. Also makes
        the journal ready for appending (a torn or uncommitted tail is truncated)."""
        archive, step, segments = read_committed_parts(self.root)
        path = self.root / journal_name(step + 1)
        later = [p.name for p in self.root.glob("step-*.jsonl") if p.name > path.name]
        if later:
            raise StoreError(f"{self.root}: journals beyond the in-flight step exist: {later}")
        records, end = read_journal(path, step + 1)
        if path.exists() and path.stat().st_size != end:
            truncate_durable(path, end)
        if records:
            _replay(archive, step + 1, records, path)
        self._segments, self._committed_step = segments, step
        self._committed_T = archive.puct_T - len(records)
        self._slots = {(r.group, r.rollout): r.entry.id for r in records}
        self._loaded = True
        return Restored(archive, step, tuple(records))

    def record_rollout(
        self, archive: Archive, step: int, group: int, rollout: int, entry: LibraryEntry
    ) -> LibraryNode | None:
        """Journal a finished rollout durably, then submit it to `archive`; returns the new node
        (or None). When this returns, the rollout survives a crash, so it may be reported. The
        submission is checked before anything is written, and a journal write that fails (a full
        disk: `DiskFullError`) leaves both the journal and `archive` as they were, so the other
        rollouts of the step can still be journaled and the step resumes cleanly."""
        self._require_loaded()
        if step != self._committed_step + 1:
            raise StoreError(f"step {step} is not the in-flight step {self._committed_step + 1}")
        if not 0 <= rollout < archive.config.rollout_n:
            raise StoreError(
                f"rollout index {rollout} is outside 0..{archive.config.rollout_n - 1}"
            )
        if (group, rollout) in self._slots:
            raise StoreError(f"slot group={group} rollout={rollout} of step {step} is already done")
        self._require_same_archive(archive)
        line = JournalRecord(step, group, rollout, entry).to_line()  # fails before any mutation
        archive.check_submission(step, group, entry)
        append_durable_line(self.root / journal_name(step), line)
        node = archive.submit(step, group, entry)
        self._slots[(group, rollout)] = entry.id
        return node

    def supersede_in_flight(self) -> Restored:
        """Set the in-flight step's journal aside and reload: the step starts again from the
        committed archive, none of its journaled rollouts replayed. The journal is renamed
        `superseded-step-NNNNNN-K.jsonl` (K counts earlier ones of the step), kept as the record
        of what ran, and its receipts stay known (`superseded_receipts`). Used when the serving
        load those rollouts were reported under is gone (harness.run.step_loop)."""
        self._require_loaded()
        path = self.root / journal_name(self._committed_step + 1)
        if os.path.lexists(path):
            stem = f"{SUPERSEDED}{path.stem}"
            count = len(list(self.root.glob(f"{stem}-*.jsonl")))
            os.rename(path, self.root / f"{stem}-{count}.jsonl")
            fsync_dir(self.root)
        return self.load()

    def superseded_receipts(self) -> frozenset[str]:
        """The receipts (guidance calls' `agent_record_id`) of every superseded journal."""
        receipts: set[str] = set()
        for path in sorted(self.root.glob(f"{SUPERSEDED}step-*.jsonl")):
            step = int(path.stem.removeprefix(f"{SUPERSEDED}step-").partition("-")[0])
            records, _ = read_journal(path, step)
            receipts.update(
                str(r.entry.metadata["agent_record_id"])
                for r in records
                if r.entry.metadata.get("agent_record_id")
            )
        return frozenset(receipts)

    def commit_step(self, archive: Archive, step: int) -> None:
        """Durably record the archive at the end of `step`: seal the step's journal with its groups
        and atomically replace the head. Call once per step, after the batch is complete."""
        self._require_loaded()
        if step != self._committed_step + 1:
            raise StoreError(
                f"cannot commit step {step}: the in-flight step is {self._committed_step + 1}"
            )
        if not archive.step_finalized(step):
            raise StoreError(f"cannot commit step {step}: its batch is not complete")
        self._require_same_archive(archive)
        groups = archive.step_groups(step)
        in_archive = {e for g in groups.values() for e in g.entry_ids}
        if in_archive != set(self._slots.values()):
            raise StoreError(
                f"cannot commit step {step}: {len(in_archive)} entries in the archive but "
                f"{len(self._slots)} journaled"
            )
        seal = encode_record({"step": step, "groups": {u: g.to_dict() for u, g in groups.items()}})
        size = append_durable_line(self.root / journal_name(step), seal)
        segments = {**self._segments, journal_name(step): size}
        self._write_head(archive, step, segments)
        self._committed_T = archive.puct_T
        self._slots = {}

    def export_library_json(self, path: Path) -> None:
        """Write the committed archive as a Discover-compatible `library.json` (atomically)."""
        write_library_json(read_committed(self.root)[0], path)

    def close(self) -> None:
        """Release the writer lock."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> ArchiveStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_head(self, archive: Archive, step: int, segments: dict[str, int]) -> None:
        head = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "committed_step": step,
            "config": archive.config.to_dict(),
            "nodes": {i: n.to_dict() for i, n in archive.nodes.items()},
            "best_node_id": archive.best_node_id,
            "puct_n": dict(archive.puct_n),
            "puct_m": dict(archive.puct_m),
            "puct_T": archive.puct_T,
            "segments": segments,
        }
        atomic_write_bytes(self.root / HEAD, encode_record(head))
        self._segments, self._committed_step = segments, step

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise StoreError("call load() before recording or committing")

    def _require_same_archive(self, archive: Archive) -> None:
        expected = self._committed_T + len(self._slots)
        if archive.puct_T != expected:
            raise StoreError(
                f"the archive has {archive.puct_T} submitted rollouts, the store expects "
                f"{expected}: pass the archive returned by load()"
            )
