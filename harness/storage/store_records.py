"""The store's records on disk: their encoding with a per-record checksum, and the readers.

Every record of a store directory (each journal and segment line, and the head) is compact JSON
ending with its own `"sha256"` member, the SHA-256 of the record's bytes without that member.
`encode_record` writes that form; every reader here verifies it, so a record altered after it was
written (one digit of a score, one character of a string) or stripped of its checksum raises
`StoreError` naming file and line. Files are read through `harness.storage.state_files`, so a FIFO,
directory or symlink loop in a record file's place is named instead of hanging. A final line without
its newline is a torn append and is left out.

`read_committed` and `read_in_flight` take no lock: the head is replaced atomically and committed
segments are append-only, so they are safe while a run writes (harness/storage/store.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.library import Archive
from harness.state import LibraryEntry, RecordError, read_fields
from harness.storage.library_json import from_library_dict
from harness.storage.state_files import StateFileError, complete_lines, decode_object, read_bytes

HEAD = "archive-head.json"
BASE_SEGMENT = "entries-base.jsonl"
FORMAT = "guidance-ttt-archive"
FORMAT_VERSION = 2  # 2: every record carries its own sha256
CHECKSUM_KEY = "sha256"
_CHECKSUM_TAIL = re.compile(rb',"sha256":"([0-9a-f]{64})"\}\Z')


class StoreError(RuntimeError):
    """The store directory cannot be used as asked (missing, locked, corrupt, out of order)."""


def journal_name(step: int) -> str:
    """File name of the journal (and, once committed, the entry segment) of `step`."""
    return f"step-{step:06d}.jsonl"


def encode_record(obj: dict[str, Any]) -> bytes:
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
        return encode_record(
            {
                "step": self.step,
                "group": self.group,
                "rollout": self.rollout,
                "entry": self.entry.to_dict(),
            }
        )


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


def read_head(root: Path) -> dict[str, Any]:
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


def read_committed_parts(root: Path) -> tuple[Archive, int, dict[str, int]]:
    """The committed archive, its step and the committed segment lengths. The pieces are put
    together as a `library.json` object, so they pass the same strict validation as an import."""
    head = read_head(root)
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


def read_journal(path: Path, step: int) -> tuple[list[JournalRecord], int]:
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


def read_in_flight(root: Path, step: int) -> list[JournalRecord]:
    """Lock-free read of the rollouts journaled so far for the in-flight `step`, in journal order,
    for inspection while a run is writing (a torn last line is left out)."""
    return read_journal(Path(root) / journal_name(step), step)[0]


def read_committed(root: Path) -> tuple[Archive, int]:
    """Lock-free read of the last committed archive and its step, for inspection and export while
    a run is writing: the head is replaced atomically and committed segments are append-only."""
    archive, step, _ = read_committed_parts(Path(root))
    return archive, step
