"""A small memory cgroup for tests that need the judge (or host) short of memory: made below
this process's own cgroup, a process moves itself in (`echo $$ > <dir>/cgroup.procs`), and the
judge's own run groups are made below it, so the kernel kills for it before any run reaches its
own bound. Real kernel files; where none can be made the test is skipped with the reason."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.cgroups.files import cgroup_mounts, own_paths
from judges.cgroups.groups import detect
from judges.service.process import cgroup_missing


@contextlib.contextmanager
def small_memory_cgroup(limit_bytes: int) -> Iterator[Path]:
    """The directory to move into: v1, a memory-hierarchy group of `limit_bytes`; v2,
    `short/leaf` (so that `short`, which holds the bound, can hold the judge's groups too)."""
    missing = cgroup_missing()
    if missing is not None:
        pytest.skip(missing)
    mounts, own = cgroup_mounts(), own_paths()
    # unique even where an earlier run's group outlived it (a pid is reused across runs)
    name = f"guidance-ttt-memory-short-{os.getpid()}-{secrets.token_hex(4)}"
    made: list[Path] = []
    try:
        if "memory" in mounts:
            short = mounts["memory"] / own.get("memory", "/").lstrip("/") / name
            short.mkdir()
            made.append(short)
            (short / "memory.limit_in_bytes").write_text(str(limit_bytes))
            target = short
        else:  # where the judge makes its groups: a base whose children get both controllers
            bound = detect("auto")
            base = bound.parents[0].parent
            bound.close()
            short = base / name
            short.mkdir()
            made.append(short)
            (short / "memory.max").write_text(str(limit_bytes))
            target = short / "leaf"
            target.mkdir()
            made.append(target)
            (short / "cgroup.subtree_control").write_text("+memory +pids")
    except (OSError, KeyError) as error:
        for path in reversed(made):
            path.rmdir()
        pytest.skip(f"cannot make a small memory cgroup here: {error}")
    try:
        yield target
    finally:
        for path in reversed(made):
            for child in path.glob("guidance-ttt-judge-*"):
                shutil.rmtree(child, ignore_errors=True)
            _remove_group(path)


def _remove_group(path: Path, patience_s: float = 10.0) -> None:
    """rmdir of a cgroup, retried while the kernel still counts an exiting process in it
    (EBUSY); a group that stays busy is left, under its unique name."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)


def moved_into(group: Path, command: list[str]) -> list[str]:
    """`command` started inside `group` (a shell writes its pid there, then execs it)."""
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *command]
