"""The bubblewrap command line of one sandboxed run: what the program sees and which limits it gets.

`bwrap_argv` is pure (it only looks at which of `/bin`, `/lib*` … are links on the host). The
sandbox it describes has new user, PID, IPC, UTS, network and cgroup namespaces
(`--unshare-all`: no network, only a loopback of its own); no further user namespace can be
created inside (`--disable-userns`, so no mount of an unsized tmpfs); no host file system except
read-only `/usr` (with the `/bin`, `/lib*` links and the loader cache); a fresh `/proc`, a
minimal `/dev`; a private, size-limited tmpfs at `/tmp` as the only writable place at run time;
`--die-with-parent` and `--new-session`. Inside, `judge-runner` is PID 1 and receives the report
descriptor and the limits as its arguments, then the program's own command after `--`; in a
session's sandbox (`bwrap_session_argv`) it takes each run's limits and command from the judge.
Launching it is `judges.sandbox.runner`'s job, and `judges.sandbox.session`'s.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from judges.sandbox.outcome import Limits

SANDBOX_PATH = "/usr/bin:/bin"
RUNNER_INSIDE = "/judge/runner"


def system_binds() -> list[str]:
    """The host's system, read-only: `/usr`, the top-level `bin`/`lib` folders (or their
    symlinks into `/usr`), the loader cache and `/etc/alternatives`."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), f"/{name}"]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    argv += ["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]
    return argv


def bwrap_argv(
    bwrap: str,
    runner: Path,
    command: list[str],
    limits: Limits,
    binds: list[tuple[str, Path, str]],
    workdir: str,
    report_fd: int,
    share: tuple[int, int] | None = None,
    cpu_fd: int = -1,
) -> list[str]:
    """The full argv that runs `command` under `bwrap` with `runner` (the host binary of
    judge-runner) as PID 1, writing its report to `report_fd`. `binds` are (kind, host path,
    sandbox path) with kind `ro` or `rw`; `workdir` is the program's working directory inside.
    The runner gets the wall limit and the real-time backstop in ms, the CPU soft and hard
    limits in seconds, the address space (0: unlimited), processes, file size, stack, and the
    descriptor and slot of the file shared with an interactive partner (`share`; -1 0 without
    one) and the descriptor of the run's cgroup CPU counter (`cpu_fd`; -1 without one), in
    that order."""
    argv = _sandbox(bwrap, runner, limits.tmpfs_bytes, binds, workdir)
    argv += [str(report_fd), *runner_limits(limits)]
    argv += [*(str(value) for value in (share or (-1, 0))), str(cpu_fd)]
    return [*argv, "--", *command]


def bwrap_session_argv(
    bwrap: str,
    runner: Path,
    tmpfs_bytes: int,
    binds: list[tuple[str, Path, str]],
    workdir: str,
    control_fd: int,
) -> list[str]:
    """The argv of a session's sandbox (`judges.sandbox.session`): the same sandbox as
    `bwrap_argv`'s, with judge-runner as PID 1 waiting for runs on `control_fd`."""
    return [*_sandbox(bwrap, runner, tmpfs_bytes, binds, workdir), "--session", str(control_fd)]


def runner_limits(limits: Limits) -> list[str]:
    """The limits as judge-runner takes them: the wall limit and the real-time backstop in ms,
    the CPU soft and hard limits in s, the address space (0: unlimited), processes, file size
    and stack."""
    cpu_soft = math.ceil(limits.cpu_seconds) + 1
    return [
        str(math.ceil(limits.wall_seconds * 1000)),
        str(math.ceil(limits.backstop_seconds * 1000)),
        str(cpu_soft),
        str(cpu_soft + 1),
        str(limits.memory_bytes if limits.address_space else 0),
        str(limits.processes),
        str(limits.file_bytes),
        str(limits.stack_bytes),
    ]


def _sandbox(
    bwrap: str, runner: Path, tmpfs_bytes: int, binds: list[tuple[str, Path, str]], workdir: str
) -> list[str]:
    """bubblewrap's options (module docstring), then the runner's path inside, last."""
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--as-pid-1",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
        "--setenv",
        "PATH",
        SANDBOX_PATH,
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "TMPDIR",
        "/tmp",
        "--setenv",
        "LANG",
        "C",
    ]
    argv += system_binds()
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(tmpfs_bytes), "--tmpfs", "/tmp"]
    argv += ["--ro-bind", str(runner), RUNNER_INSIDE]
    for kind, host_path, inside in binds:
        argv += ["--bind" if kind == "rw" else "--ro-bind", str(host_path), inside]
    # bwrap builds the root and /dev as tmpfs mounts the sandbox user could write to.
    argv += ["--remount-ro", "/", "--remount-ro", "/dev"]
    return [*argv, "--chdir", workdir, "--", RUNNER_INSIDE]
