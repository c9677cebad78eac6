"""Where a run's files live, and the seed record a new run starts from.

Every path here is relative to the run's state directory (`serve.yaml`'s `state_dir`), except
the seed record, which is relative to the task directory. The run keeps everything it owns under
`guidance-run/`: the archive store, `committed-library.json` (the committed archive in the
Discover `library.json` layout), `resume-state.json` and `events.jsonl`.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from harness.state import LibraryEntry
from harness.storage.atomic import atomic_write_bytes
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
