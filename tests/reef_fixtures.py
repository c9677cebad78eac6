"""A real `reef serve` on loopback for tests (`harness.rehearsal.reef_process`, over
`harness.adapters.reef.process`), started as `guidance-ttt rehearse` starts it."""

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
