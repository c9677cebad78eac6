"""Where a run's files live, and the seed record a new run starts from.

Every path here is relative to the run's state directory (`serve.yaml`'s `state_dir`), except
the seed record, which is relative to the task directory. The run keeps everything it owns under
`guidance-run/`: the archive store, `committed-library.json` (the committed archive in the
Discover `library.json` layout), `resume-state.json`, `events.jsonl` and `serving-load.json`.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from harness.state import LibraryEntry
from harness.storage.atomic import atomic_write_bytes, atomic_write_json
from harness.storage.resume_state import RESUME_STATE
from harness.storage.state_files import exists, read_bytes

RUN_DIR = RESUME_STATE.parent  # guidance-run
ARCHIVE_DIR = RUN_DIR / "archive"
COMMITTED_LIBRARY = RUN_DIR / "committed-library.json"
#: The run's event log file name, and its place under the state directory.
EVENTS_FILE = "events.jsonl"
EVENT_LOG = RUN_DIR / EVENTS_FILE
SEED_FILE = Path("solution") / "seed.json"
#: What the preflight's real calls used, left by `python -m harness.preflight --usage-file` for
#: the run to log as a `preflight_usage` event when it starts (then removed).
PREFLIGHT_USAGE = RUN_DIR / "preflight-usage.json"
#: The run's own id: made once when the state directory's run starts, read on every resume.
RUN_ID_FILE = RUN_DIR / "run-id"
_RUN_ID = re.compile(r"[0-9a-f]{32}")
#: The step the run is in and the serving load Reef answered its guidance calls under (its
#: `current_runtime_load_id` when the step began): how a resume tells a restarted Reef.
SERVING_LOAD = RUN_DIR / "serving-load.json"


def load_seed(task_dir: Path, seed_file: str | Path = SEED_FILE) -> LibraryEntry:
    """The task's seed candidate: the `entry` of `<task>/<seed_file>` (a verified, judged
    program with a code-free summary; `solution/seed.json` unless the run's `seed` setting names
    an alternative seed of the task)."""
    path = Path(task_dir) / seed_file
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"{path} is missing: every task ships its judged seed candidate there "
            "(docs/design.md §9)"
        ) from exc
    if not isinstance(data, dict) or "entry" not in data:
        raise ValueError(f"{path} must hold an object with the seed's `entry`")
    return LibraryEntry.from_dict(data["entry"])


def event_log_path(state_dir: Path) -> Path:
    """Where a run's `events.jsonl` lives: `<state_dir>/guidance-run/events.jsonl`."""
    return Path(state_dir) / EVENT_LOG


def preflight_usage_path(state_dir: Path) -> Path:
    """Where the preflight leaves its calls' usage (`<state>/guidance-run/preflight-usage.json`)."""
    return Path(state_dir) / PREFLIGHT_USAGE


def run_id(state_dir: Path, *, create: bool = True) -> str | None:
    """The run's own id (32 hex digits) from `<state_dir>/guidance-run/run-id`, written once
    (a random uuid4) when `create` and the file is missing: two runs never share one, and a
    resumed run reads back its own. The W&B runs of both the harness and Reef's tracker are
    named from it (docs/observability.md). None when the file is missing and `create` is off;
    ValueError naming the file when it holds something else."""
    path = Path(state_dir) / RUN_ID_FILE
    if exists(path):
        text = read_bytes(path, max_bytes=256).decode("ascii", errors="replace").strip()
        if not _RUN_ID.fullmatch(text):
            raise ValueError(
                f"{path} holds {text[:40]!r}, not a run id (32 hex digits); restore it from a "
                "backup, or use a new state directory"
            )
        return text
    if not create:
        return None
    value = uuid.uuid4().hex
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (value + "\n").encode("ascii"))
    return value


def write_serving_load(state_dir: Path, step: int, load: str) -> None:
    """Note that `step`'s guidance calls are served under Reef's runtime load `load`
    (`<state>/guidance-run/serving-load.json`, replaced atomically)."""
    atomic_write_json(Path(state_dir) / SERVING_LOAD, {"step": step, "runtime_load_id": load})


def read_serving_load(state_dir: Path) -> tuple[int, str] | None:
    """The step and serving load `write_serving_load` noted last; None when none was noted.
    ValueError naming the file when it holds something else."""
    path = Path(state_dir) / SERVING_LOAD
    if not exists(path):
        return None
    try:
        value = json.loads(read_bytes(path, max_bytes=4096))
        step, load = value["step"], value["runtime_load_id"]
        if type(step) is not int or not isinstance(load, str):
            raise TypeError(value)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{path} is not a serving-load record ({exc.__class__.__name__}); remove it (a "
            "resume then replays the open step's journal as it is)"
        ) from exc
    return step, load
