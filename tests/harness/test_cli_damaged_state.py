"""The real `guidance-ttt` CLI, as a subprocess, on a state directory damaged in each way a
disk, a crash or a careless hand can damage it.

The state directory is made by the real store, resume state and event log
(tests/state_fixture.py), copied per case, then damaged: an event line that is JSON but not an
object, a FIFO in place of `resume-state.json`, `events.jsonl` or a journal file, a non-UTF-8
event, a head that is a directory or a symlink loop, a 1 GiB sparse events file. Every read-only
command (`status`, `inspect`, `export`) must end within seconds, in bounded memory, with exit
status 2 and one line on stderr naming the file (and the line, where there is one), and must
change nothing in the state directory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reef_fixtures import free_port
from tests.state_fixture import FixtureRun, build_state_dir

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = Path("guidance-run")
STORE = RUN_DIR / "archive"
EVENTS = RUN_DIR / "events.jsonl"
SECONDS = 20.0  # generous for a loaded 2-core machine; a hang would hit the subprocess timeout
MAX_RSS_MB = 400  # the interpreter with the CLI's imports is ~100 MB; 1 GiB read whole is not


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> FixtureRun:
    return build_state_dir(tmp_path_factory.mktemp("damaged") / "state")


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def append(path: Path, data: bytes) -> int:
    """Append `data` (one or more complete lines) and return the line number of its first line."""
    before = path.read_bytes()
    path.write_bytes(before + data)
    return before.count(b"\n") + 1


def head_directory(state: Path) -> str:
    head = state / STORE / "archive-head.json"
    head.unlink()
    head.mkdir()
    (head / "x").write_text("a directory where the head should be")
    return f"{head} is a directory"


def head_symlink_loop(state: Path) -> str:
    head = state / STORE / "archive-head.json"
    head.unlink()
    head.symlink_to(head.name)
    return f"{head} is a symlink loop"


def sparse_events(state: Path) -> str:
    path = state / EVENTS
    with open(path, "wb") as handle:
        handle.truncate(1 << 30)  # 1 GiB of zeros, no newline, almost no disk
    return f"{path}:1: a line longer than"


def event_not_an_object(state: Path) -> str:
    line = append(state / EVENTS, b"[1, 2, 3]\n")
    return f"{state / EVENTS}:{line}: a JSON list, expected a JSON object"


def event_not_utf8(state: Path) -> str:
    line = append(state / EVENTS, b'{"event": "step_summary", "note": "\xff\xfe"}\n')
    return f"{state / EVENTS}:{line}: not UTF-8"


def fifo_at(relative: Path) -> Callable[[Path], str]:
    def damage(state: Path) -> str:
        fifo(state / relative)
        return f"{state / relative} is a FIFO"

    return damage


DAMAGE: dict[str, Callable[[Path], str]] = {
    "event_not_an_object": event_not_an_object,
    "event_not_utf8": event_not_utf8,
    "events_fifo": fifo_at(EVENTS),
    "resume_state_fifo": fifo_at(RUN_DIR / "resume-state.json"),
    "in_flight_journal_fifo": fifo_at(STORE / "step-000003.jsonl"),
    "committed_segment_fifo": fifo_at(STORE / "step-000000.jsonl"),
    "head_directory": head_directory,
    "head_symlink_loop": head_symlink_loop,
    "sparse_1gib_events": sparse_events,
}


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under `root` (symlinks not followed): its kind, size, mtime and, for small
    regular files, a hash of its bytes."""
    seen: dict[str, tuple] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            info = path.lstat()
            digest = None
            if path.is_file() and not path.is_symlink() and info.st_size < 1 << 24:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            key = str(path.relative_to(root))
            seen[key] = (info.st_mode, info.st_size, info.st_mtime_ns, digest)
    return seen


#: Runs the command given as its arguments and prints the command's own peak RSS (KiB). The CLI is
#: forked from this small interpreter, not from pytest: Linux keeps a process's peak RSS across
#: `execve`, so a child forked straight from a large pytest process reports pytest's size.
MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_cli(args: list[str], scratch: Path) -> tuple[int, str, float, float]:
    """Run `python -m harness.cli ARGS`; returns exit status, stderr, seconds and the CLI
    process's own peak RSS in MB (measured by `MEASURE`, so no other process is counted)."""
    down = f"http://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "harness.cli.entry", *args]
    if args[0] != "inspect":
        command += ["--reef-url", down, "--judge-url", down]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    err_path = scratch / f"stderr-{args[0]}.txt"
    started = time.monotonic()
    with open(err_path, "wb") as err_file:
        process = subprocess.Popen(
            [sys.executable, "-c", MEASURE, *command],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err_file,
            start_new_session=True,
        )
    try:
        out, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()
        pytest.fail(f"{args[0]} hung for 60 s")
    elapsed = time.monotonic() - started
    peak_kib = int(out.decode().strip() or 0)
    return process.returncode, err_path.read_text(errors="replace"), elapsed, peak_kib / 1024


@pytest.mark.parametrize("command", ["status", "inspect", "export"])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_state_ends_in_one_line_naming_the_file_with_exit_2_and_changes_nothing(
    pristine: FixtureRun, tmp_path: Path, damage: str, command: str
) -> None:
    state = tmp_path / "state"
    shutil.copytree(pristine.state_dir, state, symlinks=True)
    expected = DAMAGE[damage](state)
    before = snapshot(state)
    out = tmp_path / "out"
    args = [command, str(state)] + (["--out", str(out)] if command == "export" else [])

    status, err, elapsed, peak_mb = run_cli(args, tmp_path)

    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"guidance-ttt {command}: ") and expected in lines[0], lines[0]
    assert "Traceback" not in err
    assert elapsed < SECONDS, f"{command} took {elapsed:.1f} s"
    assert peak_mb < MAX_RSS_MB, f"peak RSS {peak_mb:.0f} MB"
    assert snapshot(state) == before, "the command changed the state directory"
    assert not out.exists(), "export wrote records from a damaged state directory"


def test_the_undamaged_copy_is_read_by_every_command(pristine: FixtureRun, tmp_path: Path) -> None:
    # The same commands on the same copy without damage succeed: the failures above are the
    # damage's, not the harness's.
    state = tmp_path / "state"
    shutil.copytree(pristine.state_dir, state)
    out = tmp_path / "out"
    for args in (
        ["status", str(state)],
        ["inspect", str(state)],
        ["export", str(state), "--out", str(out)],
    ):
        status, err, _, _ = run_cli(args, tmp_path)
        assert status == 0, err
    assert (tmp_path / "out" / "runs.json").is_file()
