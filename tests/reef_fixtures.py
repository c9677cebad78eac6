"""A real `reef serve` on loopback for tests; it lives in `harness.rehearsal.reef_process`
because `guidance-ttt rehearse` starts Reef the same way."""

from harness.rehearsal.reef_process import (
    DEFAULT_MODEL,
    DEFAULT_TOKEN,
    RECORD_ONLY_RECIPE,
    ReefService,
    free_port,
    reef_executable,
    running_reef,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TOKEN",
    "RECORD_ONLY_RECIPE",
    "ReefService",
    "free_port",
    "reef_executable",
    "running_reef",
]
