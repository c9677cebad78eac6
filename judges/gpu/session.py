"""The trusted side of one submission's protocol: set up a case, make one call, read it back.

One call, as the trusted process makes it (the inputs and the reference output are already
computed, in its own memory):

1. `arm`: the worker builds the call's tensors (views of the pool) and says it is spinning;
2. check that the GPU is idle (the "early" probe below); start the clock, copy the inputs into
   the case's shared pool and write GO. The inputs arrive after the clock starts, so nothing of
   the candidate can use them outside its call, and the worker spins through the copy rather
   than being stopped for it (a process stopped between calls starts the next on a host path
   gone cold: on an H200 a `torch.compile` candidate was charged 1-3 % more,
   judges/MEASUREMENTS.md);
3. spin until the worker writes DONE (or the call's time limit passes, or the sandbox dies);
   stop the clock (Python's cyclic garbage collector is held off from GO until the output is
   described, so none of its pauses in this process is charged to the call);
4. while the worker exports the output's memory, and until the GPU is idle, probe it (the
   "late" probe); then map the output, copy it out and compare the copy with the reference.

A probe is a one-element kernel of the trusted process, launched and waited for; on an idle GPU
it takes a few microseconds (`IdleProbe.calibrate`, before the candidate starts). The GPU runs
one process's work at a time, so a probe submitted while work of the candidate is still running
waits for it (or for its time slice to end). The wait beyond the calibrated probe time is GPU
time the candidate used outside its call: work left running after DONE, or kept running
between calls; it is added to the call's charged time. Probing goes on until a probe comes back
on time, so all such work is charged, and an output still being written when DONE came is
either caught half-done by the copy or finished, and paid for, before it.

The wall time from DONE to DESCRIBED (the worker exporting its output) is charged too, beyond
the median of the calibration calls' and the slack: work done there on the CPU (an output
computed after the worker said DONE) is not seen by the probes. Of the late probes' charge and
this window's, the larger is charged (they overlap). `recheck` copies the last call's output
again after a pause and compares it once more, so an output that was right only at the moment
of its copy fails (judges/README.md, "Guards").
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from judges.gpu.compare import compare
from judges.gpu.launch import CandidateProcess
from judges.gpu.sandboxed import control as ctl
from judges.gpu.sandboxed import layout
from judges.gpu.sandboxed.channel import Channel, ChannelClosed
from judges.gpu.sandboxed.transport import TransportError

PROBE_SLACK_NS = 25_000  # a probe this much slower than calibrated means the GPU was busy
# Probe waits before a call, and after it beyond the calibrated allowance, are charged beyond a
# slack of 25 us or 3 % of the call's clock, whichever is larger: switching the GPU between the
# two processes takes longer the more memory the candidate's work touched (measured on the H200:
# judges/README.md), and honest calls must not pay for that.
EARLY_SLACK_NS = 25_000
LATE_SLACK_NS = 25_000
WINDOW_SLACK_NS = 25_000
SLACK_FRACTION = 0.03
MIN_CHARGE_NS = 1_000
ANSWER_TIMEOUT = 20.0  # seconds for the worker's replies outside the timed call
MESSAGE_LIMIT = 3500  # characters of a failure's message the worker sent (failure.describe)
# Work the candidate does outside its calls — GPU work before a call or still running after it,
# host work between its DONE and its output's description — is charged to the call it touches,
# and beyond this much in one trial (honest calls: none beyond the slacks) the trial ends as
# Time Limit Exceeded, so that such a candidate does not hold the GPU for every call's limit.
OUTSIDE_LIMIT_NS = 2_000_000_000
FREEZE_TIMEOUT_S = 1.0  # to stop every process of the sandbox for the recheck (tried twice)
RECHECK_AFTER_S = 0.05  # the pause before the last timed call's output is compared again

ACCEPTED = "Accepted"
WRONG = "Wrong Answer"
RUNTIME_ERROR = "Runtime Error"
TIME_LIMIT = "Time Limit Exceeded"
MEMORY_LIMIT = "Memory Limit Exceeded"
ENDED = "Sandbox Ended"


class FreezeFailed(RuntimeError):
    """The candidate's processes could not be stopped for the recheck, twice: the judge's
    failure for this trial (its record is a judge error), never a verdict on the candidate."""


@dataclass(frozen=True)
class Null:
    """Medians of calls of the worker's own one-kernel entry: clock, late probes, window."""

    clock_ns: float
    late_ns: float
    window_ns: float

    @classmethod
    def median(cls, outcomes: list[CallOutcome]) -> Null:
        return cls(
            statistics.median(o.clock_ns for o in outcomes),
            statistics.median(o.late_ns for o in outcomes),
            statistics.median(o.window_ns for o in outcomes),
        )

    @classmethod
    def lowest(cls, outcomes: list[CallOutcome]) -> Null:
        return cls(
            min(o.clock_ns for o in outcomes),
            min(o.late_ns for o in outcomes),
            min(o.window_ns for o in outcomes),
        )


@dataclass(frozen=True)
class CallOutcome:
    """One call: how it ended, the charged and measured times, and the comparison's detail.
    `worker_ns` are the worker's own (untrusted, diagnostic) durations: call, sync, export."""

    status: str
    detail: str
    charged_ns: int = 0
    clock_ns: int = 0
    early_ns: int = 0
    late_ns: int = 0
    max_error: float = 0.0
    worker_ns: tuple[int, int, int] = (0, 0, 0)
    window_ns: int = 0  # DONE -> DESCRIBED, wall clock, as the trusted process saw it

    @property
    def passed(self) -> bool:
        return self.status == ACCEPTED


def charged_waits(clock_ns: int, early_ns: int, late_ns: int, window_ns: int = 0) -> int:
    """The waits charged to a call: the early probes beyond their slack, plus the larger of
    the late probes and the DONE -> DESCRIBED window, each beyond its slack (SLACK_FRACTION;
    `late_ns` and `window_ns` already less their calibrated allowances)."""
    fraction = round(SLACK_FRACTION * clock_ns)
    after = max(late_ns - max(LATE_SLACK_NS, fraction), window_ns - max(WINDOW_SLACK_NS, fraction))
    return max(0, early_ns - max(EARLY_SLACK_NS, fraction)) + max(0, after)


class IdleProbe:
    """A one-element kernel, launched and waited for, to find out whether the GPU is idle."""

    def __init__(self, device: str, sync: Any) -> None:
        self.flag = torch.zeros(1, dtype=torch.int32, device=device)
        self.sync = sync
        self.median_ns = 0.0
        self.gpu_ns = 0.0  # the kernel itself, as CUDA events around it count it

    def once(self) -> int:
        started = time.perf_counter_ns()
        self.flag.add_(1)
        self.sync()
        return time.perf_counter_ns() - started

    def calibrate(self, count: int = 200) -> dict[str, float]:
        for _ in range(20):
            self.once()
        samples = sorted(self.once() for _ in range(count))
        self.median_ns = statistics.median(samples)
        self.gpu_ns = self._event_timed(count)
        return {
            "medianUs": self.median_ns / 1e3,
            "p99Us": samples[int(0.99 * count)] / 1e3,
            "gpuUs": self.gpu_ns / 1e3,
        }

    def _event_timed(self, count: int) -> float:
        """The median time CUDA events recorded around the kernel give it: what a plain
        event loop charges a call that runs only this kernel."""
        times = []
        for _ in range(count):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            self.flag.add_(1)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e6)
        return statistics.median(times)

    def busy_ns(self, duration: int) -> int:
        """The part of one probe's time that was spent waiting for other work (0 if on time)."""
        if duration <= self.median_ns + PROBE_SLACK_NS:
            return 0
        return round(duration - self.median_ns)

    def until_idle(self, timeout: float, keep_going: Any = None) -> int:
        """Probe until one comes back on time (and `keep_going()` is False); the summed waits."""
        waited = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            extra = self.busy_ns(self.once())
            waited += extra
            if extra == 0 and not (keep_going is not None and keep_going()):
                break
        return waited


class Session:
    """The trusted side of the protocol with one running candidate sandbox."""

    def __init__(
        self,
        transport: Any,
        block: ctl.Control,
        link: Channel,
        candidate: CandidateProcess,
        probe: IdleProbe | None,
        call_timeout: float,
        rtol: float,
        atol: float,
        compile_budget: float = 0.0,
    ) -> None:
        self.transport = transport
        self.block = block
        self.link = link
        self.candidate = candidate
        self.probe = probe  # None: no early/late charge (the CPU stand-in)
        self.call_timeout = call_timeout
        # the untimed first calls of a trial's shapes together (where kernels compile and
        # autotune) may take this long, each at least `call_timeout` (`call(first=True)`)
        self.compile_budget = compile_budget
        self.compile_used_s = 0.0
        self.outside_ns = 0  # charged work outside the candidate's calls so far (the limit)
        self.rtol, self.atol = rtol, atol
        self.seq = 0
        self._case: dict[str, Any] | None = None
        # the null calls' medians (clock, late probes, window) from `calibrate`, and per case
        # how much more (or less) its own null calls took than those (`calibrate_case`)
        self.null = Null(0, 0, 0)
        self.null_lowest = Null(0, 0, 0)
        self.case_deltas: dict[int, Null] = {}
        self.clock_offset_ns = 0  # the protocol's own cost, subtracted from the clock
        self.late_allowance_ns = 0
        self.window_allowance_ns = 0
        # the last checked call: its output's descriptor, the reference, the copy compared
        self.last: tuple[Any, torch.Tensor, torch.Tensor] | None = None
        # the last call's host steps, wall clock (ns): inputs packed, worker armed, the GPU
        # probed idle (to the clock's start), DONE -> DESCRIBED seen, output copied and compared
        self.steps: dict[str, int] = {}

    def calibrate(self, calls: int = 30) -> dict[str, float]:
        """Time calls of the worker's own one-kernel entry (before the candidate is imported,
        so nothing of it runs yet): the clock's median over what CUDA events around a
        one-element kernel count (`IdleProbe.gpu_ns`: what a plain event loop charges such a
        call) is the protocol's own cost — copying the inputs in, the worker seeing GO,
        switching the GPU to its process, launching, seeing DONE — and is subtracted from
        every call's clock; the median of the late probes after such a call (the GPU switching
        back) is allowed for before late work is charged. (Until 2026-12-02 the probe's wall
        time, launch and wait included, was subtracted instead: 10-18 us too little, charged on
        every call.)
        A case calibrated by `calibrate_case` gets its own offsets on top (`use_case`)."""
        outcomes = self._null_calls(
            lambda _: (torch.zeros(16, device=self.transport.device),), calls
        )
        if isinstance(outcomes, str):
            return {"failed": outcomes}
        self.null = Null.median(outcomes)
        self.null_lowest = Null.lowest(outcomes)
        self.use_case(None)
        return {
            "calls": calls,
            "nullClockUs": self.null.clock_ns / 1e3,
            "probeGpuUs": self._own_ns() / 1e3,
            "clockOffsetUs": self.clock_offset_ns / 1e3,
            "lateAllowanceUs": self.late_allowance_ns / 1e3,
            "windowAllowanceUs": self.window_allowance_ns / 1e3,
            "nullEarlyUs": statistics.median(o.early_ns for o in outcomes) / 1e3,
        }

    def calibrate_case(self, index: int, prepare: Any, calls: int) -> dict[str, float]:
        """Null calls on case `index`'s own pool, each made right after `prepare(i)` (the
        case's inputs generated and its reference computed, as before every real call of
        the case). The worker's null entry copies the call's largest input, so these calls
        read the case's memory and write an output of its size, as a real call does: the GPU
        switching into the worker's process costs more the more memory the call touches and
        after the trusted process's own work on a large case (measured on the H200: 206-350
        us of clock beyond the kernels on real calls against 153-190 us for the plain null
        calls, judges/README.md). The copy's own kernel time, as CUDA events count it in this
        process right after the pool is written (`_copy_ns`: what a plain event loop would
        charge it), is taken off, so each case's clock offset is the plain one plus how much
        more the switching, and copying the case's inputs into its pool (inside the clock),
        cost its null calls than the plain null calls measured just before (`calibrate`
        first): the fastest of each against the fastest of the other, since a call is only
        ever slowed by what else the host does, so a case's offset never grows with a slow
        moment during its calibration (on the H200 a median of five once gave one benchmark
        150 us more offset than the others). Before the candidate is imported, like
        `calibrate`."""
        copies: list[float] = []
        outcomes = self._null_calls(prepare, calls, lambda: copies.append(self._copy_ns(calls)))
        if isinstance(outcomes, str):
            return {"failed": outcomes}
        measured, plain = Null.lowest(outcomes), self.null_lowest
        switching = measured.clock_ns - copies[0] - (plain.clock_ns - self._own_ns())
        self.case_deltas[index] = Null(
            switching, measured.late_ns - plain.late_ns, measured.window_ns - plain.window_ns
        )
        return {
            "calls": calls,
            "lowestNullClockUs": measured.clock_ns / 1e3,
            "copyKernelUs": copies[0] / 1e3,
            "moreThanPlainUs": self.case_deltas[index].clock_ns / 1e3,
        }

    def _copy_ns(self, count: int) -> float:
        """The median time CUDA events give the null entry's copy (of the case's largest
        input) in this process, each right after the case's pool is written as before a call;
        the probe's own kernel time when there is no tensor to copy (the null entry then
        launches one small kernel), 0 without a GPU probe (the CPU stand-in has no offsets)."""
        case = self._case
        assert case is not None, "setup_case first"
        found = layout.largest(layout.rebuild(case["tree"], case["pool"]))
        if self.probe is None or found is None:
            return self._own_ns()
        times = []
        for _ in range(count):
            case["pool"].copy_(case["staging"])
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            copy = found.clone()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e6)
            del copy
        return statistics.median(times)

    def use_case(self, index: int | None) -> None:
        """The offsets of the calls that follow: case `index`'s when it was calibrated, the
        plain null calls' otherwise (None)."""
        delta = self.case_deltas.get(index, Null(0, 0, 0)) if index is not None else Null(0, 0, 0)
        clock = self.null.clock_ns + delta.clock_ns
        self.clock_offset_ns = max(0, round(clock - self._own_ns())) if self.probe else 0
        self.late_allowance_ns = max(0, round(self.null.late_ns + delta.late_ns))
        self.window_allowance_ns = max(0, round(self.null.window_ns + delta.window_ns))

    def case_offsets(self) -> dict[str, dict[str, float]]:
        """Each calibrated case's offsets as `use_case` sets them, for the record."""
        found = {}
        for index in sorted(self.case_deltas):
            self.use_case(index)
            found[str(index)] = {
                "clockOffsetUs": self.clock_offset_ns / 1e3,
                "lateAllowanceUs": self.late_allowance_ns / 1e3,
                "windowAllowanceUs": self.window_allowance_ns / 1e3,
            }
        self.use_case(None)
        return found

    def _own_ns(self) -> float:
        return self.probe.gpu_ns if self.probe else 0.0

    def _null_calls(self, prepare: Any, calls: int, then: Any = None) -> list[CallOutcome] | str:
        """`calls` calls of the worker's own entry on a pool shaped like `prepare(0)`, each
        right after `prepare(i)`, and `then()` before the pool is freed; the first failure's
        detail instead, if one failed."""
        outcome = self.setup_case(prepare(0))
        outcomes = (
            [outcome]
            if not outcome.passed
            else [self.call(prepare(i), None) for i in range(1, calls + 1)]
        )
        if then is not None and all(o.passed for o in outcomes):
            then()
        self.release_case()
        failed = [o for o in outcomes if not o.passed]
        return failed[0].detail if failed else outcomes

    def wait_hello(self, timeout: float) -> CallOutcome:
        """The worker's start-up, before it imports the candidate."""
        try:
            message, _ = self.link.receive(timeout)
        except TimeoutError:
            return CallOutcome(TIME_LIMIT, f"the sandbox did not start within {timeout:g} s")
        except (ChannelClosed, OSError):
            return self._ended("while starting")
        if message["op"] != "hello":
            return CallOutcome(RUNTIME_ERROR, f"unexpected start-up message {message['op']!r}")
        return CallOutcome(ACCEPTED, "hello")

    def wait_ready(self, timeout: float) -> CallOutcome:
        """Import the candidate: ACCEPTED once the worker did."""
        self.link.send({"op": "import"})
        try:
            message, _ = self.link.receive(timeout)
        except TimeoutError:
            return CallOutcome(TIME_LIMIT, f"the candidate was not ready within {timeout:g} s")
        except (ChannelClosed, OSError):
            return self._ended("while starting")
        if message["op"] == "import_failed":
            return CallOutcome(
                RUNTIME_ERROR,
                "the candidate could not be imported: "
                + str(message.get("error", "")).strip()[:MESSAGE_LIMIT],
            )
        if message["op"] != "ready":
            return CallOutcome(RUNTIME_ERROR, f"unexpected start-up message {message['op']!r}")
        return CallOutcome(ACCEPTED, f"ready (torch {message.get('torch')})")

    def setup_case(self, data: Any) -> CallOutcome:
        """Create the case's pool (shared with the worker) for data shaped like `data`."""
        tree, _, nbytes = layout.flatten(data)
        pool, descriptor, fds, token = self.transport.make_pool(nbytes)
        staging = torch.empty(nbytes, dtype=torch.uint8, device=self.transport.device)
        self._case = {"tree": tree, "pool": pool, "token": token, "staging": staging}
        self.link.send({"op": "case", "layout": tree, "pool": descriptor}, fds)
        return self._expect("case_ready")

    def release_case(self, ended: bool = False) -> None:
        """Unmap the pool in the worker, then free it (best effort once the worker is gone).
        `ended`: the trial ends with this case's failed call, so the candidate is killed
        first rather than asked: one stuck in its call, or working after it said it was done,
        would hold the GPU for the answer limit before its sandbox went."""
        case, self._case = self._case, None
        self.last = None
        if case is None:
            return
        self.transport.close_outputs()
        if ended:
            self.candidate.kill()
        elif self.candidate.alive():
            try:
                self.link.send({"op": "release"})
                self._expect("released")
            except (OSError, ChannelClosed):
                pass
        self.transport.free_pool(case["token"])

    def call(self, data: Any, expected: torch.Tensor | None, first: bool = False) -> CallOutcome:
        """One call on `data`, checked against `expected` (module docstring). `first`: an
        untimed first call of its shape, limited by what is left of the compile budget when
        that is more than the call's own limit."""
        case = self._case
        assert case is not None, "setup_case first"
        step = time.perf_counter_ns()
        self.steps = {}
        _, tensors, _ = layout.flatten(data)
        layout.pack(case["staging"], case["tree"], tensors)
        self.transport.synchronize()
        step = self._step("pack", step)
        self.seq += 1
        seq = self.seq
        self.link.send({"op": "arm", "seq": seq})
        if not self.block.wait(ctl.ARMED, seq, ANSWER_TIMEOUT, self.candidate.alive):
            return (
                self._ended("before the call")
                if not self.candidate.alive()
                else CallOutcome(
                    TIME_LIMIT,
                    f"the candidate's process did not answer within {ANSWER_TIMEOUT:g} s",
                )
            )
        step = self._step("arm", step)
        early = 0
        if self.probe is not None:  # the GPU work left running: no longer than the limit
            early = self.probe.until_idle(min(self.call_timeout, self._outside_left_s() + 0.5))
        if not self.candidate.alive():
            return self._ended("before the call")
        if expected is not None and self._outside_left_s() < early / 1e9 - EARLY_SLACK_NS / 1e9:
            return self._outside(early)
        # The clock starts before the inputs arrive (the copy's cost is calibrated like the
        # rest of the protocol's), so the worker, spinning for GO, need not be stopped for it.
        clock_start = self._step("before", step)
        case["pool"].copy_(case["staging"])
        self.transport.synchronize()
        limit = self.call_timeout
        if first:
            limit = max(limit, self.compile_budget - self.compile_used_s)
        collecting = gc.isenabled()
        gc.disable()  # no pause of this process's collector between GO and the description
        try:
            self.block.set(ctl.GO, seq)
            finished = self.block.wait(ctl.DONE, seq, limit, self.candidate.alive)
            clock_ns = time.perf_counter_ns() - clock_start
            described = self._described(seq) if finished else None
        finally:
            if collecting:
                gc.enable()
        if first:
            self.compile_used_s += clock_ns / 1e9
        if not finished:
            if self.candidate.alive():
                return CallOutcome(TIME_LIMIT, self._over_limit(first, limit), clock_ns=clock_ns)
            return self._ended("during the call")
        step = self._step("describe", clock_start + clock_ns)
        if described is None:
            return (
                self._ended("after the call")
                if not self.candidate.alive()
                else CallOutcome(
                    TIME_LIMIT,
                    f"the worker did not describe its output within {ANSWER_TIMEOUT:g} s of "
                    "the call's DONE (the candidate kept working after saying it was done)",
                    clock_ns=clock_ns,
                )
            )
        if self.block.get(ctl.STATUS) != ctl.OK:
            return self._call_error(seq)
        late, window = described
        outcome = self._check(clock_ns, early, late, window, expected)
        self._step("check", step)
        if expected is not None and outcome.passed:
            self.outside_ns += outcome.charged_ns - max(
                outcome.clock_ns - self.clock_offset_ns, MIN_CHARGE_NS
            )
            if self.outside_ns > OUTSIDE_LIMIT_NS:
                return self._outside(0, outcome)
        return outcome

    def _over_limit(self, first: bool, limit: float) -> str:
        """Why a call that did not return within `limit` seconds failed."""
        if not first:
            return f"the call did not return within the limit of {limit:g} s"
        return (
            f"the first call of this shape did not return within {limit:g} s (the untimed "
            "first calls of a trial's shapes, where kernels compile and autotune, share a "
            f"compile budget of {self.compile_budget:g} s; each may take what is left of it, "
            f"at least the call limit of {self.call_timeout:g} s)"
        )

    def _outside_left_s(self) -> float:
        return max(0.0, (OUTSIDE_LIMIT_NS - self.outside_ns) / 1e9)

    def _outside(self, early: int, outcome: CallOutcome | None = None) -> CallOutcome:
        """Time Limit Exceeded for work outside the calls beyond OUTSIDE_LIMIT_NS."""
        spent = (self.outside_ns + early) / 1e9
        return CallOutcome(
            TIME_LIMIT,
            f"the candidate worked {spent:.3f} s outside its calls in this trial (GPU work "
            "running before a call or after it returned, or host work after the call said it "
            f"was done), beyond the limit of {OUTSIDE_LIMIT_NS / 1e9:g} s per trial",
            outcome.charged_ns if outcome else 0,
            outcome.clock_ns if outcome else 0,
            early,
        )

    def _freeze(self) -> None:
        """Stop the candidate's processes; tried twice, then FreezeFailed (never goes on with
        them running). A sandbox that ended meanwhile is the caller's to notice."""
        for _ in range(2):
            if self.candidate.freeze(FREEZE_TIMEOUT_S) or not self.candidate.alive():
                return
            self.candidate.thaw()
        raise FreezeFailed(
            f"the candidate's processes could not be stopped within {FREEZE_TIMEOUT_S:g} s, "
            f"twice ({self.candidate.freezing} freezing; members {self.candidate.members()})"
        )

    def _step(self, name: str, since: int) -> int:
        """Note a host step of the call (`steps`) that began at `since`; now."""
        now = time.perf_counter_ns()
        self.steps[name] = now - since
        return now

    def _described(self, seq: int) -> tuple[int, int] | None:
        """Wait for DESCRIBED, probing the GPU meanwhile and then until it is idle: (the summed
        probe waits, the wall time from DONE until DESCRIBED was seen); None when the worker
        never described the call."""
        done_at = time.perf_counter_ns()
        seen: list[int] = []

        def pending() -> bool:
            if self.block.get(ctl.DESCRIBED) != seq:
                return True
            if not seen:
                seen.append(time.perf_counter_ns())
            return False

        if self.probe is None:
            if not self.block.wait(ctl.DESCRIBED, seq, ANSWER_TIMEOUT, self.candidate.alive):
                return None
            return 0, time.perf_counter_ns() - done_at
        # GPU work still running: probed no longer than the limit on work outside the calls
        started = time.monotonic()
        late = self.probe.until_idle(min(ANSWER_TIMEOUT, self._outside_left_s() + 0.5), pending)
        left = ANSWER_TIMEOUT - (time.monotonic() - started)
        if pending() and not self.block.wait(ctl.DESCRIBED, seq, left, self.candidate.alive):
            return None
        pending()
        return late, seen[0] - done_at

    def _check(
        self, clock_ns: int, early: int, late: int, window: int, expected: torch.Tensor | None
    ) -> CallOutcome:
        worker = tuple(self.block.get(slot) for slot in (ctl.CALL_NS, ctl.SYNC_NS, ctl.EXPORT_NS))
        try:
            descriptor = self.block.read_output()
            output = self.transport.open_output(descriptor)
            copy = output.clone()
            self.transport.synchronize()
        except (TransportError, ValueError, RuntimeError) as error:
            return CallOutcome(WRONG, f"the output cannot be read: {error}", clock_ns, clock_ns)
        charged = max(clock_ns - self.clock_offset_ns, MIN_CHARGE_NS) + charged_waits(
            clock_ns, early, late - self.late_allowance_ns, window - self.window_allowance_ns
        )
        if expected is None:  # a calibration call of the worker's own
            return CallOutcome(
                ACCEPTED, "calibration", charged, clock_ns, early, late, 0.0, worker, window
            )
        verdict = compare(copy, expected, self.rtol, self.atol)
        status = ACCEPTED if verdict.ok else WRONG
        self.last = (descriptor, expected, copy)
        return CallOutcome(
            status,
            verdict.detail,
            charged,
            clock_ns,
            early,
            late,
            verdict.max_error,
            worker,
            window,
        )

    def recheck(self, meanwhile: Any = None) -> CallOutcome:
        """The last call's output copied again, after a pause with the candidate frozen and
        the GPU idle, and compared once more (module docstring). `meanwhile()` is
        the trusted process's own untimed work to do in the pause (the next case's first
        inputs and references); the pause lasts at least RECHECK_AFTER_S either way."""
        if self.last is None:
            return CallOutcome(ACCEPTED, "nothing to check again")
        descriptor, expected, _ = self.last
        paused = time.monotonic()
        if meanwhile is not None:
            meanwhile()
        time.sleep(max(0.0, RECHECK_AFTER_S - (time.monotonic() - paused)))
        self._freeze()
        try:
            if self.probe is not None:
                self.probe.until_idle(ANSWER_TIMEOUT)
            again = self.transport.open_output(descriptor).clone()
            self.transport.synchronize()
        except (TransportError, ValueError, RuntimeError) as error:
            return CallOutcome(WRONG, f"the last timed call's output cannot be read again: {error}")
        finally:
            self.candidate.thaw()
        verdict = compare(again, expected, self.rtol, self.atol)
        if verdict.ok:
            return CallOutcome(ACCEPTED, verdict.detail)
        return CallOutcome(
            WRONG, "the last timed call's output changed after it was checked: " + verdict.detail
        )

    def _call_error(self, seq: int) -> CallOutcome:
        """The verdict of a call the worker reported failed: its output could not be shared
        (Wrong Answer), or the candidate raised (Runtime Error, with the worker's message:
        the exception's type and text and the candidate's frames, `failure.describe`)."""
        try:
            message, _ = self.link.receive(ANSWER_TIMEOUT)
            found = message if message.get("op") == "call_error" else {}
        except (TimeoutError, ChannelClosed, OSError):
            found = {}
        text = str(found.get("error", "")).strip()[:MESSAGE_LIMIT] or "no message"
        if found.get("kind") == "TransportError":
            return CallOutcome(WRONG, text.splitlines()[0].split("TransportError: ", 1)[-1])
        return CallOutcome(RUNTIME_ERROR, f"the call raised {text}")

    def _expect(self, op: str) -> CallOutcome:
        try:
            message, _ = self.link.receive(ANSWER_TIMEOUT)
        except TimeoutError:
            return CallOutcome(TIME_LIMIT, f"the candidate's process did not answer ({op})")
        except (ChannelClosed, OSError):
            return self._ended(f"waiting for {op}")
        if message["op"] != op:
            return CallOutcome(RUNTIME_ERROR, f"expected {op!r}, the worker sent {message['op']!r}")
        return CallOutcome(ACCEPTED, op)

    def _ended(self, when: str) -> CallOutcome:
        self.candidate.process.poll()
        for _ in range(100):
            if not self.candidate.alive():
                break
            time.sleep(0.01)
        how = self.candidate.ended()
        status = MEMORY_LIMIT if self.candidate.oom_kills() else ENDED
        return CallOutcome(status, f"the candidate's sandbox ended {when}: {how}")
