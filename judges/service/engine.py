"""The judge engine: a bounded submission queue, dispatchers, and cases judged in parallel.

A submission is persisted (source and meta) before its sid is returned, then waits in a FIFO
queue of at most `max_queue` submissions; a full queue refuses new ones (the service answers 503
with Retry-After). Two dispatchers take submissions in order, so one compiles while the other
runs cases. Every sandboxed program — a compile or a case — holds one of `workers` slots, and
an interactive case two (its candidate and its interactor run at once; `judges.service.slots`), so
no more than `workers` programs run at once and a case's CPU time is not stretched by
oversubscription; the cases of one submission run in parallel within that bound.

The final record (see `judges.verdicts.judging`) is serialised once, in a worker thread, persisted
before it becomes visible, and read back from disk as bytes (off the event loop) on every request:
results can be read any number of times and survive restarts, and serving a large one never
holds up the event loop (health answers stay quick while hostile candidates are judged).
Submissions that were accepted but not finished when the service stopped are queued again when
it starts.

With a verdict cache (`judges.verdicts.cache`), an identical submission gets the stored verdict
and identical ones in flight are judged once. With a `remote` judge (`judges.cluster`: Ray
workers), compile and cases run there instead of in the local sandbox; everything else —
queue, store, records — is the same.

When the judge itself runs out of descriptors, memory or disk while judging (an OSError that
`is_resource_exhaustion` names; a compile that failed because the judge's disk is full is one,
`judges.verdicts.judging.raise_if_disk_full`), host load keeps a run from its CPU until its
real-time backstop (`HostOverloaded`), the kernel kills a compile or a run below its memory bound
because the judge's cgroup or the host is out of memory (`JudgeOutOfMemory`: a compiler killed
so is not a compile bomb, which reaches its own bound) or the sandbox itself fails
(`SandboxFailed`), the
submission is not failed: it stays queued and is judged
again after RESOURCE_RETRY_S, doubling, up to RESOURCE_RETRIES times (about two minutes in all);
only then is it recorded as a `judge` error naming the cause (an infrastructure fault for the
harness, never a score). A final record the disk refuses
is served from memory and written again after every later result, so it is not lost once the
disk has room.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import shutil
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judges.problems.package import Problem
from judges.sandbox.outcome import is_resource_exhaustion
from judges.sandbox.runner import Sandbox
from judges.sandbox.session import SessionPool
from judges.service.clients import share
from judges.service.slots import WorkerSlots
from judges.verdicts.cases import judge_case
from judges.verdicts.judging import (
    OUTPUT_FIELD_CAP,
    CompileLimits,
    HostOverloaded,
    JudgeFailure,
    JudgeOutOfMemory,
    PassingFailure,
    aggregate,
    error_record,
    prepare_candidate,
)
from judges.verdicts.nofollow import UnsafePath
from judges.verdicts.programs import ProgramCache
from judges.verdicts.store import SubmissionStore

if TYPE_CHECKING:
    from judges.verdicts.cache import VerdictCache

log = logging.getLogger("judges.service.engine")

DISPATCHERS = 2
QUEUED = b'{"status": "queued"}'
CPP_LANGS = frozenset({"cpp", "c++", "cxx", "cpp17", "gnu++17", "g++"})
PYTHON_LANGS = frozenset({"python", "py", "python3"})
RESOURCE_RETRIES = 6
RESOURCE_RETRY_S = 2.0
ECHO_CHARS = 64  # of an unknown pid or lang, quoted back in a 400


class SubmissionRefused(Exception):
    """A submission cannot be accepted; `status` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class EngineSettings:
    """Engine knobs: sandbox slots, queue bound, compiler limits, stored output prefix."""

    workers: int
    max_queue: int
    compile_limits: CompileLimits
    output_field_bytes: int = OUTPUT_FIELD_CAP  # stdout bytes kept in a case's `output`
    dispatchers: int = DISPATCHERS  # submissions judged at once (more for a Ray cluster)
    sandbox_sessions: bool = False  # kept sandboxes (sandbox.session): tests only, not clean


class JudgeEngine:
    """Accepts submissions, judges them in the sandbox and keeps their results on disk.

    `remote` (optional) judges a problem elsewhere: `await remote.judge(problem, code,
    language)` gives the record; `sandbox` may then be None and `scratch` names the folder
    for work directories. `verdicts` (optional) is the verdict cache.
    """

    def __init__(
        self,
        problems: dict[str, Problem],
        store: SubmissionStore,
        sandbox: Sandbox | None,
        settings: EngineSettings,
        *,
        remote: Any = None,
        verdicts: VerdictCache | None = None,
        scratch: Path | None = None,
    ) -> None:
        self.problems = problems
        self.store = store
        self.sandbox = sandbox
        self.settings = settings
        self.remote = remote
        self.verdicts = verdicts
        self.scratch = sandbox.scratch if sandbox is not None else scratch
        programs = store.root.parent / "programs"
        self.programs = (
            ProgramCache(sandbox, programs, settings.compile_limits) if sandbox else None
        )
        self.case_runs = 0  # cases judged (not answered from the verdict cache)
        self._queue: deque[int] = deque()
        self._pending: set[int] = set()  # queued or being judged
        self._clients: dict[int, str] = {}  # who sent each pending submission, where known
        self._unsaved: dict[int, bytes] = {}  # final records the disk refused
        self._attempts: dict[int, int] = {}  # resource-exhaustion retries so far, by sid
        self._ready = asyncio.Event()
        self._slots = WorkerSlots(settings.workers)
        self._threads = ThreadPoolExecutor(settings.workers + 1, thread_name_prefix="sandbox")
        self._tasks: list[asyncio.Task[None]] = []
        self.gpu_judge: Any = None  # judges.gpu.judge.GpuJudge, set by the service when needed

    async def start(self) -> None:
        """Queue submissions left unfinished by an earlier run, then start the dispatchers."""
        for sid in self.store.unfinished():
            self._enqueue(sid)
            log.info("submission %d was not finished before the last stop; judging it again", sid)
        count = self.settings.dispatchers
        if self.gpu_judge is not None:  # one more per GPU, so that every GPU can be judging
            count += len(self.gpu_judge.gpus)
        self._tasks = [asyncio.create_task(self._dispatch()) for _ in range(count)]

    async def stop(self) -> None:
        """Stop dispatching and kill running sandboxes; unfinished work is redone at next start."""
        if self.sandbox is not None:
            self.sandbox.close()
        if self.gpu_judge is not None:
            self.gpu_judge.close()
        if self.remote is not None:
            self.remote.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._threads.shutdown(wait=True, cancel_futures=True)

    def healthy(self) -> bool:
        """True while every dispatcher is running (they only end when the engine stops)."""
        return bool(self._tasks) and not any(task.done() for task in self._tasks)

    def counters(self) -> dict[str, Any]:
        """What `/health` reports besides `ok`: cases judged, the verdict cache's counts and the
        remote workers (blocking: reads the cache's size)."""
        found: dict[str, Any] = {"caseRuns": self.case_runs}
        if self.verdicts is not None:
            found["verdictCache"] = self.verdicts.stats()
        if self.remote is not None:
            found["ray"] = self.remote.describe()
        if self.gpu_judge is not None:
            found["gpu"] = self.gpu_judge.describe()
        return found

    async def submit(self, pid: str, lang: str, code: str, client: str = "") -> int:
        """Validate, persist (in a worker thread) and queue a submission; return its sid.

        Raises SubmissionRefused(400) for an unknown problem or language and
        SubmissionRefused(503) when the queue is full, or when `client` (`judges.service.clients`)
        already holds its share of it; nothing is persisted then.
        """
        if pid not in self.problems:
            known = ", ".join(sorted(self.problems)) or "none"
            raise SubmissionRefused(
                400, f"unknown problem id {_prefix(pid)}; this judge serves: {known}"
            )
        language = "cpp" if lang.lower() in CPP_LANGS else None
        language = "python" if lang.lower() in PYTHON_LANGS else language
        if language != self.problems[pid].language:
            accepted = CPP_LANGS if self.problems[pid].language == "cpp" else PYTHON_LANGS
            raise SubmissionRefused(
                400,
                f"unsupported lang {_prefix(lang)} for problem {pid}: it takes "
                f"{self.problems[pid].language} (lang one of {', '.join(sorted(accepted))})",
            )
        if len(self._queue) >= self.settings.max_queue:
            raise SubmissionRefused(
                503,
                f"queue full: {len(self._queue)} submissions are waiting "
                f"(limit {self.settings.max_queue}); retry later",
            )
        held = sum(1 for sid in self._queue if client and self._clients.get(sid) == client)
        if client and held >= share(self.settings.max_queue):
            raise SubmissionRefused(
                503,
                f"{client} has {held} submissions waiting, its share of the queue's "
                f"{self.settings.max_queue} places (the rest is kept for other clients); "
                "retry later",
            )
        sid = await asyncio.to_thread(self.store.create, pid, language, code)
        if client:
            self._clients[sid] = client
        self._enqueue(sid)
        log.info("submission %d queued for problem %s (%d waiting)", sid, pid, len(self._queue))
        return sid

    async def result(self, sid: int) -> bytes | None:
        """The final record of `sid` as JSON bytes, `{"status": "queued"}` before it, None for
        unknown sids. Read from disk in a worker thread, never parsed: the event loop only
        copies bytes, however large the record."""
        if sid in self._pending:
            return QUEUED
        if sid in self._unsaved:
            return self._unsaved[sid]
        final = await asyncio.to_thread(self.store.load_result, sid)
        if final is not None:
            return final
        return QUEUED if await asyncio.to_thread(self.store.exists, sid) else None

    def _enqueue(self, sid: int) -> None:
        self._queue.append(sid)
        self._pending.add(sid)
        self._ready.set()

    async def _dispatch(self) -> None:
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            sid = self._queue.popleft()
            try:
                record = await self._judge(sid)
            except (OSError, PassingFailure) as error:  # passing faults only (see `_judge`)
                record = self._retry_later(sid, error)
                if record is None:
                    continue  # still pending: queued again after a delay
            try:
                self._attempts.pop(sid, None)
                await self._persist(sid, await asyncio.to_thread(_encode, record))
            finally:
                self._pending.discard(sid)
                self._clients.pop(sid, None)

    def _retry_later(self, sid: int, error: Exception) -> dict[str, Any] | None:
        """Queue `sid` again after a delay (None), or its final error record once the retries
        are used up."""
        attempt = self._attempts.get(sid, 0) + 1
        if isinstance(error, HostOverloaded):
            cause, now = "the host was too loaded to judge it", "the host is too loaded to judge it"
        elif isinstance(error, JudgeOutOfMemory):
            cause, now = "the judge ran out of memory", "the judge is out of memory"
        elif isinstance(error, PassingFailure):
            cause, now = "the sandbox failed", "the sandbox failed"
        else:
            cause, now = "out of resources", "the judge ran out of resources"
        if attempt > RESOURCE_RETRIES:
            log.error("submission %d: %s, still: %s", sid, cause, error)
            return error_record(f"judge failure: {cause} in {attempt} attempts: {error}", "judge")
        self._attempts[sid] = attempt
        delay = RESOURCE_RETRY_S * 2 ** (attempt - 1)
        cause = now
        log.warning(
            "submission %d: %s (%s); judging it again in %g s (retry %d of %d)",
            sid,
            cause,
            error,
            delay,
            attempt,
            RESOURCE_RETRIES,
        )
        asyncio.get_running_loop().call_later(delay, self._requeue, sid)
        return None

    def _requeue(self, sid: int) -> None:
        self._queue.append(sid)  # still in _pending, so its result reads "queued"
        self._ready.set()

    async def _persist(self, sid: int, encoded: bytes) -> None:
        """Write `sid`'s final record; if the disk refuses, serve it from memory, and write the
        records kept that way again after every record that is written."""
        try:
            await asyncio.to_thread(self.store.save_result, sid, encoded)
        except OSError as error:
            log.error(
                "submission %d: cannot persist the result (%s); serving it from memory", sid, error
            )
            self._unsaved[sid] = encoded
            return
        for waiting, record in list(self._unsaved.items()):
            try:
                await asyncio.to_thread(self.store.save_result, waiting, record)
            except OSError:
                return
            del self._unsaved[waiting]
            log.info("submission %d: its result, kept in memory, is now written", waiting)

    async def _judge(self, sid: int) -> dict[str, Any]:
        """Judge one submission; any failure of the judge itself becomes a `judge` error record,
        except running out of descriptors, memory or disk, whose OSError is raised (passing)."""
        started = time.monotonic()
        assert self.scratch is not None
        workdir = self.scratch / f"submission-{sid}"
        if workdir.exists():  # left by an attempt that ran out of descriptors
            shutil.rmtree(workdir, ignore_errors=True)
        try:
            meta, code = self.store.load(sid)
            problem = self.problems.get(meta["pid"])
            if problem is None:
                record = error_record(f"problem {meta['pid']!r} is no longer served", "judge")
            else:
                language = meta.get("lang", "cpp")
                judge = functools.partial(self._judge_problem, problem, code, language, workdir)
                if self.verdicts is not None:
                    record = await self.verdicts.judged(sid, problem, language, code, judge)
                else:
                    record = await judge()
        except PassingFailure:
            raise  # passing: `_dispatch` judges it again later
        except (JudgeFailure, UnsafePath) as failure:  # UnsafePath: a link in the state dir
            log.error("submission %d: judge failure: %s", sid, failure)
            record = error_record(f"judge failure: {failure}", "judge")
        except Exception as failure:  # the dispatcher must survive anything the judge does wrong
            if is_resource_exhaustion(failure):
                raise  # passing: `_dispatch` judges it again later
            log.exception("submission %d: unexpected judge failure", sid)
            record = error_record(f"judge failure: {type(failure).__name__}: {failure}", "judge")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        summary = f"score {record['score']:.4f}" if record["status"] == "done" else record["error"]
        log.info("submission %d: %s (%.1f s)", sid, summary[:300], time.monotonic() - started)
        return record

    async def _judge_problem(
        self, problem: Problem, code: str, language: str, workdir: Path
    ) -> dict[str, Any]:
        if problem.kind == "gpu" and self.gpu_judge is None and self.remote is not None:
            return await self.remote.judge(problem, code, language)  # on a Ray GPU node
        if problem.kind == "gpu":  # its own GPU slots and processes (judges.gpu.judge)
            if self.gpu_judge is None:
                return error_record("judge failure: no GPU judge was started", "judge")
            return await self.gpu_judge.judge(problem, code, workdir)
        if self.remote is not None:
            record = await self.remote.judge(problem, code, language)
            self.case_runs += len(record.get("cases", ()))
            return record
        assert self.sandbox is not None and self.programs is not None
        started = time.monotonic()
        compiled = await self._in_slot(
            prepare_candidate, self.sandbox, code, language, workdir, self.settings.compile_limits
        )
        if compiled.binary is None:
            return error_record(compiled.error, "compile")
        prepared = time.monotonic()
        checker, origin = await self._in_slot(self.programs.program, problem)
        checked = time.monotonic()
        keep = self.settings.output_field_bytes
        slots = 2 if problem.kind == "interactive" else 1  # the candidate and its interactor
        sessions = None  # an interactive case's two runs each get a sandbox of their own
        if problem.kind != "interactive" and self.settings.sandbox_sessions:
            binds = [("ro", compiled.binary, f"/box/{compiled.mount}")]
            sessions = SessionPool(self.sandbox, binds)
        runs = [
            self._in_slot(
                judge_case,
                self.sandbox,
                compiled,
                case,
                problem,
                workdir,
                checker,
                keep,
                sessions,
                slots=slots,
            )
            for case in problem.cases
        ]
        # Every case finishes before the work directory is removed, even when one failed.
        try:
            outcomes = await asyncio.gather(*runs, return_exceptions=True)
        finally:
            if sessions is not None:
                await asyncio.get_running_loop().run_in_executor(self._threads, sessions.close)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        self.case_runs += len(outcomes)
        record = aggregate(list(outcomes), problem.suite.to_json())
        record["timing"] = {
            "compileSeconds": round(prepared - started, 3),
            "checkerSeconds": round(checked - prepared, 3),
            "checkerCache": origin,
            "casesSeconds": round(time.monotonic() - checked, 3),
            "keptSandboxes": sessions.started if sessions is not None else 0,
        }
        return record

    async def _in_slot(self, function: Any, *args: Any, slots: int = 1) -> Any:
        async with self._slots.hold(slots):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads, function, *args)


def _prefix(value: str, keep: int = ECHO_CHARS) -> str:
    """A client's value as a refusal echoes it: quoted, at most `keep` characters of it."""
    if len(value) <= keep:
        return repr(value)
    return f"{value[:keep]!r}… ({len(value)} characters)"


def _encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()
