"""Submissions and their final results, persisted under the state directory.

Layout (like the FrontierCS judge's `submissions/` tree, bucketed by hundreds):

    <state>/submissions/<bucket>/<sid>/meta.json     {"sid", "pid", "lang", "ts"}
    <state>/submissions/<bucket>/<sid>/source.code
    <state>/submissions/<bucket>/<sid>/result.json   the final record, once judged

Files are written atomically (temporary file, fsync, rename), so a crash leaves either the old
or the new content; a new submission appears complete or not at all. Results are kept as the
serialised JSON the service sends, so serving one never parses or re-encodes it. A result can be
read any number of times and survives restarts; sids keep increasing across restarts.
Submissions without a result are reported by `unfinished()` so the engine can judge them again
after a restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from judges.verdicts.nofollow import create_nofollow, refuse_links

BUCKET = 100
INCOMING = ".incoming-"  # a submission being written; renamed to its sid when complete
_INCOMING_FILES = ("source.code", "meta.json")


class SubmissionStore:
    """The on-disk record of submissions; thread-safe sid allocation."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "submissions"
        refuse_links(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._last_sid = max(self._all_sids(), default=0)
        for leftover in self.root.glob(f"*/{INCOMING}*"):  # a submission cut off by a crash
            _discard(leftover)

    def _all_sids(self) -> list[int]:
        return [
            int(sub.name)
            for bucket in self.root.iterdir()
            if bucket.is_dir() and bucket.name.isdigit()
            for sub in bucket.iterdir()
            if sub.is_dir() and sub.name.isdigit()
        ]

    def path(self, sid: int) -> Path:
        """The directory of submission `sid` (it may not exist)."""
        return self.root / str(sid // BUCKET * BUCKET) / str(sid)

    def create(self, pid: str, lang: str, code: str) -> int:
        """Persist a new submission and return its sid (1, 2, …; never reused once returned).

        All or nothing: the files are written into a hidden directory renamed into place at
        the end, so a failure (an OSError, e.g. a full disk or no descriptors left, or a
        `code` that is not encodable as UTF-8) leaves no folder and gives the sid back.
        """
        source = code.encode()
        with self._lock:
            self._last_sid += 1
            sid = self._last_sid
        directory = self.path(sid)
        incoming = directory.with_name(f"{INCOMING}{sid}")
        try:
            with self._lock:  # buckets are created and removed under the lock
                if incoming.exists():  # left by a failure whose clean-up failed too
                    _discard(incoming)
                incoming.mkdir(parents=True)
            _write_atomic(incoming / "source.code", source)
            meta = {"sid": sid, "pid": pid, "lang": lang, "ts": int(time.time() * 1000)}
            _write_atomic(incoming / "meta.json", json.dumps(meta).encode())
            os.rename(incoming, directory)
        except BaseException:
            _discard(incoming)
            with self._lock:
                with contextlib.suppress(OSError):
                    incoming.parent.rmdir()  # a bucket made for this submission only
                if self._last_sid == sid:
                    self._last_sid -= 1
            raise
        return sid

    def exists(self, sid: int) -> bool:
        """True when submission `sid` was accepted (with or without a result yet)."""
        return (self.path(sid) / "meta.json").is_file()

    def load(self, sid: int) -> tuple[dict[str, Any], str]:
        """The meta record and the source code of submission `sid`."""
        directory = self.path(sid)
        meta = json.loads((directory / "meta.json").read_text())
        return meta, (directory / "source.code").read_text()

    def save_result(self, sid: int, result: bytes) -> None:
        """Persist the final record of `sid`, already serialised as JSON (atomically)."""
        _write_atomic(self.path(sid) / "result.json", result)

    def load_result(self, sid: int) -> bytes | None:
        """The final record of `sid` as the stored JSON bytes, or None while there is none."""
        try:
            return (self.path(sid) / "result.json").read_bytes()
        except FileNotFoundError:
            return None

    def unfinished(self) -> list[int]:
        """Sids accepted but never judged (e.g. the service stopped), oldest first."""
        return sorted(
            sid
            for sid in self._all_sids()
            if self.exists(sid) and not (self.path(sid) / "result.json").exists()
        )


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    refuse_links(path)  # a link in the target's place is refused, not replaced
    with os.fdopen(create_nofollow(temporary), "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _discard(incoming: Path) -> None:
    """Remove a half-written submission directory.

    Removes the files `create` writes by name first: unlinking a path needs no descriptor, so
    this works when the failure was running out of descriptors (where `shutil.rmtree`, which
    opens the directory, cannot). Anything else is left to `shutil.rmtree`, ignoring errors.
    """
    for name in _INCOMING_FILES:
        for path in (incoming / name, incoming / f".{name}.tmp"):
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                path.unlink()
    try:
        incoming.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(incoming, ignore_errors=True)
