"""A test-only crash hook: `GUIDANCE_TTT_CRASH_AT=<point>[:<n>]` makes the process SIGKILL itself
the n-th time (default 1) it passes the named point.

The crash tests use it to stop a real run at the moments that matter for recovery, without
timing races. Points in the run loop: `after_journal` and `after_report` (per rollout, counted
across the process), `before_archive_commit` and `after_archive_commit` (per step). Unset, the
hook costs one environment lookup per call and does nothing.
"""

from __future__ import annotations

import os
import signal
import threading

ENV_VAR = "GUIDANCE_TTT_CRASH_AT"

_counts: dict[str, int] = {}
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL (no cleanup, like a power cut) when `GUIDANCE_TTT_CRASH_AT`
    names `name` and this is its n-th pass; otherwise return at once."""
    spec = os.environ.get(ENV_VAR, "")
    point, _, count = spec.partition(":")
    if point != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        if _counts[name] == int(count or 1):
            os.kill(os.getpid(), signal.SIGKILL)
