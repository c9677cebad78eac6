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

Nothing here is opened through a symbolic link, and only regular files are read
(`judges.verdicts.nofollow`): a judge started on a state directory with a linked bucket or
submission folder stops at start in one line; one linked later is not used (its submission is
unknown, its result is not written); a `result.json` that is a link, FIFO or device is served
as a `judge` error saying so; a leftover `.incoming-N` that is a link is removed as a link.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judges.verdicts.nofollow import (
    SymlinkRefused,
    UnsafePath,
    create_nofollow,
    is_regular,
    read_regular,
    refuse_links,
    refuse_links_below,
)

log = logging.getLogger("judges.verdicts.store")

BUCKET = 100
INCOMING = ".incoming-"  # a submission being written; renamed to its sid when complete
_INCOMING_FILES = ("source.code", "meta.json")


class SubmissionStore:
    """The on-disk record of submissions; thread-safe sid allocation."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "submissions"
        refuse_links(state_dir, self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        for entry in self._entries():  # a linked bucket or submission: one line at start
            if entry.is_symlink() and entry.name.isdigit():
                raise SymlinkRefused(Path(entry.path))
        self._last_sid = max(self._all_sids(), default=0)
        for entry in self._entries():  # a submission cut off by a crash
            if entry.name.startswith(INCOMING) and Path(entry.path).parent != self.root:
                _discard(Path(entry.path))

    def _entries(self) -> Iterator[os.DirEntry[str]]:
        """The buckets and, in each real bucket folder, its entries (links are not entered)."""
        with os.scandir(self.root) as buckets:
            for bucket in list(buckets):
                yield bucket
                if bucket.name.isdigit() and bucket.is_dir(follow_symlinks=False):
                    with os.scandir(bucket.path) as entries:
                        yield from list(entries)

    def _all_sids(self) -> list[int]:
        return [
            int(entry.name)
            for entry in self._entries()
            if Path(entry.path).parent != self.root
            and entry.name.isdigit()
            and entry.is_dir(follow_symlinks=False)
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
                refuse_links_below(self.root, incoming)
                if os.path.lexists(incoming):  # left by a failure whose clean-up failed too
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
        """True when submission `sid` was accepted (with or without a result yet); False when
        its folder, or a folder above it, is a link."""
        meta = self.path(sid) / "meta.json"
        try:
            refuse_links_below(self.root, meta.parent)
        except SymlinkRefused:
            return False
        return is_regular(meta)

    def load(self, sid: int) -> tuple[dict[str, Any], str]:
        """The meta record and the source code of submission `sid` (regular files reached
        through no link, else `UnsafePath`)."""
        directory = self.path(sid)
        meta = json.loads(read_regular(directory / "meta.json", self.root))
        return meta, read_regular(directory / "source.code", self.root).decode()

    def save_result(self, sid: int, result: bytes) -> None:
        """Persist the final record of `sid`, already serialised as JSON (atomically)."""
        refuse_links_below(self.root, self.path(sid))
        _write_atomic(self.path(sid) / "result.json", result)

    def load_result(self, sid: int) -> bytes | None:
        """The final record of `sid` as the stored JSON bytes, or None while there is none. A
        `result.json` that is a link or not a regular file (a FIFO, a device) is never read:
        the answer is a `judge` error saying so."""
        try:
            return read_regular(self.path(sid) / "result.json", self.root)
        except FileNotFoundError:
            return None
        except UnsafePath as refused:
            log.warning("submission %d: %s", sid, refused)
            error = f"Error: judge failure: the stored result is unusable: {refused}"
            return json.dumps({"status": "error", "error": error, "errorKind": "judge"}).encode()

    def unfinished(self) -> list[int]:
        """Sids accepted but never judged (e.g. the service stopped), oldest first."""
        return sorted(
            sid
            for sid in self._all_sids()
            if self.exists(sid) and not os.path.lexists(self.path(sid) / "result.json")
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
    A link in its place is removed as a link: nothing it names is touched.
    """
    if incoming.is_symlink():
        incoming.unlink()
        return
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
