"""What a sandboxed program did: its limits, the runner's report, and the classification.

Pure values and functions, no processes: `judges.sandbox.runner` fills them in. Statuses follow
go-judge's names, as the FrontierCS judge reports them before its own remapping.
"""

from __future__ import annotations

import errno
import signal
from dataclasses import dataclass

ACCEPTED = "Accepted"
TIME_LIMIT = "Time Limit Exceeded"
MEMORY_LIMIT = "Memory Limit Exceeded"
OUTPUT_LIMIT = "Output Limit Exceeded"
NONZERO_EXIT = "Nonzero Exit Status"
SIGNALLED = "Signalled"
INTERNAL_ERROR = "Internal Error"
# Ours, never a case verdict: the host kept the run from its CPU until the real-time backstop
# (see `Limits.backstop_seconds`); the engine judges the submission again later.
STARVED = "Starved of CPU"
# Ours, never a case verdict: the kernel OOM-killed a process of the run below the run's own
# memory bound, because the judge's cgroup or the host ran out of memory (a compile as much as a
# case); the engine judges the submission again later.
JUDGE_MEMORY = "Judge Out of Memory"

# The real-time backstop of a run, in multiples of its wall-clock limit: the wall-clock limit
# counts only the time the program ran or was idle, never the time it waited for a CPU (host
# load), so on a loaded host a run may take longer than that limit, up to this many times it.
BACKSTOP_FACTOR = 10

_RESOURCE_ERRNOS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, errno.ENOSPC, errno.EDQUOT}
)


def is_resource_exhaustion(error: BaseException) -> bool:
    """True for an OSError meaning the judge itself ran out of descriptors, memory or disk:
    nobody's fault and passing (the service answers 503; the engine judges again later)."""
    return isinstance(error, OSError) and error.errno in _RESOURCE_ERRNOS


# A run that fails after using this much of its address-space limit is reported as a memory
# failure: under RLIMIT_AS the program sees allocation failures, not a kill by the judge.
_MEMORY_FAILURE_FRACTION = 0.9


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed program and its children."""

    cpu_seconds: float
    wall_seconds: float
    memory_bytes: int  # the run's cgroup memory bound, and RLIMIT_AS unless address_space=False
    processes: int  # RLIMIT_NPROC, counted inside the sandbox's user namespace
    file_bytes: int  # RLIMIT_FSIZE: caps every file written, stdout and stderr included
    tmpfs_bytes: int  # size of the private /tmp
    stack_bytes: int = 0  # RLIMIT_STACK; 0 keeps the default
    # False leaves the address space unlimited, for runtimes that reserve large virtual areas
    # (e.g. Python with numpy); only sound where a cgroup bounds the run's memory.
    address_space: bool = True

    @property
    def backstop_seconds(self) -> float:
        """Real time after which the run is stopped however long it waited for a CPU."""
        return self.wall_seconds * BACKSTOP_FACTOR


@dataclass(frozen=True)
class RunOutcome:
    """What happened to one sandboxed program, with a go-judge style status."""

    status: str
    detail: str
    exit_code: int | None
    signal: int | None
    cpu_ns: int
    wall_ns: int
    memory_bytes: int
    stdout_bytes: int
    wait_ns: int = 0  # time the run was ready to run but waited for a CPU (host load)

    @property
    def accepted(self) -> bool:
        """True when the program finished normally within every limit."""
        return self.status == ACCEPTED


@dataclass(frozen=True)
class Report:
    """The runner's account of the program: exit status or signal, usage, wall-clock kill, the
    time it waited for a CPU and whether the real-time backstop stopped it first (`starved`)."""

    exit_code: int | None
    signal: int | None
    cpu_ns: int
    wall_ns: int
    memory_bytes: int
    timed_out: bool
    wait_ns: int = 0
    starved: bool = False

    @classmethod
    def parse(cls, text: str) -> Report | None:
        """Parse the runner's `started` line and report line; None if missing or malformed."""
        lines = text.split("\n")
        if len(lines) != 3 or lines[0] != "started" or lines[2] != "":
            return None
        try:
            fields = dict(item.split("=", 1) for item in lines[1].split())
            exit_code, sig = int(fields["exit"]), int(fields["signal"])
            return cls(
                exit_code=exit_code if exit_code >= 0 else None,
                signal=sig or None,
                cpu_ns=int(fields["cpu_ns"]),
                wall_ns=int(fields["wall_ns"]),
                memory_bytes=int(fields["maxrss_kb"]) * 1024,
                timed_out=fields["timed_out"] == "1",
                wait_ns=int(fields["wait_ns"]),
                starved=fields["starved"] == "1",
            )
        except (KeyError, ValueError):
            return None


def classify(
    report: Report,
    limits: Limits,
    stdout_bytes: int,
    output_cap: int,
    oom_kills: int = 0,
    killed_for_others: bool = False,
) -> tuple[str, str]:
    """Status and human-readable detail of a finished program (pure function).

    Order: memory (the run's cgroup killed a process at its bound), time (CPU over the limit,
    SIGXCPU), starved (the real-time backstop stopped it before its own time reached the
    wall-clock limit: not a verdict), time (wall-clock kill), output (over the cap, SIGXFSZ),
    memory (failed near the limit), signal, exit status, accepted. `report.memory_bytes` is the
    run's peak (the group's). `killed_for_others`: the OOM kills came while the run was below
    its own bound (`judges.cgroups.groups.GroupUsage.killed_for_others`): JUDGE_MEMORY, first.
    """
    cpu = report.cpu_ns / 1e9
    sig = report.signal
    if killed_for_others:
        return JUDGE_MEMORY, judge_memory(oom_kills, report.memory_bytes, limits.memory_bytes)
    if oom_kills:
        return MEMORY_LIMIT, memory_exceeded(oom_kills, limits.memory_bytes)
    if cpu > limits.cpu_seconds or sig == signal.SIGXCPU:
        return TIME_LIMIT, f"CPU time {cpu:.3f} s exceeds the limit of {limits.cpu_seconds:g} s"
    if report.starved:
        return STARVED, starved(report.wall_ns, report.cpu_ns, report.wait_ns, limits)
    if report.timed_out:
        return TIME_LIMIT, (
            f"killed at the wall-clock limit of {limits.wall_seconds:g} s "
            f"({cpu:.3f} s of CPU; {report.wait_ns / 1e9:.3f} s spent waiting for a CPU "
            "are not counted)"
        )
    if stdout_bytes > output_cap:
        return OUTPUT_LIMIT, f"output exceeds the limit of {output_cap} bytes"
    if sig == signal.SIGXFSZ:
        limit = limits.file_bytes
        return OUTPUT_LIMIT, f"a file it wrote exceeds the file-size limit of {limit} bytes"
    failed = sig is not None or report.exit_code != 0
    if failed and report.memory_bytes >= _MEMORY_FAILURE_FRACTION * limits.memory_bytes:
        return MEMORY_LIMIT, (
            f"failed after using {report.memory_bytes} bytes of the "
            f"{limits.memory_bytes}-byte memory limit"
        )
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return SIGNALLED, f"killed by {name} ({sig})"
    if report.exit_code != 0:
        return NONZERO_EXIT, f"exit status {report.exit_code}"
    return ACCEPTED, "exit status 0"


def starved(wall_ns: int, cpu_ns: int, wait_ns: int, limits: Limits) -> str:
    """The detail of a run the host kept from its CPU until the real-time backstop."""
    return (
        f"stopped by the real-time backstop of {limits.backstop_seconds:g} s after "
        f"{wall_ns / 1e9:.3f} s, with {cpu_ns / 1e9:.3f} s of CPU and {wait_ns / 1e9:.3f} s "
        f"waiting for a CPU: the host is too loaded to judge it within its "
        f"{limits.wall_seconds:g} s wall-clock limit"
    )


def judge_memory(oom_kills: int, peak_bytes: int, limit_bytes: int) -> str:
    """The detail of a run whose processes the kernel killed for the judge's lack of memory."""
    return (
        f"the kernel killed {oom_kills} of the run's processes at {peak_bytes} bytes, below "
        f"its memory limit of {limit_bytes} bytes: the judge's cgroup or the host ran out of "
        "memory (not the program's fault)"
    )


def memory_exceeded(oom_kills: int, limit_bytes: int) -> str:
    """The detail of a run whose cgroup reached its memory bound and killed its processes."""
    return (
        f"the run's processes together reached the memory limit of {limit_bytes} bytes; "
        f"the kernel killed {oom_kills} of them"
    )
