"""A stand-in for a run's state directory (`harness.storage.state_dir.StateDirectory`) for the
run controller's tests.

It commits in the same order as the real one — the archive, then the real `resume-state.json`
record — but its committed archive is a stand-in file `guidance-run/committed-library.json`
holding `{"step": N}`: the controller's tests are about the gate and the commit order, and the
real archive, store and library file are `tests/harness/test_store.py`'s.
`commit_archive(step)` writes that file; a test may pass its own to record what it saw at
commit time or to die mid-commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from harness.storage.atomic import atomic_write_json
from harness.storage.resume_state import RESUME_STATE, ResumeState
from harness.storage.run_files import COMMITTED_LIBRARY


class StandInState:
    def __init__(self, root: Path, commit_archive: Callable[[int], object] | None = None) -> None:
        self.root = Path(root)
        self._commit_archive = commit_archive or self.write_archive

    @property
    def archive_file(self) -> Path:
        return self.root / COMMITTED_LIBRARY

    def write_archive(self, step: int) -> None:
        atomic_write_json(self.archive_file, {"step": step})

    @property
    def committed_step(self) -> int | None:
        if not self.archive_file.exists():
            return None
        return json.loads(self.archive_file.read_text(encoding="utf-8"))["step"]

    @property
    def resume_state_path(self) -> Path:
        return self.root / RESUME_STATE

    def resume_state(self) -> ResumeState | None:
        return ResumeState.load(self.resume_state_path)

    def commit(self, step: int, resume: ResumeState) -> ResumeState:
        self._commit_archive(step)
        resume.save(self.resume_state_path)
        return resume
