"""Run untrusted programs (the compiler, then the candidate) under bubblewrap, a cgroup and rlimits.

Every sandboxed program runs inside `bwrap` with its own namespaces, no network, no host file
system but read-only `/usr` and a private, size-limited `/tmp`; the command line, and with it
what the program can see, is built by `judges.sandbox.argv`. Its stdin, stdout and the runner's
report pipe are the descriptors of `judges.sandbox.streams`. This module builds the runner, starts
and waits for each run, and turns what happened into a `RunOutcome`.

Inside, `judge-runner` (judges/sandbox/runner.cpp, built once per machine by
`judges.sandbox.runner_build`) is PID 1 of the sandbox, so the
program can neither kill nor stop it, and it is not dumpable, so its report descriptor is out of
reach. It sets the rlimits on the program only — CPU seconds, address space (= the memory
limit), stack, processes, file size (this also caps stdout and stderr, which are files opened by
the judge) and no core dumps — kills it at the wall-clock limit, kills its leftovers and reports
exit status, signal, CPU time, peak memory and the time the run waited for a CPU, which
bubblewrap alone would lose. The wall-clock limit counts only the program's own time (running
or idle), not the time it waited for a CPU that host load held; a run the real-time backstop
(`Limits.backstop_seconds`) stops first is STARVED, the host's fault, never a verdict. A timer
in the judge kills the whole sandbox a few seconds after the backstop still, should anything
hang.

With a cgroup bound (`judges.cgroups.groups`), each run gets its own group before bubblewrap starts:
the memory of all its processes together — tmpfs and memfd pages included — is held to the
memory limit without swap, its processes to the process limit, its reported memory is the
group's peak and a kill at the bound is Memory Limit Exceeded; a kill below it (the judge's
cgroup or the host out of memory) is JUDGE_MEMORY, the judge's fault, never a verdict. Without
one, only the per-process rlimits apply (the service refuses that unless told to accept it).

The judge's own files (sources, state directory, test data) are never mounted: input arrives on
stdin as a sealed in-memory copy and output leaves through descriptors to files.

Process limit when the judge runs as root: RLIMIT_NPROC is not enforced for real root, so the
sandbox is entered as an unprivileged uid (default 65534) that bwrap maps into its own user
namespace; the kernel then counts processes per sandbox and a fork bomb stops at the limit.

`Sandbox.execute` blocks; callers run it in worker threads. bwrap's `--die-with-parent` is tied to
the thread that started it, which is why those threads live as long as the service.

Just over the project's ~400 lines: one run's set-up, launch, accounting and clean-up are one
sequence, and splitting it would put its invariants (who may kill what, when) in two places.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from judges.cgroups.groups import CgroupBound, GroupUsage, RunGroup
from judges.sandbox.argv import SANDBOX_PATH, bwrap_argv
from judges.sandbox.outcome import (
    INTERNAL_ERROR,
    JUDGE_MEMORY,
    MEMORY_LIMIT,
    SIGNALLED,
    STARVED,
    TIME_LIMIT,
    Limits,
    Report,
    RunOutcome,
    classify,
    is_resource_exhaustion,
    judge_memory,
    memory_exceeded,
    starved,
)
from judges.sandbox.runner_build import RunnerBuildError, install_runner
from judges.sandbox.streams import close_descriptors, drain, open_output, sealed_input

log = logging.getLogger("judges.sandbox.runner")


DEFAULT_SANDBOX_UID = 65534
MIN_BWRAP_VERSION = (0, 8)
_REPORT_FD_GRACE = 5.0  # seconds the judge waits past the backstop before killing bwrap


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be set up on this machine; the message names the missing piece."""


class Sandbox:
    """Runs commands under bubblewrap and judge-runner, as an unprivileged uid.

    `scratch` is a directory for the runner binary and the programs' build and output files; it
    must be traversable by the sandbox uid (the constructor sets mode 0711). `uid`/`gid` are
    used only when the judge runs as root; otherwise programs keep the judge's own uid.
    `bound` (from `judges.cgroups.groups.detect`) puts each run in its own cgroup; without it only
    the per-process rlimits apply.
    """

    def __init__(
        self,
        scratch: Path,
        uid: int = DEFAULT_SANDBOX_UID,
        gid: int | None = None,
        bound: CgroupBound | None = None,
    ) -> None:
        missing = [tool for tool in ("bwrap", "g++") if shutil.which(tool) is None]
        if missing:
            raise SandboxUnavailable(
                f"not found on PATH: {missing}; install the Debian packages bubblewrap and g++"
            )
        self.bwrap = shutil.which("bwrap") or "bwrap"
        _require_bwrap_version(self.bwrap)
        self.bound = bound
        self._as_root = os.geteuid() == 0
        self.uid = uid if self._as_root else os.geteuid()
        self.gid = (uid if gid is None else gid) if self._as_root else os.getegid()
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        scratch.chmod(0o711)
        self.runner = self._build_runner()
        self._live: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False

    def _build_runner(self) -> Path:
        """judge-runner in the scratch directory: the machine's cached build of runner.cpp,
        compiled on the first start after the source or compiler changed (runner_build)."""
        try:
            return install_runner(self.scratch / "judge-runner")
        except RunnerBuildError as error:
            raise SandboxUnavailable(str(error)) from error

    def own(self, path: Path) -> None:
        """Give `path` and its direct children to the sandbox uid (a compile's writable dir)."""
        if self._as_root:
            for item in (path, *path.iterdir()):
                os.chown(item, self.uid, self.gid)

    def check(self) -> None:
        """Run `true` in a sandbox; raise SandboxUnavailable with bwrap's message if that fails."""
        out = self.scratch / "check.out"
        limits = Limits(5, 10, 1 << 30, 16, 1 << 20, 1 << 20)
        outcome = self.execute(
            ["true"], limits=limits, stdin=None, stdout=out, stderr=out, binds=[]
        )
        if not outcome.accepted:
            raise SandboxUnavailable(
                f"bubblewrap cannot start a sandbox here ({outcome.detail}); unprivileged user "
                "namespaces must be enabled (sysctl kernel.unprivileged_userns_clone=1 or "
                "user.max_user_namespaces > 0)"
            )

    def execute(
        self,
        command: list[str],
        *,
        limits: Limits,
        stdin: bytes | Path | int | None,
        stdout: Path | int,
        stderr: Path,
        binds: list[tuple[str, Path, str]],
        workdir: str = "/tmp",
        output_cap: int | None = None,
        share: tuple[int, int] | None = None,
    ) -> RunOutcome:
        """Run `command` in a fresh sandbox and wait; candidate faults are outcomes, not errors.

        This is the one entry point for every untrusted program (compilers, candidates,
        checkers, interactors). `binds` are (kind, host path, sandbox path) with kind `ro` or
        `rw` (a writable directory). stdin is the given bytes or the content of the given file
        (a sealed copy), or /dev/null; stdout and stderr are files, each capped at
        `limits.file_bytes`; stdout beyond `output_cap` (default: that limit minus one byte) is
        an output failure. With a cgroup bound the whole run (every process, tmpfs and memfd
        page) is held to `limits.memory_bytes` and `limits.processes`, `memory_bytes` of the
        outcome is the group's peak, and reaching the bound is Memory Limit Exceeded.
        stdin and stdout may instead be pipe descriptors (an interactive run): `execute`
        takes ownership and closes them when the run ends; `share` is then (descriptor, slot)
        of the 32-byte file through which the two runs' runners tell each other how long they
        waited for a CPU and whether they are ready to run (the caller keeps and closes the
        descriptor).
        Status STARVED means the host kept the run from its CPU until the real-time backstop.
        Status INTERNAL_ERROR means the sandbox itself failed, not the program. When the
        judge itself runs out of descriptors, memory or disk (`is_resource_exhaustion`), the
        OSError is raised instead: that is passing, and the engine judges the submission again
        later rather than recording a failure.
        """
        if self._closed:
            close_descriptors(stdin, stdout)
            return RunOutcome(INTERNAL_ERROR, "the sandbox is shut down", None, None, 0, 0, 0, 0)
        try:
            group, failed = new_group(self.bound, limits)
        except OSError:  # the judge out of resources: passing
            close_descriptors(stdin, stdout)
            raise
        if failed is not None:
            close_descriptors(stdin, stdout)
            return failed
        try:
            return self._execute(
                command,
                limits,
                stdin,
                stdout,
                stderr,
                binds,
                workdir,
                group,
                limits.file_bytes - 1 if output_cap is None else output_cap,
                share,
            )
        finally:
            remove_group(group)

    def _execute(
        self,
        command: list[str],
        limits: Limits,
        stdin: bytes | Path | int | None,
        stdout: Path | int,
        stderr: Path,
        binds: list[tuple[str, Path, str]],
        workdir: str,
        group: RunGroup | None,
        cap: int,
        share: tuple[int, int] | None,
    ) -> RunOutcome:
        try:
            report_read, report_write = os.pipe()
        except OSError:
            close_descriptors(stdin, stdout)
            raise
        cpu_fd = -1
        if group is not None and group.cpu_path is not None:
            try:  # read by the runner: every process of the run counts (`judges.cgroups.groups`)
                cpu_fd = os.open(group.cpu_path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                os.close(report_read)
                os.close(report_write)
                close_descriptors(stdin, stdout)
                raise
        try:
            return self._start_and_wait(
                command,
                limits,
                stdin,
                stdout,
                stderr,
                binds,
                workdir,
                group,
                cap,
                share,
                (report_read, report_write),
                cpu_fd,
            )
        finally:
            if cpu_fd >= 0:
                os.close(cpu_fd)

    def _start_and_wait(
        self,
        command: list[str],
        limits: Limits,
        stdin: bytes | Path | int | None,
        stdout: Path | int,
        stderr: Path,
        binds: list[tuple[str, Path, str]],
        workdir: str,
        group: RunGroup | None,
        cap: int,
        share: tuple[int, int] | None,
        pipe: tuple[int, int],
        cpu_fd: int,
    ) -> RunOutcome:
        report_read, report_write = pipe
        argv = bwrap_argv(
            self.bwrap, self.runner, command, limits, binds, workdir, report_write, share, cpu_fd
        )
        argv = [*self.launcher(group), *argv]
        try:
            with (
                sealed_input(stdin) as stdin_file,
                open_output(stdout) as stdout_file,
                open(stderr, "wb") as stderr_file,
            ):
                process = subprocess.Popen(
                    argv,
                    stdin=stdin_file,
                    stdout=stdout_file,
                    stderr=stderr_file,
                    pass_fds=(
                        report_write,
                        *(group.procs_fds if group else ()),
                        *((share[0],) if share else ()),
                        *((cpu_fd,) if cpu_fd >= 0 else ()),
                    ),
                    start_new_session=True,
                    env={"PATH": SANDBOX_PATH, "LANG": "C"},
                )
        except OSError as error:
            os.close(report_read)
            os.close(report_write)
            if is_resource_exhaustion(error):
                raise
            return RunOutcome(
                INTERNAL_ERROR, f"cannot start bwrap: {error}", None, None, 0, 0, 0, 0
            )
        finally:
            if group is not None:
                group.close_fds()
        os.close(report_write)
        self.track(process.pid)
        backstop = threading.Timer(
            limits.backstop_seconds + _REPORT_FD_GRACE, kill_group, (process.pid,)
        )
        backstop.start()
        started = time.monotonic()
        try:
            _, wait_status, _ = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(wait_status)
        finally:
            backstop.cancel()
            self.untrack(process.pid)
            report_text = drain(report_read)
        wall = time.monotonic() - started
        usage = group.usage() if group is not None else None
        stdout_bytes = stdout.stat().st_size if isinstance(stdout, Path) else 0
        return outcome_of(
            report_text, process.returncode, stderr, limits, wall, stdout_bytes, usage, cap
        )

    def close(self) -> None:
        """Refuse new programs and kill every sandbox still running (service shutdown)."""
        with self._lock:
            self._closed = True
            live = list(self._live)
        for pid in live:
            kill_group(pid)

    def track(self, pid: int) -> None:
        """A started bubblewrap (its process group), killed by `close`; at once if closed."""
        with self._lock:
            self._live.add(pid)
            if self._closed:
                kill_group(pid)

    def untrack(self, pid: int) -> None:
        with self._lock:
            self._live.discard(pid)

    def launcher(self, group: RunGroup | None) -> list[str]:
        """`judge-runner --launch`: enter the run's groups and, as root, become the sandbox uid
        before bubblewrap starts. Done there, not by `subprocess` (whose `user=` makes it copy
        the whole judge with fork() rather than vfork: about 5-20 ms of CPU per run)."""
        fds = ",".join(str(fd) for fd in group.procs_fds) if group is not None else "-"
        uid, gid = (self.uid, self.gid) if self._as_root else (-1, -1)
        return [str(self.runner), "--launch", str(uid), str(gid), fds or "-", "--"]


def new_group(
    bound: CgroupBound | None, limits: Limits
) -> tuple[RunGroup | None, RunOutcome | None]:
    """A run's own cgroup (None without a bound), or the INTERNAL_ERROR outcome of a run whose
    group could not be made; a judge out of descriptors, memory or disk raises (passing)."""
    try:
        return (bound.create(limits.memory_bytes, limits.processes) if bound else None), None
    except OSError as error:
        if is_resource_exhaustion(error):
            raise
        detail = f"cannot create the run's cgroup: {error}"
        return None, RunOutcome(INTERNAL_ERROR, detail, None, None, 0, 0, 0, 0)


def remove_group(group: RunGroup | None) -> None:
    """Remove a finished run's group, killing what is left in it."""
    if group is None:
        return
    try:
        group.remove()
    except OSError as error:  # a leftover empty group is not the program's fault
        log.warning("cannot remove the run's cgroup: %s", error)


def outcome_of(
    report_text: str,
    returncode: int,
    stderr: Path,
    limits: Limits,
    wall: float,
    stdout_bytes: int,
    usage: GroupUsage | None,
    cap: int,
) -> RunOutcome:
    """What one run's runner reported (`started` and the report line, or less), its group's
    usage and its output's size, as an outcome (see `Sandbox.execute`)."""
    report = Report.parse(report_text)
    if report is None:
        return _unreported(returncode, report_text, stderr, limits, wall, stdout_bytes, usage)
    if usage is not None and usage.peak_bytes:
        report = dataclasses.replace(report, memory_bytes=usage.peak_bytes)
    oom_kills = usage.oom_kills if usage is not None else 0
    for_others = usage is not None and usage.killed_for_others
    status, detail = classify(report, limits, stdout_bytes, cap, oom_kills, for_others)
    return RunOutcome(
        status,
        detail,
        report.exit_code,
        report.signal,
        report.cpu_ns,
        report.wall_ns,
        report.memory_bytes,
        stdout_bytes,
        report.wait_ns,
    )


def _unreported(
    returncode: int,
    report_text: str,
    stderr: Path,
    limits: Limits,
    wall: float,
    size: int,
    usage: GroupUsage | None,
) -> RunOutcome:
    """No runner report: a sandbox that never started is the judge's fault; a started one
    whose runner vanished was killed at the memory bound (the group counted OOM kills), by
    the judge's timer after the backstop (the runner itself got no CPU: STARVED), or
    stopped or killed from inside, which is the program's fault."""
    wall_ns = round(wall * 1e9)
    peak = usage.peak_bytes if usage is not None else 0
    if usage is not None and usage.killed_for_others:
        detail = judge_memory(usage.oom_kills, peak, limits.memory_bytes)
        return RunOutcome(JUDGE_MEMORY, detail, None, None, 0, wall_ns, peak, size)
    if usage is not None and usage.oom_kills and report_text.startswith("started\n"):
        detail = memory_exceeded(usage.oom_kills, limits.memory_bytes)
        return RunOutcome(MEMORY_LIMIT, detail, None, None, 0, wall_ns, peak, size)
    if not report_text.startswith("started\n"):
        with open(stderr, "rb") as file:
            message = file.read(2000).decode("utf-8", "replace").strip()
        return RunOutcome(
            INTERNAL_ERROR,
            f"bwrap failed (status {returncode}): {message}",
            None,
            None,
            0,
            wall_ns,
            0,
            size,
        )
    if wall >= limits.backstop_seconds:
        detail = starved(wall_ns, 0, 0, limits)
        return RunOutcome(STARVED, detail, None, None, 0, wall_ns, peak, size)
    if wall >= limits.wall_seconds:
        detail = f"killed at the wall-clock limit of {limits.wall_seconds:g} s"
        return RunOutcome(TIME_LIMIT, detail, None, None, 0, wall_ns, peak, size)
    detail = "the sandbox supervisor was killed from inside the sandbox"
    return RunOutcome(SIGNALLED, detail, None, signal.SIGKILL, 0, wall_ns, peak, size)


def _require_bwrap_version(bwrap: str) -> None:
    """bubblewrap 0.8 or newer: older ones lack `--disable-userns`."""
    result = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False)
    words = result.stdout.split()
    try:
        version = tuple(int(part) for part in words[-1].split(".")[:2])
    except (IndexError, ValueError):
        version = (0, 0)
    if version < MIN_BWRAP_VERSION:
        found = words[-1] if words else "unknown"
        raise SandboxUnavailable(
            f"{bwrap} is version {found}; the sandbox needs bubblewrap 0.8 or newer "
            "(for --disable-userns): install a newer bubblewrap package"
        )


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
