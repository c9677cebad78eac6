"""Where a run's files live, and the seed record a new run starts from.

Every path here is relative to the run's state directory (`serve.yaml`'s `state_dir`), except
the seed record, which is relative to the task directory. The run keeps everything it owns under
`guidance-run/`: the archive store, `committed-library.json` (the committed archive in the
Discover `library.json` layout), `resume-state.json` and `events.jsonl`.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.state import LibraryEntry
from harness.storage.resume_state import RESUME_STATE

RUN_DIR = RESUME_STATE.parent  # guidance-run
ARCHIVE_DIR = RUN_DIR / "archive"
COMMITTED_LIBRARY = RUN_DIR / "committed-library.json"
#: The run's event log file name, and its place under the state directory.
EVENTS_FILE = "events.jsonl"
EVENT_LOG = RUN_DIR / EVENTS_FILE
SEED_FILE = Path("solution") / "seed.json"


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
