"""The Discover-compatible `library.json` exchange format (docs/design.md §1).

This is how archives move between TTT-Discover implementations. The bytes match the reference
writer exactly: `json.dumps(obj, indent=2, sort_keys=True)` (ASCII escapes, no trailing
newline), with the config keys repeated at the top level next to `config`. Reading is strict:
unknown keys are errors that name the key, and the archive invariants are checked.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness.library import Archive
from harness.state import ArchiveConfig, ArchiveGroup, LibraryEntry, LibraryNode, RecordError
from harness.storage.atomic import atomic_write_bytes
from harness.storage.state_files import read_json_object

#: A real run's library.json reaches hundreds of MB; anything beyond this is not one.
MAX_LIBRARY_BYTES = 16 << 30

LIBRARY_KEYS = (
    "nodes",
    "entries",
    "groups",
    "best_node_id",
    "config",
    "puct_n",
    "puct_m",
    "puct_T",
)
# The reference writer repeats these config keys at the top level of library.json.
TOP_LEVEL_CONFIG_KEYS = (
    "rollout_n",
    "puct_c",
    "puct_q_mode",
    "discover_compat",
    "groups_per_batch",
    "score_direction",
)


def to_library_dict(archive: Archive) -> dict[str, Any]:
    """The archive as the `library.json` object (plain JSON values, freshly built)."""
    config = archive.config.to_dict()
    return {
        "nodes": {i: n.to_dict() for i, n in archive.nodes.items()},
        "entries": {i: e.to_dict() for i, e in archive.entries.items()},
        "groups": {uid: g.to_dict() for uid, g in archive.groups.items()},
        "best_node_id": archive.best_node_id,
        "config": config,
        "puct_n": dict(archive.puct_n),
        "puct_m": dict(archive.puct_m),
        "puct_T": archive.puct_T,
        **{key: config[key] for key in TOP_LEVEL_CONFIG_KEYS},
    }


def from_library_dict(data: Any) -> Archive:
    """Build an `Archive` from a `library.json` object. Unknown or missing keys are errors naming
    the key; top-level config copies, when present, must agree with `config`."""
    if not isinstance(data, dict):
        raise RecordError("library.json must hold a JSON object")
    for key in data:
        if key not in LIBRARY_KEYS and key not in TOP_LEVEL_CONFIG_KEYS:
            raise RecordError(f"library.json: unknown key {key!r}")
    for key in LIBRARY_KEYS:
        if key not in data:
            raise RecordError(f"library.json: missing key {key!r}")
    config = ArchiveConfig.from_dict(data["config"])
    stored = config.to_dict()
    for key in TOP_LEVEL_CONFIG_KEYS:
        if key in data and data[key] != stored[key]:
            raise RecordError(
                f"library.json: top-level {key}={data[key]!r} disagrees with "
                f"config.{key}={stored[key]!r}"
            )
    return Archive(
        config,
        nodes=_records(data["nodes"], LibraryNode.from_dict, "nodes"),
        entries=_records(data["entries"], LibraryEntry.from_dict, "entries"),
        groups={uid: ArchiveGroup.from_dict(raw, uid) for uid, raw in _object(data, "groups")},
        best_node_id=_optional_id(data["best_node_id"]),
        puct_n=_numbers(data, "puct_n", int),
        puct_m=_numbers(data, "puct_m", float),
        puct_T=_total(data["puct_T"]),
    )


def library_json_bytes(archive: Archive) -> bytes:
    """The exact bytes the reference writes for this archive."""
    return json.dumps(to_library_dict(archive), indent=2, sort_keys=True).encode("ascii")


def read_library_json(path: Path) -> Archive:
    """Load a Discover-compatible `library.json` file into a validated `Archive` (read with the
    safe state-file reader: a FIFO, directory or non-JSON file is refused naming it)."""
    return from_library_dict(read_json_object(Path(path), max_bytes=MAX_LIBRARY_BYTES))


def write_library_json(archive: Archive, path: Path) -> str:
    """Write the archive as a Discover-compatible `library.json`, atomically; returns the
    SHA-256 (hex) of the bytes written."""
    data = library_json_bytes(archive)
    atomic_write_bytes(Path(path), data)
    return hashlib.sha256(data).hexdigest()


def _object(data: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    value = data[key]
    if not isinstance(value, dict):
        raise RecordError(f"library.json: {key} must be a JSON object")
    return list(value.items())


def _records(raw: Any, build: Any, key: str) -> dict[str, Any]:
    records = {}
    for record_id, item in _object({key: raw}, key):
        record = build(item)
        if record.id != record_id:
            raise RecordError(f"library.json: {key}[{record_id!r}] holds id {record.id!r}")
        records[record_id] = record
    return records


def _numbers(data: dict[str, Any], key: str, kind: type) -> dict[str, Any]:
    """A JSON object of numbers; `int` refuses floats, `float` accepts ints (as the reference)."""
    out = {}
    for node_id, value in _object(data, key):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or (kind is int and not isinstance(value, int)):
            raise RecordError(f"library.json: {key}[{node_id!r}] must be {kind.__name__}")
        out[node_id] = kind(value)
    return out


def _total(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordError(f"library.json: puct_T must be an integer, got {value!r}")
    return value


def _optional_id(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise RecordError(f"library.json: best_node_id must be a string or null, got {value!r}")
    return value
