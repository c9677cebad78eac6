"""A memory, process and CPU bound for a whole sandboxed run: one cgroup (or v1 group set) per run.

Per-process rlimits cannot bound what a program and its children take together (forked
children, tmpfs and memfd pages, page tables). A control group does: every process of the run
(bubblewrap, the runner, the program and all its descendants) is placed in a fresh group before
bubblewrap starts, and the kernel charges each page any of them allocates — anonymous memory,
shared memory, tmpfs and memfd files, kernel memory — to that group. Over the bound, the kernel
reclaims and then kills a process of the group (an OOM kill, counted by the group), never one
outside it. A process of the group can also be OOM-killed below its bound, when the judge's own
cgroup or the host runs out of memory: the group counts the kill but not a hit of its own bound,
which is how the judge tells its own lack of memory from the program's (`GroupUsage`).

    cgroup v2:  memory.max = limit, memory.swap.max = 0, pids.max = processes
                peak: memory.peak; kills: `oom_kill` in memory.events; own bound reached:
                `max` or `oom` in memory.events
                CPU: `usage_usec` in cpu.stat
    cgroup v1:  memory.limit_in_bytes = memory.memsw.limit_in_bytes = limit (no swap),
                pids.max = processes (the `pids` hierarchy)
                peak: memory.max_usage_in_bytes; kills: `oom_kill` in memory.oom_control;
                own bound reached: memory.failcnt, or a peak at the bound (with a memsw
                limit the kernel counts neither failcnt)
                CPU: cpuacct.usage (the `cpuacct` hierarchy, where it is mounted)

The CPU counter covers every process of the run, also children nobody reaped (whose CPU no
/proc file or rusage keeps): the runner reads it through a descriptor (`RunGroup.cpu_path`) and
charges the program the larger of it and its own count (judges/sandbox/runner.cpp).

and, where the `cpu` controller can be used, one CPU at most per run, all runs alike
(`judges.cgroups.cpu`; without it runs are bounded in memory and processes only).

Groups live under the judge's own cgroup (from /proc/self/cgroup), in a directory
`guidance-ttt-judge-<pid>` that `CgroupBound.close` removes (and the next judge removes, should
a judge be killed without cleanup); for v2, where the own cgroup does not offer both
controllers, under the nearest ancestor that does and enables them for its children (the root,
as root). Entering a group needs no privilege in the child: the judge (root, or the owner of a
delegated v2 subtree) opens each group's `cgroup.procs` and the child (`judge-runner
--enter-cgroups`, already running as the sandbox uid) writes `0` ("this process") through that
descriptor before it executes bubblewrap — the kernel checks the opener's credentials, not the
writer's.

`detect(mode)` returns the bound or raises `CgroupUnavailable` naming every reason none works.
File helpers shared with `judges.cgroups.cpu` are in `judges.cgroups.files`.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from judges.cgroups.cpu import CpuBound, enable_v2, setup_v1
from judges.cgroups.files import (
    cgroup_mounts,
    judge_dir_name,
    kill_members,
    own_paths,
    read_int,
    sweep_stale,
    write,
    write_if_present,
)

MODES = ("auto", "v2", "v1", "off")
_PIDS_SLACK = 8  # bubblewrap's two processes, the entering shell and the runner
_V1_CONTROLLERS = ("memory", "pids")
#: A peak this close to the bound is a run that reached it (a failed charge leaves the charge up
#: to a huge page short of the bound).
_BOUND_SLACK = 4 << 20


class CgroupUnavailable(RuntimeError):
    """No cgroup bound can be set up here; the message names each reason."""


@dataclass(frozen=True)
class GroupUsage:
    """What a finished run's group saw: its peak charge, OOM kills and the bound in force, and
    whether its charge ever reached that bound (None: the kernel does not say)."""

    peak_bytes: int
    oom_kills: int
    limit_bytes: int
    reached_bound: bool | None = None

    @property
    def killed_for_others(self) -> bool:
        """OOM kills in a group that never reached its own bound: the kernel killed for the
        judge's cgroup or the host, which ran out of memory — the judge's fault, not the
        program's. False where the kernel does not say (the kill counts as the program's)."""
        return bool(self.oom_kills) and self.reached_bound is False


class RunGroup:
    """The group(s) of one run: descriptors to enter them, usage, cleanup."""

    def __init__(
        self,
        directories: list[Path],
        peak: Path,
        events: Path,
        limit: int,
        cpu_path: Path | None = None,
        hits: list[Path] | None = None,
    ) -> None:
        self.directories = directories
        self.cpu_path = cpu_path  # the group's CPU counter (ns or cpu.stat), None without one
        self._peak = peak
        self._events = events
        self._hits = hits or []  # v1: the failcnt files (v2 reads `max` and `oom` in events)
        self.limit = limit
        self.procs_fds = [os.open(path / "cgroup.procs", os.O_WRONLY) for path in directories]

    def enter_argv(self, runner: Path) -> list[str]:
        """The launcher prefix: `judge-runner --enter-cgroups` writes `0` to each descriptor,
        closes them and executes the rest, so the command starts inside the groups."""
        fds = ",".join(str(fd) for fd in self.procs_fds)
        return [str(runner), "--enter-cgroups", fds, "--"]

    def close_fds(self) -> None:
        """Close the judge's copies of the entering descriptors (after the child started)."""
        for fd in self.procs_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.procs_fds = []

    def usage(self) -> GroupUsage:
        """The peak charge and OOM kills so far (0 where the kernel does not report them)."""
        peak = read_int(self._peak)
        reached = _reached_bound(self._events, self._hits)
        if not reached and peak >= self.limit - max(_BOUND_SLACK, self.limit // 64):
            reached = True  # v1 with a memsw limit counts no failure in either failcnt
        return GroupUsage(peak, _oom_kills(self._events), self.limit, reached)

    def remove(self) -> None:
        """Kill whatever is left in the groups and remove them (waits briefly for the exits)."""
        self.close_fds()
        for directory in self.directories:
            kill_members(directory)
            for _ in range(200):
                try:
                    directory.rmdir()
                    break
                except OSError as error:
                    if error.errno == errno.ENOENT:
                        break
                    if error.errno != errno.EBUSY:
                        raise
                    kill_members(directory)
                    threading.Event().wait(0.01)


#: This process's open bounds, by judge directory: they share `guidance-ttt-judge-<pid>`, so
#: one closes it only when it is the last open there (a probe such as the launcher's
#: `cgroup_missing`, or a test's bound beside the judge's), and run groups are numbered across
#: all of them.
_OPEN: collections.Counter[Path] = collections.Counter()
_OPEN_LOCK = threading.Lock()
_RUN_NUMBERS = itertools.count(1)


class CgroupBound:
    """Creates one group per run below the judge's own cgroup, for one cgroup version.

    `parents` are the judge's directories: v2 [unified]; v1 [memory, pids] and, with a CPU
    bound, the `cpu` hierarchy's (`cpu.parent`), and the `cpuacct` hierarchy's (`accounting`,
    which may be one of those where it is mounted with them). `cpu` is that bound, or None and
    `cpu_missing` says why.
    """

    def __init__(
        self,
        version: int,
        parents: list[Path],
        cpu: CpuBound | None = None,
        cpu_missing: str = "",
        accounting: Path | None = None,
    ) -> None:
        self.version = version
        self.parents = parents
        self.accounting = accounting  # v1: the judge's directory holding cpuacct.usage
        self.cpu = cpu
        self.cpu_missing = cpu_missing
        self._open = list(dict.fromkeys(parents))
        with _OPEN_LOCK:
            _OPEN.update(self._open)

    def describe(self) -> str:
        """One line for the start-up log saying which bound is in force and where."""
        where = ", ".join(str(path) for path in self.parents)
        if self.version == 2:
            files = "memory.max, memory.swap.max = 0, pids.max"
        else:
            files = "memory.limit_in_bytes = memory.memsw.limit_in_bytes, pids.max"
        if self.cpu is not None:
            cpu = self.cpu.describe()
        else:
            cpu = (
                f"CPU NOT BOUNDED ({self.cpu_missing}): a run's processes can take CPUs from "
                "the programs judged beside it"
            )
        return (
            f"cgroup v{self.version}: each sandboxed run gets its own group under {where} "
            f"({files}); a run's memory (all its processes, tmpfs and memfd pages) is bounded "
            f"by its memory limit, without swap; {cpu}"
        )

    def weigh(self, workers: int) -> None:
        """Weigh the judge's runs together as `workers` ordinary groups (no-op without CPU)."""
        if self.cpu is not None:
            self.cpu.weigh(workers)

    def create(self, memory_bytes: int, processes: int, cpus: int = 1) -> RunGroup:
        """A fresh group bounding `memory_bytes` (no swap), `processes` (+ a small slack) and,
        with a CPU bound, its CPU to `cpus` (one but for a GPU trial's sandbox)."""
        with _OPEN_LOCK:
            name = f"run-{next(_RUN_NUMBERS)}"
        directories = [parent / name for parent in self.parents]
        for directory in directories:
            directory.mkdir()
        try:
            pids_max = str(processes + _PIDS_SLACK)
            if self.cpu is not None:
                self.cpu.limit(self.cpu.parent / name, cpus)
            if self.version == 2:
                unified = directories[0]
                write(unified / "memory.max", str(memory_bytes))
                write_if_present(unified / "memory.swap.max", "0")
                write(unified / "pids.max", pids_max)
                return RunGroup(
                    directories,
                    unified / "memory.peak",
                    unified / "memory.events",
                    memory_bytes,
                    unified / "cpu.stat",
                )
            memory, pids = directories[:2]
            write(memory / "memory.limit_in_bytes", str(memory_bytes))
            write_if_present(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
            write(pids / "pids.max", pids_max)
            accounting = self.accounting / name / "cpuacct.usage" if self.accounting else None
            return RunGroup(
                directories,
                memory / "memory.max_usage_in_bytes",
                memory / "memory.oom_control",
                memory_bytes,
                accounting,
                [memory / "memory.failcnt", memory / "memory.memsw.failcnt"],
            )
        except OSError:
            for directory in directories:
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise

    def close(self) -> None:
        """Remove the judge's directories (after every run group was removed), where no other
        bound of this process still has them open; a second close does nothing."""
        with _OPEN_LOCK:
            mine, self._open = self._open, []
            _OPEN.subtract(mine)
            last = [parent for parent in mine if _OPEN[parent] <= 0]
            for parent in last:
                del _OPEN[parent]
        for parent in last:
            for child in parent.glob("run-*"):
                kill_members(child)
                with contextlib.suppress(OSError):
                    child.rmdir()
            with contextlib.suppress(OSError):
                parent.rmdir()

    def without_cpu(self, reason: str) -> CgroupBound:
        """The same memory and process bound, with no CPU bound (`reason` says why)."""
        parents = list(self.parents)
        if self.version == 1 and self.cpu is not None and len(parents) > len(_V1_CONTROLLERS):
            parents.remove(self.cpu.parent)
            if _OPEN[self.cpu.parent] <= 1:
                with contextlib.suppress(OSError):
                    self.cpu.parent.rmdir()
        kept = CgroupBound(self.version, parents, None, reason, self._kept_accounting(parents))
        with _OPEN_LOCK:  # the new bound takes this one's place
            _OPEN.subtract(self._open)
            self._open = []
        return kept

    def _kept_accounting(self, parents: list[Path]) -> Path | None:
        """The cpuacct directory, unless it was the cpu hierarchy's that was just dropped."""
        return self.accounting if self.accounting in parents else None


def detect(mode: str = "auto") -> CgroupBound:
    """The cgroup bound to use: v2 first, then v1 (mode `auto`), only the version asked for, or
    none (`off`, for comparisons).

    Creates the judge's directory and checks that a group can be bounded; raises
    CgroupUnavailable naming why each version cannot be used. A CPU bound that cannot be set
    leaves the memory and process bound in force, without CPU (`CgroupBound.cpu_missing`).
    """
    if mode not in MODES:
        raise ValueError(f"cgroup mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == "off":
        raise CgroupUnavailable("cgroups are turned off (test mode cgroup=off)")
    mounts = cgroup_mounts()
    own = own_paths()
    reasons = []
    for version, setup in ((2, _setup_v2), (1, _setup_v1)):
        if mode not in ("auto", f"v{version}"):
            continue
        try:
            bound = setup(mounts, own)
            try:
                _probe(bound)
            except OSError as error:
                if bound.cpu is None:
                    raise
                bound = bound.without_cpu(f"cannot bound a run's CPU: {error}")
                _probe(bound)
            return bound
        except (CgroupUnavailable, OSError) as error:
            reasons.append(f"cgroup v{version}: {error}")
    raise CgroupUnavailable("; ".join(reasons))


def _setup_v1(mounts: dict[str, Path], own: dict[str, str]) -> CgroupBound:
    parents = []
    for controller in _V1_CONTROLLERS:
        mount = mounts.get(controller)
        if mount is None:
            raise CgroupUnavailable(f"the {controller} controller is not mounted (v1)")
        base = mount / own.get(controller, "/").lstrip("/")
        if not base.is_dir() or not os.access(base, os.W_OK):
            raise CgroupUnavailable(f"{base} is not writable by uid {os.geteuid()}")
        parents.append(base / judge_dir_name())
    for parent in parents:
        sweep_stale(parent.parent)
        parent.mkdir(exist_ok=True)
    cpu, missing = setup_v1(mounts, own)
    if cpu is not None and cpu.parent not in parents:  # (cpu may share a hierarchy)
        parents.append(cpu.parent)
    accounting = _accounting_v1(mounts, own, parents)
    if accounting is not None and accounting not in parents:
        parents.append(accounting)
    return CgroupBound(1, parents, cpu, missing, accounting)


def _accounting_v1(
    mounts: dict[str, Path], own: dict[str, str], parents: list[Path]
) -> Path | None:
    """The judge's directory in the v1 `cpuacct` hierarchy (one of `parents` where cpuacct is
    mounted with one of their controllers), or None where it is not mounted or not writable."""
    mount = mounts.get("cpuacct")
    if mount is None:
        return None
    base = mount / own.get("cpuacct", "/").lstrip("/")
    parent = base / judge_dir_name()
    if parent in parents:
        return parent
    if not (base / "cpuacct.usage").is_file() or not os.access(base, os.W_OK):
        return None
    sweep_stale(base)
    try:
        parent.mkdir(exist_ok=True)
    except OSError:
        return None
    return parent


def _setup_v2(mounts: dict[str, Path], own: dict[str, str]) -> CgroupBound:
    """The judge's parent group: below its own cgroup, else below the nearest ancestor that can
    bound children (e.g. the root, where the own cgroup does not offer `pids`)."""
    mount = mounts.get("cgroup2")
    if mount is None:
        raise CgroupUnavailable("no cgroup2 file system is mounted")
    own_dir = mount / own.get("", "/").lstrip("/")
    candidates = [own_dir, *(p for p in own_dir.parents if p.is_relative_to(mount))]
    reasons = []
    for base in candidates:
        try:
            _bounding_base(base, is_own=base == own_dir, is_root=base == mount)
        except (CgroupUnavailable, OSError) as error:
            reasons.append(str(error))
            continue
        sweep_stale(base)
        parent = base / judge_dir_name()
        parent.mkdir(exist_ok=True)
        write(parent / "cgroup.subtree_control", "+memory +pids")
        cpu, missing = enable_v2(parent)
        return CgroupBound(2, [parent], cpu, missing)
    raise CgroupUnavailable("; ".join(reasons))


def _bounding_base(base: Path, *, is_own: bool, is_root: bool) -> None:
    """Check that `base` can hold groups bounded by memory and pids, enabling them (and cpu,
    where it is offered) for its children where that is ours to do; CgroupUnavailable naming
    what is missing otherwise. Failing to enable cpu only leaves the runs without a CPU bound."""
    available = (base / "cgroup.controllers").read_text().split()
    missing = [name for name in ("memory", "pids") if name not in available]
    if missing:
        raise CgroupUnavailable(
            f"{base} does not offer the {' and '.join(missing)} controller(s) "
            f"(cgroup.controllers: {' '.join(available) or 'none'})"
        )
    if not os.access(base, os.W_OK):
        raise CgroupUnavailable(
            f"{base} is not writable by uid {os.geteuid()}: run the judge as root or in a "
            "delegated cgroup (e.g. systemd-run --user --scope -p Delegate=yes)"
        )
    enabled = (base / "cgroup.subtree_control").read_text().split()
    wanted = ["memory", "pids", *(["cpu"] if "cpu" in available else [])]
    todo = [name for name in wanted if name not in enabled]
    needed = [name for name in todo if name != "cpu"]
    if not todo:
        return
    try:
        _enable_for_children(base, todo, enabled, is_own=is_own, is_root=is_root)
    except (CgroupUnavailable, OSError):
        if needed == todo:
            raise
        if needed:  # without cpu, then: the runs get no CPU bound (said at start-up)
            _enable_for_children(base, needed, enabled, is_own=is_own, is_root=is_root)


def _enable_for_children(
    base: Path, controllers: list[str], enabled: list[str], *, is_own: bool, is_root: bool
) -> None:
    text = " ".join(f"+{name}" for name in controllers)
    if is_root:  # the root may enable controllers while it holds processes
        write(base / "cgroup.subtree_control", text)
    elif is_own:
        _enable_children(base, text)
    else:
        raise CgroupUnavailable(
            f"{base} does not enable {' and '.join(controllers)} for its children "
            f"(cgroup.subtree_control: {' '.join(enabled) or 'none'})"
        )


def _enable_children(base: Path, controllers: str) -> None:
    """Enable `controllers` ("+memory +pids …") for the children of the judge's own cgroup;
    when it holds processes (v2 forbids controllers then), move them into a leaf
    `guidance-ttt-judge-<pid>-service` first."""
    try:
        write(base / "cgroup.subtree_control", controllers)
        return
    except OSError as error:
        if error.errno != errno.EBUSY:
            raise
    leaf = base / f"{judge_dir_name()}-service"
    leaf.mkdir(exist_ok=True)
    for pid in (base / "cgroup.procs").read_text().split():
        with contextlib.suppress(ProcessLookupError):
            write(leaf / "cgroup.procs", pid)
    write(base / "cgroup.subtree_control", controllers)


def _probe(bound: CgroupBound) -> None:
    """Create, bound, read and remove one group: fail here, at start-up, not on a case."""
    group = bound.create(64 * 1024 * 1024, 4)
    try:
        group.usage()
    finally:
        group.remove()


def _reached_bound(events: Path, failcnts: list[Path]) -> bool | None:
    """Whether the group's charge reached its own bound: v1, a non-zero failcnt (any of
    `failcnts` that exists); v2, `max` or `oom` in memory.events. None when unreadable."""
    if failcnts:
        counts = []
        for path in failcnts:
            try:
                counts.append(int(path.read_text().strip() or 0))
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                return None
        return any(counts) if counts else None
    try:
        text = events.read_text()
    except OSError:
        return None
    fields = dict(line.partition(" ")[::2] for line in text.splitlines())
    if "max" not in fields and "oom" not in fields:
        return None
    return any(int(fields.get(key) or 0) for key in ("max", "oom"))


def _oom_kills(path: Path) -> int:
    try:
        text = path.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0
