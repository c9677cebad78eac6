"""Reading an offline W&B run back, with W&B's own record type.

An offline run is a directory `offline-run-<time>-<id>/` holding `run-<id>.wandb`: W&B's
transaction log, a LevelDB-style log (32 KiB blocks; each chunk a 7-byte header of checksum,
length and kind, FULL / FIRST / MIDDLE / LAST) whose records are `wandb_internal_pb2.Record`
protobufs; `wandb sync` uploads exactly these. Tables logged into it are files under
`files/media/table/`. wandb 0.31 ships no Python reader, so the framing is read here and each
record is parsed by W&B's own protobuf class.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
FILE_HEADER = 7  # b":W&B", a 2-byte magic and a version byte
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    """What one offline run directory holds: its id, its history rows and its config."""

    directory: Path
    run_id: str
    project: str = ""
    group: str = ""
    name: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    def tables(self, key: str) -> list[dict[str, Any]]:
        """The tables logged under `key`, in history order, read from the run's files."""
        out = []
        for row in self.history:
            path = row.get(f"{key}/path")
            if isinstance(path, str):
                out.append(json.loads((self.directory / "files" / path).read_text()))
        return out


def records(path: Path) -> list[Any]:
    """Every record of a `.wandb` file, parsed as W&B's `Record` protobuf."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B transaction log")
    out, pending, pos = [], b"", FILE_HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0 and length == 0:
            pos += HEADER
            continue
        pending += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def read_offline_run(directory: Path) -> OfflineRun:
    """The offline run in `directory` (an `offline-run-*` folder)."""
    directory = Path(directory)
    (log,) = directory.glob("run-*.wandb")
    run = OfflineRun(directory, log.stem.removeprefix("run-"))
    for record in records(log):
        kind = record.WhichOneof("record_type")
        run.kinds.append(kind)
        if kind == "run":
            run.project, run.group = record.run.project, record.run.run_group
            run.name = record.run.display_name
        elif kind == "history":
            run.history.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
    return run


def offline_runs(wandb_dir: Path) -> list[OfflineRun]:
    """Every offline run under a W&B directory (`<dir>/wandb/offline-run-*`), oldest first."""
    return [read_offline_run(d) for d in sorted(Path(wandb_dir).glob("wandb/offline-run-*"))]
