"""The CPU bound of each sandboxed run: at most one CPU, and a weight equal to every other's.

(A GPU trial's sandbox gets its GPU's share of the host's CPUs instead: `judges.gpu.judge`.)

Without it, a candidate forking many spinners takes CPUs from the program judged beside it (in
a non-root cgroup, where the scheduler weighs every process alike and no autogroup applies, 120
spinners left a neighbour 0.42 s of CPU in 60 s). With it, every run's group — candidates,
compilers, checkers and interactors alike — may use one CPU at most, and all run groups share
one default weight, so no run can starve another; the judge's own directory, which holds them,
weighs as much as `workers` ordinary groups (or sessions, under autogroup), so host load cannot
press the judge's runs together below one ordinary share each:

    cgroup v2:  each run: cpu.max = "100000 100000";
                the judge's directory: cpu.weight = 100 x workers
    cgroup v1:  the `cpu` hierarchy; each run: cpu.cfs_period_us = cpu.cfs_quota_us = 100000;
                the judge's directory: cpu.shares = 1024 x workers

The bound is optional: where the `cpu` controller is not offered (a delegated v2 subtree
without it, a v1 host that does not mount it), runs keep their memory and process bounds and
the start-up line says that CPU is not bounded and why. Time limits are judged on CPU time
either way (`judges.sandbox.outcome`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from judges.cgroups.files import judge_dir_name, sweep_stale, write

PERIOD_US = 100_000  # one CPU: a quota of one period per period
_V2_WEIGHT, _V2_WEIGHT_MAX = 100, 10_000
_V1_SHARES, _V1_SHARES_MAX = 1024, 262_144


@dataclass(frozen=True)
class CpuBound:
    """Where the judge's CPU directory is (`parent`) and in which cgroup version."""

    version: int
    parent: Path

    def limit(self, run: Path, cpus: int = 1) -> None:
        """Hold the run group `run` to `cpus` CPUs (one, but for a GPU trial's sandbox)."""
        if self.version == 2:
            write(run / "cpu.max", f"{cpus * PERIOD_US} {PERIOD_US}")
        else:
            write(run / "cpu.cfs_period_us", str(PERIOD_US))
            write(run / "cpu.cfs_quota_us", str(cpus * PERIOD_US))

    def weigh(self, workers: int) -> int:
        """Give the judge's directory the weight of `workers` ordinary groups; returns it."""
        if self.version == 2:
            weight = min(_V2_WEIGHT * workers, _V2_WEIGHT_MAX)
            write(self.parent / "cpu.weight", str(weight))
        else:
            weight = min(_V1_SHARES * workers, _V1_SHARES_MAX)
            write(self.parent / "cpu.shares", str(weight))
        return weight

    def describe(self) -> str:
        """The start-up log's words for this bound."""
        if self.version == 2:
            files = f'cpu.max = "{PERIOD_US} {PERIOD_US}"; the judge\'s directory: cpu.weight'
        else:
            files = (
                f"cpu.cfs_quota_us = cpu.cfs_period_us = {PERIOD_US} under {self.parent}; "
                "the judge's directory: cpu.shares"
            )
        return f"CPU: each run at most one CPU, all runs equal weights ({files})"


def setup_v1(mounts: dict[str, Path], own: dict[str, str]) -> tuple[CpuBound | None, str]:
    """The judge's directory in the v1 `cpu` hierarchy, or None and why there is none."""
    mount = mounts.get("cpu")
    if mount is None:
        return None, "the cpu controller is not mounted (v1)"
    base = mount / own.get("cpu", "/").lstrip("/")
    if not base.is_dir() or not os.access(base, os.W_OK):
        return None, f"{base} is not writable by uid {os.geteuid()}"
    if not (base / "cpu.cfs_quota_us").exists():
        return None, f"{base} has no cpu.cfs_quota_us (a kernel without CFS bandwidth control)"
    sweep_stale(base)
    parent = base / judge_dir_name()
    try:
        parent.mkdir(exist_ok=True)
    except OSError as error:
        return None, f"cannot create {parent}: {error}"
    return CpuBound(1, parent), ""


def enable_v2(parent: Path) -> tuple[CpuBound | None, str]:
    """Enable `cpu` for the run groups under the judge's v2 directory `parent`, or None and why
    not (its parent does not offer the controller to it)."""
    offered = (parent / "cgroup.controllers").read_text().split()
    if "cpu" not in offered:
        return None, (
            f"{parent.parent} does not enable the cpu controller for its children "
            f"(offered to {parent.name}: {' '.join(offered) or 'none'})"
        )
    try:
        write(parent / "cgroup.subtree_control", "+cpu")
    except OSError as error:
        return None, f"cannot enable cpu in {parent / 'cgroup.subtree_control'}: {error}"
    return CpuBound(2, parent), ""
