"""One sandbox for every case of a submission: started once, put back as it was after each case.

Starting a sandbox costs more CPU than running a short case in it (bubblewrap's namespaces and
mounts, two executions of judge-runner, a process from the judge; about 8-10 ms against a
Polyomino case's 3 ms). A `SandboxSession` starts the same sandbox as `Sandbox.execute` — the
same bubblewrap command line (`judges.sandbox.argv`), the same binds, as the same uid — once,
with judge-runner as PID 1 in its session mode (judges/sandbox/runner.cpp, "sessions"), and
then hands it one run at a time over a socket: the limits, the command, and the descriptors of
the run's stdin (a sealed copy), stdout and stderr files and cgroup. Each run is supervised and
reported exactly as a run of its own is (`judges.sandbox.runner.outcome_of` reads both), in a
cgroup of its own made by the judge for that run, which only the program enters: the memory, process
and CPU bounds, the peak, the OOM kills and the CPU counter are that run's alone.

Between two cases the runner puts back what a case can change: every process it started is
killed, everything under /tmp (the only writable place, and the working directory) is removed,
/tmp's extended attributes and ACLs removed (their memory with them), its mode restored and its
times set anew, and every System V IPC object is removed; POSIX message queues cannot be made
(RLIMIT_MSGQUEUE is 0 for every run) nor the kernel's keyrings used (seccomp, every run). A
runner that cannot put all of that back says so (`clean=0`), and that sandbox is ended: the
next case gets a fresh one. So does any run whose runner stopped answering, died, or answered
what the judge cannot read. A sandbox is never shared between submissions.

What a kept sandbox cannot put back cheaply — the PID counter, tmpfs inode numbers, System V
ids, the loopback's counters, measured in judges/MEASUREMENTS.md — still carries numbers from
one case to the next, so a verdict could depend on the cases before it. The judge therefore
starts a sandbox per run; kept sandboxes are used only under the test switch `kept-sandbox`
(`judges.service.testing`), where tests hold their resets.

`SessionPool` keeps a submission's idle sandboxes (one per case running at once, at most the
judge's worker count) and ends them all when its cases are done.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

from judges.cgroups.groups import RunGroup
from judges.sandbox.argv import SANDBOX_PATH, bwrap_session_argv, runner_limits
from judges.sandbox.outcome import Limits, RunOutcome, is_resource_exhaustion
from judges.sandbox.runner import Sandbox, kill_group, new_group, outcome_of, remove_group
from judges.sandbox.streams import open_output, sealed_input

log = logging.getLogger("judges.sandbox.session")

SESSION_MEMORY = 256 << 20  # bubblewrap and the runner (its /tmp listing at most); not the runs'
SESSION_PROCESSES = 4  # bubblewrap, the runner, a run's process before it enters its own group
ANSWER_GRACE = 5.0  # seconds past a run's backstop before the judge ends its sandbox
START_TIMEOUT = 30.0  # seconds for a sandbox to start


class SessionBroken(RuntimeError):
    """The session's sandbox cannot be used (it did not start, or it ended)."""


class SandboxSession:
    """A sandbox kept for one submission's runs (module docstring). Not thread-safe: one run at
    a time, which `SessionPool` ensures."""

    def __init__(
        self,
        sandbox: Sandbox,
        binds: list[tuple[str, Path, str]],
        tmpfs_bytes: int,
        workdir: str = "/tmp",
    ) -> None:
        self.sandbox = sandbox
        self.tmpfs_bytes = tmpfs_bytes
        self.usable = False
        self._log = sandbox.scratch / f"session-{id(self):x}.log"
        self._group: RunGroup | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._control, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._start(binds, workdir, inside)
        except BaseException:
            self.close()
            raise
        finally:
            inside.close()

    def _start(
        self, binds: list[tuple[str, Path, str]], workdir: str, inside: socket.socket
    ) -> None:
        sandbox = self.sandbox
        if sandbox.bound is not None:
            self._group = sandbox.bound.create(SESSION_MEMORY, SESSION_PROCESSES)
        argv = bwrap_session_argv(
            sandbox.bwrap, sandbox.runner, self.tmpfs_bytes, binds, workdir, inside.fileno()
        )
        argv = [*sandbox.launcher(self._group), *argv]
        try:
            with open(self._log, "wb") as log:
                self._process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    pass_fds=(inside.fileno(), *(self._group.procs_fds if self._group else ())),
                    start_new_session=True,
                    env={"PATH": SANDBOX_PATH, "LANG": "C"},
                )
        finally:
            if self._group is not None:
                self._group.close_fds()
        sandbox.track(self._process.pid)
        self._control.settimeout(START_TIMEOUT)
        try:
            first = self._control.recv(64)
        except TimeoutError:
            first = b""
        if first != b"started\n":
            raise SessionBroken(f"the sandbox did not start: {self._reason()}")
        self.usable = True

    def _reason(self) -> str:
        """bubblewrap's or the runner's own words on why the sandbox ended (its log)."""
        with contextlib.suppress(OSError), open(self._log, "rb") as file:
            text = file.read(2000).decode("utf-8", "replace").strip()
            if text:
                return text
        return "no message"

    def run(
        self,
        command: list[str],
        *,
        limits: Limits,
        stdin: bytes | Path | None,
        stdout: Path,
        stderr: Path,
        output_cap: int | None = None,
    ) -> RunOutcome:
        """One run in this sandbox, with `Sandbox.execute`'s meaning of every argument and of
        the outcome. SessionBroken when the sandbox cannot take it (nothing was run); a run
        during which the sandbox ended has the outcome a run of its own would have."""
        if not self.usable:
            raise SessionBroken("the session's sandbox has ended")
        group, failed = new_group(self.sandbox.bound, limits)
        if failed is not None:
            return failed
        try:
            return self._run(command, limits, stdin, stdout, stderr, group, output_cap)
        finally:
            remove_group(group)

    def _run(
        self,
        command: list[str],
        limits: Limits,
        stdin: bytes | Path | None,
        stdout: Path,
        stderr: Path,
        group: RunGroup | None,
        output_cap: int | None,
    ) -> RunOutcome:
        cap = limits.file_bytes - 1 if output_cap is None else output_cap
        cpu_fd = -1
        if group is not None and group.cpu_path is not None:
            cpu_fd = os.open(group.cpu_path, os.O_RDONLY | os.O_CLOEXEC)
        procs = group.procs_fds if group is not None else []
        head = " ".join(["run", *runner_limits(limits), str(len(procs)), str(int(cpu_fd >= 0))])
        payload = b"".join(word.encode() + b"\0" for word in [head, *command])
        try:
            with (
                sealed_input(stdin) as stdin_file,
                open_output(stdout) as stdout_file,
                open(stderr, "wb") as stderr_file,
            ):
                fds = [stdin_file.fileno(), stdout_file.fileno(), stderr_file.fileno()]
                fds += [cpu_fd] if cpu_fd >= 0 else []
                socket.send_fds(self._control, [payload], [*fds, *procs])
        except OSError as error:
            self.usable = False
            if is_resource_exhaustion(error):
                raise
            raise SessionBroken(f"cannot hand the run to the sandbox: {error}") from error
        finally:
            if cpu_fd >= 0:
                os.close(cpu_fd)
            if group is not None:
                group.close_fds()
        started = time.monotonic()
        answer = self._answer(limits.backstop_seconds + ANSWER_GRACE)
        wall = time.monotonic() - started
        if not answer:
            self.close(kill=True)  # no answer in time, or the sandbox ended: nothing runs on
        elif not answer.endswith(" clean=1\n"):
            self.close()  # not put back as it was: the next run gets a fresh sandbox
        usage = group.usage() if group is not None else None
        size = stdout.stat().st_size
        report = "started\n" + answer.replace(" clean=1\n", "\n").replace(" clean=0\n", "\n")
        return outcome_of(report, -1, self._log, limits, wall, size, usage, cap)

    def _answer(self, timeout: float) -> str:
        """The runner's report line; "" when it did not come in time or the sandbox ended."""
        self._control.settimeout(timeout)
        try:
            return self._control.recv(4096).decode("utf-8", "replace")
        except (TimeoutError, OSError):
            return ""

    def close(self, kill: bool = False) -> None:
        """End the sandbox (its runner sees the socket close; killed after a few seconds, or
        at once with `kill`) and its group."""
        self.usable = False
        with contextlib.suppress(OSError):
            self._control.close()
        process = self._process
        if process is not None:
            if kill:
                kill_group(process.pid)
            try:
                process.wait(timeout=ANSWER_GRACE)
            except subprocess.TimeoutExpired:
                kill_group(process.pid)
                process.wait()
            self.sandbox.untrack(process.pid)
            self._process = None
        if self._group is not None:
            self._group.remove()
            self._group = None
        with contextlib.suppress(OSError):
            self._log.unlink()


class SessionPool:
    """A submission's sandboxes for its runs of one program (`binds`), one per run at a time."""

    def __init__(self, sandbox: Sandbox, binds: list[tuple[str, Path, str]]) -> None:
        self.sandbox = sandbox
        self.binds = binds
        self.started = 0
        self._idle: list[SandboxSession] = []
        self._lock = threading.Lock()

    def execute(
        self,
        command: list[str],
        *,
        limits: Limits,
        stdin: bytes | Path | None,
        stdout: Path,
        stderr: Path,
        binds: list[tuple[str, Path, str]],
        output_cap: int | None = None,
    ) -> RunOutcome:
        """`Sandbox.execute` in one of the pool's sandboxes (`binds` must be the pool's); a
        sandbox that cannot be started or used gives way to a run of its own."""
        assert binds == self.binds, "a pool's sandboxes hold one program"
        try:
            session = self._take(limits.tmpfs_bytes)
        except SessionBroken as error:
            log.warning("%s; this run gets a sandbox of its own", error)
            session = None
        if session is not None:
            try:
                return session.run(
                    command,
                    limits=limits,
                    stdin=stdin,
                    stdout=stdout,
                    stderr=stderr,
                    output_cap=output_cap,
                )
            except SessionBroken:
                session.close()
            finally:
                self._give_back(session)
        return self.sandbox.execute(
            command,
            limits=limits,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            binds=binds,
            output_cap=output_cap,
        )

    def _take(self, tmpfs_bytes: int) -> SandboxSession:
        with self._lock:
            for index, session in enumerate(self._idle):
                if session.tmpfs_bytes == tmpfs_bytes:
                    return self._idle.pop(index)
            self.started += 1
        return SandboxSession(self.sandbox, self.binds, tmpfs_bytes)

    def _give_back(self, session: SandboxSession) -> None:
        if not session.usable:
            session.close()
            return
        with self._lock:
            self._idle.append(session)

    def close(self) -> None:
        """End every idle sandbox (the submission's runs are done)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for session in idle:
            session.close()
