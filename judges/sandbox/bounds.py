"""The bounds every sandboxed run gets, set up and announced once at start-up.

`memory_bound` finds the cgroup bound (`judges.cgroups.groups`: memory and processes, and one CPU
per run where the cpu controller allows), weighs the judge's runs as `--workers` ordinary groups,
and says on stderr which bounds are in force and how time limits are judged, as the operator
needs to know before trusting a verdict.
"""

from __future__ import annotations

import logging

from judges.cgroups.groups import CgroupBound, CgroupUnavailable, detect
from judges.sandbox.outcome import BACKSTOP_FACTOR
from judges.sandbox.runner import SandboxUnavailable

log = logging.getLogger("judges.service.app")


def memory_bound(mode: str, accept_per_process: bool, workers: int = 1) -> CgroupBound | None:
    """The cgroup bound for every sandboxed run (memory, processes and, where the cpu
    controller allows, one CPU per run with the judge's runs weighing as `workers` groups),
    announced on stderr; None (per-process rlimits only) where none can be set up and
    `accept_per_process` allows it, else SandboxUnavailable naming why each cgroup version
    failed and the flag that accepts it."""
    try:
        bound = detect(mode)
    except CgroupUnavailable as error:
        if not accept_per_process:
            raise SandboxUnavailable(
                f"no cgroup can bound a run's memory here ({error}); fix that, or start with "
                "--accept-per-process-limits to run with per-process rlimits only"
            ) from None
        log.warning(
            "sandbox bound: PER-PROCESS RLIMITS ONLY (--accept-per-process-limits): %s; a "
            "candidate's processes, tmpfs and memfd files together can exceed its memory limit, "
            "and CPU is not bounded",
            error,
        )
        return None
    try:
        bound.weigh(workers)
    except OSError as error:
        log.warning("cannot weigh the judge's runs as %d groups: %s", workers, error)
    log.info("sandbox bound: %s", bound.describe())
    if bound.cpu is None:
        log.warning("CPU is not bounded per run: %s", bound.cpu_missing)
    log.info(
        "time limits: a case's CPU time against its limit; its wall-clock limit counts the "
        "time it ran or was idle, not the time it waited for a CPU, up to a real-time backstop "
        "of %d times that limit, where a run is an infrastructure fault, never a verdict",
        BACKSTOP_FACTOR,
    )
    return bound
