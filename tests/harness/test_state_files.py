"""The safe state-file reader and the event log's file handling, on real files and FIFOs."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from harness.observe.events import EventLog, read_events
from harness.storage import state_files
from harness.storage.state_files import StateFileError, complete_lines, iter_lines, read_json_object


def test_streamed_lines_equal_a_plain_split_across_chunk_boundaries(tmp_path: Path) -> None:
    rng = random.Random(3)
    lines = [bytes(rng.randrange(97, 123) for _ in range(rng.choice([0, 1, 7, 5000, 300_000])))]
    lines += [b"x" * n for n in (state_files.CHUNK_BYTES - 1, state_files.CHUNK_BYTES, 3)]
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines) + b"torn tail")
    assert [line for _, line in iter_lines(path)] == lines
    assert [n for n, _ in iter_lines(path)] == list(range(1, len(lines) + 1))
    got, end = complete_lines(path)
    assert got == lines and end == path.stat().st_size - len(b"torn tail")


def test_a_limit_reads_only_that_prefix(tmp_path: Path) -> None:
    path = tmp_path / "segment.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}\n{"c":3}\n')
    assert complete_lines(path, limit=16) == ([b'{"a":1}', b'{"b":2}'], 16)
    assert complete_lines(path, limit=12) == ([b'{"a":1}'], 8)


def test_a_line_over_the_cap_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"{}\n" + b"x" * 5000 + b"\n")
    with pytest.raises(StateFileError, match=rf"{path}:2: a line longer than 4096 bytes"):
        list(iter_lines(path, max_line=4096))


def test_a_fifo_is_refused_at_once_even_with_a_writer_waiting(tmp_path: Path) -> None:
    path = tmp_path / "resume-state.json"
    os.mkfifo(path)
    started = time.monotonic()
    for read in (read_json_object, state_files.read_bytes, lambda p: list(iter_lines(p))):
        with pytest.raises(StateFileError, match=r"is a FIFO \(named pipe\)"):
            read(path)
    assert time.monotonic() - started < 2


def test_directories_loops_and_missing_files_are_named(tmp_path: Path) -> None:
    directory = tmp_path / "head.json"
    directory.mkdir()
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop.name)
    with pytest.raises(StateFileError, match=rf"{directory} is a directory"):
        read_json_object(directory)
    with pytest.raises(StateFileError, match=rf"{loop} is a symlink loop"):
        read_json_object(loop)
    with pytest.raises(StateFileError, match=r"missing\.json is missing"):
        read_json_object(tmp_path / "missing.json")
    assert state_files.exists(loop) and not state_files.exists(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[1]", "a JSON list, expected a JSON object"),
        (b'"text"', "a JSON str, expected a JSON object"),
        (b'{"a": "\xff"}', "not UTF-8 (byte 7)"),
        (b"{not json", "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_a_state_file_that_is_not_one_json_object_is_named(
    tmp_path: Path, data: bytes, message: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(data)
    with pytest.raises(StateFileError) as refused:
        read_json_object(path)
    assert str(refused.value).startswith(f"{path}: ") and message in str(refused.value)


def test_a_whole_file_read_refuses_a_file_over_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "resume-state.json"
    with open(path, "wb") as handle:
        handle.truncate(1 << 20)
    with pytest.raises(StateFileError, match=r"is 1048576 bytes, more than the 1024"):
        state_files.read_bytes(path, max_bytes=1024)


def test_the_event_log_cuts_a_torn_tail_so_the_next_event_stands_alone(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"event": "run_started"}\n{"event": "rollout_fin')  # killed mid-write
    log = EventLog(path)
    log.emit("run_started", start_step=1)
    log.close()
    assert [e["event"] for e in read_events(path)] == ["run_started", "run_started"]


def test_the_event_log_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    os.mkfifo(path)
    done = threading.Event()

    def open_it() -> None:
        with pytest.raises(StateFileError, match="not a regular file"):
            EventLog(path)
        done.set()

    thread = threading.Thread(target=open_it, daemon=True)
    thread.start()
    assert done.wait(5), "opening the event log on a FIFO blocked"
