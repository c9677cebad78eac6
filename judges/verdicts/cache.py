"""The verdict cache: an identical submission gets the stored verdict instead of being judged again.

LLM executors often return a program identical to one already judged. A submission's key is the
sha256 (`judges.verdicts.fingerprints`) of

    the judge's code, toolchain and record-shaping settings (`context`),
    the problem package (cases, limits, answers, checker / interactor / verifier, testlib.h),
    the suite, the language, and the sha256 of the source;

a submission whose key was judged before gets that result document — the same record, with
`"verdictCache": {"hit": true, "sid": <the submission that was judged>}` added — without
compiling or running anything. Identical submissions in flight at once are judged once: the
later ones wait for the first and get its record (`"joined": true`). A judged submission's
record says `"verdictCache": {"hit": false}`.

Only verdicts are stored: `done` records and the candidate's compile errors, never a `judge`
error (the judge's own fault, which a resubmission should retry). A problem whose verdict is not
a pure function of the source (`Problem.verdict_is_pure` false: a timed benchmark, where a re-run
is the point) never consults the cache; its records say `{"hit": false, "bypassed": true}`.

Storage: one SQLite file in the state directory (`verdicts.sqlite`), so the cache survives a
restart; records are stored zlib-compressed and the file is bounded by `limit_bytes` of
compressed records, the least recently used evicted first. The cache is an optimisation: a
storage failure is logged and the submission is judged as without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import time
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from judges.problems.package import Problem
from judges.verdicts.fingerprints import digest, problem_fingerprint
from judges.verdicts.nofollow import refuse_links

log = logging.getLogger("judges.verdicts.cache")

CACHE_FILE = "verdicts.sqlite"
DEFAULT_LIMIT_MB = 1024
KEY_VERSION = "guidance-ttt verdict key v1"
_EVICT_BATCH = 64


def storable(record: dict[str, Any]) -> bool:
    """A verdict about the candidate: a `done` record or the candidate's compile error."""
    if record.get("status") == "done":
        return True
    return record.get("status") == "error" and record.get("errorKind") == "compile"


class VerdictStore:
    """Records by key in SQLite, compressed, bounded by total size, least recently used out."""

    def __init__(self, path: Path, limit_bytes: int) -> None:
        self.path = path
        self.limit_bytes = limit_bytes
        self._lock = threading.Lock()
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as error:  # a damaged file: start afresh, keep it aside
            aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
            log.warning("verdict cache %s is unreadable (%s); moved to %s", path, error, aside)
            path.replace(aside)
            for suffix in ("-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            self._db = self._open()
        row = self._db.execute(
            "SELECT COALESCE(SUM(size), 0), COALESCE(MAX(used), 0) FROM verdicts"
        )
        self._bytes, self._clock = row.fetchone()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        refuse_links(*(self.path.with_name(self.path.name + s) for s in ("", "-wal", "-shm")))
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, sid INTEGER NOT NULL,"
                " record BLOB NOT NULL, size INTEGER NOT NULL, used INTEGER NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS verdicts_used ON verdicts(used)")
            db.execute("SELECT COUNT(*) FROM verdicts").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def get(self, key: str) -> tuple[int, dict[str, Any]] | None:
        """(sid judged, record) stored under `key`, or None; marks it as recently used."""
        with self._lock:
            row = self._db.execute("SELECT sid, record FROM verdicts WHERE key = ?", (key,))
            found = row.fetchone()
            if found is None:
                return None
            self._clock += 1
            self._db.execute("UPDATE verdicts SET used = ? WHERE key = ?", (self._clock, key))
        return int(found[0]), json.loads(zlib.decompress(found[1]))

    def put(self, key: str, sid: int, record: dict[str, Any]) -> None:
        """Store `record` under `key`, then evict the least recently used beyond the limit."""
        blob = zlib.compress(json.dumps(record).encode(), 1)
        if len(blob) > self.limit_bytes:
            return
        with self._lock:
            old = self._db.execute("SELECT size FROM verdicts WHERE key = ?", (key,)).fetchone()
            self._clock += 1
            self._db.execute(
                "INSERT OR REPLACE INTO verdicts (key, sid, record, size, used) VALUES (?,?,?,?,?)",
                (key, sid, blob, len(blob), self._clock),
            )
            self._bytes += len(blob) - (old[0] if old else 0)
            while self._bytes > self.limit_bytes:
                oldest = self._db.execute(
                    "SELECT key, size FROM verdicts ORDER BY used LIMIT ?", (_EVICT_BATCH,)
                ).fetchall()
                for evicted, size in oldest:
                    if self._bytes <= self.limit_bytes:
                        break
                    self._db.execute("DELETE FROM verdicts WHERE key = ?", (evicted,))
                    self._bytes -= size

    def stats(self) -> dict[str, int]:
        """Entries and compressed bytes held, and the bound."""
        with self._lock:
            entries = self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
            return {"entries": entries, "bytes": self._bytes, "limitBytes": self.limit_bytes}

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()


class VerdictCache:
    """Answers identical submissions from stored verdicts and joins identical ones in flight.

    `context` is the digest of what every key shares (judge code, toolchain, settings);
    `prepare(problems)` fingerprints the served problems once, before the first submission.
    """

    def __init__(self, store: VerdictStore, context: str) -> None:
        self.store = store
        self.context = context
        self._problems: dict[str, str] = {}
        self._inflight: dict[str, asyncio.Future[tuple[int, dict[str, Any]] | None]] = {}
        self._counts = {"hits": 0, "joined": 0, "misses": 0, "bypassed": 0, "storeErrors": 0}

    def prepare(self, problems: dict[str, Problem]) -> None:
        """Fingerprint each problem package (blocking: reads every case file once)."""
        self._problems = {pid: problem_fingerprint(problem) for pid, problem in problems.items()}

    def key(self, problem: Problem, language: str, code: str) -> str:
        """The cache key of `code` in `language` for `problem` (see the module docstring)."""
        suite = json.dumps(problem.suite.to_json(), sort_keys=True)
        source = hashlib.sha256(code.encode()).hexdigest()
        return digest(
            KEY_VERSION, self.context, self._problems[problem.id], suite, language, source
        )

    def stats(self) -> dict[str, int]:
        """Hits, in-flight joins, misses, bypasses, store errors, entries and bytes held."""
        try:
            held = self.store.stats()
        except sqlite3.Error:
            held = {}
        return {**self._counts, **held}

    async def judged(
        self,
        sid: int,
        problem: Problem,
        language: str,
        code: str,
        judge: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """The record of submission `sid`: stored, shared with an identical one in flight, or
        `judge()`'s (then stored when it is a verdict)."""
        if not problem.verdict_is_pure:
            self._counts["bypassed"] += 1
            return {**await judge(), "verdictCache": {"hit": False, "bypassed": True}}
        key = await asyncio.to_thread(self.key, problem, language, code)
        while True:
            found = await asyncio.to_thread(self._get, key)
            if found is not None:
                self._counts["hits"] += 1
                log.info("submission %d: the verdict of submission %d (cached)", sid, found[0])
                return _marked(found)
            running = self._inflight.get(key)
            if running is None:
                break
            shared = await asyncio.shield(running)
            if shared is not None:
                self._counts["joined"] += 1
                log.info("submission %d: judged with submission %d (identical)", sid, shared[0])
                return _marked(shared, joined=True)
            # the one in flight gave no verdict (the judge failed): judge this one itself
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        outcome: tuple[int, dict[str, Any]] | None = None
        try:
            record = await judge()
            if storable(record):
                outcome = (sid, record)
                await asyncio.to_thread(self._put, key, sid, record)
        finally:
            del self._inflight[key]
            future.set_result(outcome)
        self._counts["misses"] += 1
        return {**record, "verdictCache": {"hit": False}}

    def _get(self, key: str) -> tuple[int, dict[str, Any]] | None:
        try:
            return self.store.get(key)
        except (sqlite3.Error, zlib.error, ValueError) as error:
            self._counts["storeErrors"] += 1
            log.warning("verdict cache: cannot read an entry (%s); judging instead", error)
            return None

    def _put(self, key: str, sid: int, record: dict[str, Any]) -> None:
        try:
            self.store.put(key, sid, record)
        except (sqlite3.Error, OSError) as error:
            self._counts["storeErrors"] += 1
            log.warning("verdict cache: cannot store submission %d's verdict (%s)", sid, error)


def _marked(found: tuple[int, dict[str, Any]], joined: bool = False) -> dict[str, Any]:
    sid, record = found
    mark: dict[str, Any] = {"hit": True, "sid": sid}
    if joined:
        mark["joined"] = True
    return {**record, "verdictCache": mark}


def settings_context(*parts: str) -> str:
    """The digest every key shares: give the judge's code, toolchain and record-shaping
    settings (e.g. `judges.verdicts.fingerprints.judge_code()`, `toolchain()`, a settings repr)."""
    return digest(KEY_VERSION, *parts)
