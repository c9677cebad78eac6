"""Small helpers over the cgroup file systems, shared by `judges.cgroups.groups` and
`judges.cgroups.cpu`:
where the hierarchies are mounted, where this process sits in them, the judge's directory name
and the sweep of directories a killed judge left, reading and writing control files, killing a
group's members.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

_JUDGE_DIR = re.compile(r"guidance-ttt-judge-(\d+)(-service)?")


def judge_dir_name() -> str:
    """The name of this judge's directory in each hierarchy: `guidance-ttt-judge-<pid>`."""
    return f"guidance-ttt-judge-{os.getpid()}"


def sweep_stale(base: Path) -> None:
    """Remove the groups a judge killed without cleanup (SIGKILL) left under `base`: those of
    a judge process that no longer exists. Groups still holding processes stay."""
    for stale in base.glob("guidance-ttt-judge-*"):
        match = _JUDGE_DIR.fullmatch(stale.name)
        if match is None or not stale.is_dir() or _alive(int(match[1])):
            continue
        for child in stale.glob("run-*"):
            with contextlib.suppress(OSError):
                child.rmdir()
        with contextlib.suppress(OSError):
            stale.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cgroup_mounts() -> dict[str, Path]:
    """Mount points by controller (`cgroup2` for the unified hierarchy) from mountinfo."""
    mounts: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            mounts.setdefault("cgroup2", point)
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                mounts.setdefault(option, point)
    return mounts


def own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def write(path: Path, value: str) -> None:
    """Write `value` to a control file in one write (as the kernel expects)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def write_if_present(path: Path, value: str) -> None:
    """Write a control file that some kernels lack (e.g. swap accounting off)."""
    if path.exists():
        write(path, value)


def read_int(path: Path) -> int:
    """The first number of a control file, 0 where it is missing or unreadable."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def kill_members(directory: Path) -> None:
    """SIGKILL every process of a group (those that exist while it is read)."""
    try:
        members = (directory / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in members:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
