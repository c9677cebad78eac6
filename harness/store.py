"""Durable archive persistence: a per-step rollout journal plus one small commit per step.

Layout of a store directory (see docs/archive.md for the crash-safety argument):

    archive-head.json      the committed state: config, nodes, PUCT statistics, best node, and
                           the list of entry segments with their committed byte lengths
    entries-base.jsonl     entries (and groups) of the archive the run started from
    step-000000.jsonl      journal of step 0: one line per finished rollout, fsynced before
    step-000001.jsonl      the rollout is reported; at commit one line with the step's groups
    ...                    is appended and the file becomes that step's entry segment

Per rollout the store writes one journal line (O(size of the rollout)); per step it appends
one groups line and atomically replaces the head, whose size is bounded by the node count.
Entries are never rewritten. `library.json` is only produced on export.

Tamper evidence: every record (each journal and segment line, and the head) ends with its own
`"sha256"` member, the SHA-256 of the record's bytes without that member. Every load verifies
every record it reads; a record that was altered (one digit of a score, one character of a
string) or lost its checksum refuses the load with `StoreError` naming file and line. A torn
final line of the in-flight journal (a crash mid-append) is still cut off silently: it never
reached the disk whole, so it was never reported.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.atomic import (
    append_durable_line,
    atomic_write_bytes,
    remove_stale_temps,
    truncate_durable,
)
from harness.library import Archive, ArchiveError, require_same_config
from harness.library_json import from_library_dict, write_library_json
from harness.state import (
    ArchiveConfig,
    LibraryEntry,
    LibraryNode,
    RecordError,
    read_fields,
)
from harness.state_files import StateFileError, complete_lines, decode_object, read_bytes

HEAD = "archive-head.json"
BASE_SEGMENT = "entries-base.jsonl"
LOCK = ".writer.lock"
FORMAT = "guidance-ttt-archive"
FORMAT_VERSION = 2  # 2: every record carries its own sha256
CHECKSUM_KEY = "sha256"
_CHECKSUM_TAIL = re.compile(rb',"sha256":"([0-9a-f]{64})"\}\Z')


class StoreError(RuntimeError):
    """The store directory cannot be used as asked (missing, locked, corrupt, out of order)."""


def journal_name(step: int) -> str:
    """File name of the journal (and, once committed, the entry segment) of `step`."""
    return f"step-{step:06d}.jsonl"


def _encode(obj: dict[str, Any]) -> bytes:
    """A record as stored: compact JSON with its own checksum as the last member."""
    if CHECKSUM_KEY in obj:
        raise ValueError(f"a store record must not carry its own {CHECKSUM_KEY!r} key")
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    digest = hashlib.sha256(body).hexdigest()
    return body[:-1] + f',"{CHECKSUM_KEY}":"{digest}"}}'.encode()


def _verified(line: bytes, where: str) -> bytes:
    """The record's bytes without its checksum member, once the checksum matches them."""
    found = _CHECKSUM_TAIL.search(line)
    if found is None:
        raise StoreError(
            f"{where}: the record carries no checksum; the file was altered or written by "
            "another version — restore it, or use a new state directory"
        )
    body = line[: found.start()] + b"}"
    if hashlib.sha256(body).hexdigest() != found[1].decode():
        raise StoreError(
            f"{where}: the record does not match its checksum (it was altered after it was "
            "written); the run cannot trust this state — restore the file, or use a new state "
            "directory"
        )
    return body


@dataclass(frozen=True)
class JournalRecord:
    """One finished rollout as journaled: its step-grid slot and its entry."""

    step: int
    group: int
    rollout: int
    entry: LibraryEntry

    def to_line(self) -> bytes:
        """The journal line (compact JSON, no newline)."""
        return _encode(
            {
                "step": self.step,
                "group": self.group,
                "rollout": self.rollout,
                "entry": self.entry.to_dict(),
            }
        )


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


# --- reading ---------------------------------------------------------------------------------

_HEAD_SCHEMA = {
    "format": "str",
    "format_version": "int",
    "committed_step": "int",
    "config": "dict",
    "nodes": "dict",
    "best_node_id": "str?",
    "puct_n": "dict",
    "puct_m": "dict",
    "puct_T": "int",
    "segments": "dict",
}
_ROLLOUT_SCHEMA = {"step": "int", "group": "int", "rollout": "int", "entry": "dict"}


def _parse_line(line: bytes, where: str) -> dict[str, Any]:
    """A stored record: its checksum verified, then parsed as a JSON object."""
    try:
        return decode_object(_verified(line, where), where)
    except StateFileError as exc:
        raise StoreError(str(exc)) from exc


def _read_head(root: Path) -> dict[str, Any]:
    path = root / HEAD
    if not os.path.lexists(path):
        raise StoreError(f"{root} holds no archive ({HEAD} is missing); create the store first")
    try:
        data = read_bytes(path)
        head = read_fields(_parse_line(data.rstrip(b"\n"), f"{path}:1"), _HEAD_SCHEMA, str(path))
    except (StateFileError, RecordError) as exc:
        raise StoreError(str(exc)) from exc
    if head["format"] != FORMAT or head["format_version"] != FORMAT_VERSION:
        raise StoreError(
            f"{path}: format {head['format']!r} v{head['format_version']} is not "
            f"{FORMAT!r} v{FORMAT_VERSION}"
        )
    return head


def _read_committed(root: Path) -> tuple[Archive, int, dict[str, int]]:
    """The committed archive, its step and the committed segment lengths. The pieces are put
    together as a `library.json` object, so they pass the same strict validation as an import."""
    head = _read_head(root)
    entries: dict[str, Any] = {}
    groups: dict[str, Any] = {}
    segments: dict[str, int] = {}
    for name, size in head["segments"].items():
        if not isinstance(size, int) or isinstance(size, bool):
            raise StoreError(f"{root / HEAD}: segment {name} has no byte length")
        path = root / name
        if not os.path.lexists(path):
            raise StoreError(f"committed segment {path} is missing")
        try:
            lines, end = complete_lines(path, limit=size)
        except StateFileError as exc:
            raise StoreError(str(exc)) from exc
        if end != size:
            raise StoreError(f"committed segment {path} is shorter than its committed {size} bytes")
        for number, line in enumerate(lines, 1):
            obj = _parse_line(line, f"{path}:{number}")
            if "groups" in obj:  # the groups of a committed step (or of the imported archive)
                groups.update(obj["groups"])
            elif isinstance(obj.get("entry"), dict):
                entries[str(obj["entry"].get("id"))] = obj["entry"]
            else:
                raise StoreError(f"{path}:{number}: neither an entry nor a groups record")
        segments[name] = size
    library = {key: head[key] for key in ("nodes", "best_node_id", "config", "puct_n", "puct_m")}
    archive = from_library_dict(
        library | {"entries": entries, "groups": groups, "puct_T": head["puct_T"]}
    )
    return archive, head["committed_step"], segments


def _read_journal(path: Path, step: int) -> tuple[list[JournalRecord], int]:
    """The rollout records of an in-flight journal and the byte length they span. A torn final
    line and anything from an uncommitted groups line on are left out."""
    if not os.path.lexists(path):
        return [], 0
    try:
        lines, _ = complete_lines(path)
    except StateFileError as exc:
        raise StoreError(str(exc)) from exc
    records: list[JournalRecord] = []
    end = 0
    for number, line in enumerate(lines, 1):
        obj = _parse_line(line, f"{path}:{number}")
        if "groups" in obj:  # sealed, but the head was never replaced: the commit did not happen
            break
        try:
            fields = read_fields(obj, _ROLLOUT_SCHEMA, f"{path}:{number}")
            entry = LibraryEntry.from_dict(fields.pop("entry"))
        except RecordError as exc:
            raise StoreError(f"{path}:{number}: {exc}") from exc
        if fields["step"] != step:
            raise StoreError(f"{path}:{number}: record of step {fields['step']}, expected {step}")
        records.append(JournalRecord(entry=entry, **fields))
        end += len(line) + 1
    return records, end


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


def read_in_flight(root: Path, step: int) -> list[JournalRecord]:
    """Lock-free read of the rollouts journaled so far for the in-flight `step`, in journal order,
    for inspection while a run is writing (a torn last line is left out)."""
    return _read_journal(Path(root) / journal_name(step), step)[0]


def read_committed(root: Path) -> tuple[Archive, int]:
    """Lock-free read of the last committed archive and its step, for inspection and export while
    a run is writing: the head is replaced atomically and committed segments are append-only."""
    archive, step, _ = _read_committed(Path(root))
    return archive, step


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
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
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
        lines = [_encode({"entry": e.to_dict()}) for e in archive.entries.values()]
        lines.append(_encode({"groups": {u: g.to_dict() for u, g in archive.groups.items()}}))
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
                stored = ArchiveConfig.from_dict(_read_head(root)["config"])
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
        archive, step, segments = _read_committed(self.root)
        path = self.root / journal_name(step + 1)
        later = [p.name for p in self.root.glob("step-*.jsonl") if p.name > path.name]
        if later:
            raise StoreError(f"{self.root}: journals beyond the in-flight step exist: {later}")
        records, end = _read_journal(path, step + 1)
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
        """Submit a finished rollout to `archive` and journal it durably; returns the new node (or
        None). When this returns, the rollout survives a crash, so it may be reported. If the
        journal write fails the in-memory archive is ahead of the disk: stop the run."""
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
        node = archive.submit(step, group, entry)
        append_durable_line(self.root / journal_name(step), line)
        self._slots[(group, rollout)] = entry.id
        return node

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
        seal = _encode({"step": step, "groups": {u: g.to_dict() for u, g in groups.items()}})
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
        atomic_write_bytes(self.root / HEAD, _encode(head))
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
