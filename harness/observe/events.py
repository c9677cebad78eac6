"""Run events: one small vocabulary shared by the rollout loop, the run controller, the event
log (`events.jsonl`) and the live progress display.

Producers call `sink.emit(kind, **fields)`; fields are plain JSON values. Sinks must be
thread-safe (rollouts finish on worker threads) and must never raise into the run: an
observer failing cannot be allowed to lose a rollout.

Kinds and their fields (every event also gets `ts`, seconds since the epoch):
- `run_started`: state_dir, start_step, steps, groups, rollouts, best_raw_score (the
  archive's best when the run starts), guidance_model, executor_model, task_text
- `step_started`: step, groups, rollouts, parents (list of node ids), resumed_slots
- `rollout_stage`: step, group, rollout, stage (`guidance`, `executor`, `judge`, `reported`,
  `failed`)
- `rollout_finished`: step, group, rollout, status, reward, raw_score, guidance_ok,
  timings {guidance_s, executor_s, judge_s, total_s}, usage {prompt_tokens, completion_tokens},
  judge_cache_hit (true when the local judge answered from its verdict cache, null when the
  judge does not say)
- `step_summary`: the step summary of the run controller (docs/design.md §7) plus usage and cost,
  and judge_cache_hits (the step's candidates the judge answered from its verdict cache)
- `training_wait`: step, phase, elapsed_s, missing_slots
- `step_committed`: step, next_step
- `slots_rebuilt_from_reef`: step, slots ([group, rollout] pairs), reports (Reef record ids):
  on resume, reported slots whose journal line was lost, rebuilt from Reef's stored reports
- `in_flight_superseded`: step, slots ([group, rollout] pairs): on resume, the in-flight step's
  journaled rollouts, set aside because they were served by a Reef that stopped; the step runs
  again from the committed archive
- `committed_library_rebuilt`: path, step, reason (on resume, the file was missing or differed
  from the hash its commit recorded, and was rebuilt from the store)
- `run_finished`: next_step, best_raw_score
- `preflight_usage`: guidance, executor (usage {prompt_tokens, completion_tokens, calls}): the
  preflight's real calls before this launch, counted in the run's cost and spend
- `error`: message, where
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from harness.storage.atomic import SymlinkRefusedError, open_nofollow
from harness.storage.state_files import StateFileError, decode_object, exists, iter_lines

log = logging.getLogger(__name__)

#: No event comes near this; a longer line means the file is damaged (or not an event log).
MAX_EVENT_LINE_BYTES = 1 << 20
#: How long closing a `Fanout` waits for the events already on their way to its sinks.
CLOSE_WAIT_S = 5.0


class EventSink(Protocol):
    def emit(self, kind: str, **fields: Any) -> None: ...


class NullSink:
    """Drops every event (the default when nobody is watching)."""

    def emit(self, kind: str, **fields: Any) -> None:
        return None


class Fanout:
    """Sends each event to several sinks; a failing sink is logged and skipped.

    `close` is the first step of a run's shutdown: from then on events are dropped (a step's
    rollouts may still be finishing on worker threads when a signal stops the run), and it
    returns once the events already on their way have reached every sink, so the sinks can be
    closed after it without a late event writing to a closed file."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = sinks
        self._state = threading.Condition()
        self._in_flight = 0
        self._closed = False

    def emit(self, kind: str, **fields: Any) -> None:
        with self._state:
            if self._closed:
                return
            self._in_flight += 1
        try:
            for sink in self.sinks:
                try:
                    sink.emit(kind, **fields)
                except Exception:
                    log.exception("event sink %r failed on %s", sink, kind)
        finally:
            with self._state:
                self._in_flight -= 1
                self._state.notify_all()

    def close(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        """Stop forwarding events; wait (at most `timeout_s`) for those being forwarded."""
        with self._state:
            self._closed = True
            self._state.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)


class EventLog:
    """Appends events to `events.jsonl`, one JSON object per line, flushed per event.

    The log is for people and tools watching a run, not for recovery (the rollout journal is
    that), so lines are flushed but not fsynced. Opening refuses anything but a regular file
    (a FIFO would block) and cuts a torn last line left by a crash, so the next event never
    merges with it into a line no reader accepts.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
        try:
            fd = open_nofollow(self.path, flags)
        except SymlinkRefusedError:
            raise
        except OSError as exc:
            raise StateFileError(f"{self.path} cannot be opened for appending: {exc}") from exc
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise StateFileError(f"{self.path} is not a regular file; move it away")
        _cut_torn_tail(fd)
        self._file = os.fdopen(fd, "a", encoding="utf-8")

    def emit(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"ts": time.time(), "event": kind, **fields}, default=str)
        with self._lock:
            if self._file.closed:  # the run is shutting down: nothing more is logged
                return
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _cut_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - MAX_EVENT_LINE_BYTES - 1)
    tail = os.pread(fd, size - start, start)
    cut = tail.rfind(b"\n")
    os.ftruncate(fd, start + cut + 1 if cut >= 0 else start)


def read_events(path: Path) -> list[dict[str, Any]]:
    """All complete events of an `events.jsonl`, streamed (a torn last line is ignored; an
    absent file has none). Anything else that is not one JSON object per line — bad UTF-8, bad
    JSON, another JSON value, a line over `MAX_EVENT_LINE_BYTES`, a FIFO or directory in the
    file's place — raises `StateFileError` naming file and line."""
    path = Path(path)
    if not exists(path):
        return []
    return [
        decode_object(line, f"{path}:{number}")
        for number, line in iter_lines(path, max_line=MAX_EVENT_LINE_BYTES)
    ]
