"""The trusted side of one submission's protocol: set up a case, make one call, read it back.

One call, as the trusted process makes it (the inputs and the reference output are already
computed, in its own memory):

1. freeze the candidate's processes and copy the inputs into the case's shared pool with one
   device copy (timed: it is the "early" check below), then thaw them;
2. `arm`: wait until the worker says it is spinning; start the clock and write GO;
3. spin until the worker writes DONE (or the call's time limit passes, or the sandbox dies);
   stop the clock;
4. map the output's allocation and copy the output out with one device copy (timed: the
   "late" check below); compare that copy with the reference.

The charged time is the clock's reading plus any excess of the two copies over what such a
copy takes on an idle GPU (`Baseline`, measured before the candidate started). Work the
candidate leaves running after it says DONE delays the copy of step 4 (the GPU time-slices
between processes) or is caught half-done by it; work it keeps running between calls delays
the copy of step 1. Either delay beyond the slack is added to the call's time.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from judges.gpu.compare import compare
from judges.gpu.launch import CandidateProcess
from judges.gpu.sandboxed import control as ctl
from judges.gpu.sandboxed import layout
from judges.gpu.sandboxed.channel import Channel, ChannelClosed
from judges.gpu.sandboxed.transport import TransportError

SLACK_NS = 50_000  # a copy may take this much longer than the baseline before it is charged
SLACK_FRACTION = 0.2
ANSWER_TIMEOUT = 20.0  # seconds for the worker's replies outside the timed call

ACCEPTED = "Accepted"
WRONG = "Wrong Answer"
RUNTIME_ERROR = "Runtime Error"
TIME_LIMIT = "Time Limit Exceeded"
MEMORY_LIMIT = "Memory Limit Exceeded"
ENDED = "Sandbox Ended"


@dataclass(frozen=True)
class CallOutcome:
    """One call: how it ended, the charged and measured times, and the comparison's detail."""

    status: str
    detail: str
    charged_ns: int = 0
    clock_ns: int = 0
    early_ns: int = 0
    late_ns: int = 0
    max_error: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == ACCEPTED


class Baseline:
    """How long one device copy of n bytes takes on an idle GPU: measured at a few sizes before
    the candidate starts (best of several), interpolated linearly in between."""

    SIZES = (1 << 20, 16 << 20, 256 << 20, 1 << 30)

    def __init__(self, points: list[tuple[int, float]]) -> None:
        self.points = sorted(points)

    @classmethod
    def measure(cls, device: str, sync: Callable[[], None], repeats: int = 5) -> Baseline:
        points = []
        for size in cls.SIZES:
            source = torch.empty(size, dtype=torch.uint8, device=device)
            target = torch.empty_like(source)
            best = float("inf")
            for _ in range(repeats):
                sync()
                started = time.perf_counter_ns()
                target.copy_(source)
                sync()
                best = min(best, time.perf_counter_ns() - started)
            points.append((size, best))
            del source, target
        return cls(points)

    def expected(self, nbytes: int) -> float:
        points = self.points
        if nbytes <= points[0][0]:
            return points[0][1]
        for (n0, t0), (n1, t1) in itertools.pairwise(points):
            if nbytes <= n1:
                return t0 + (t1 - t0) * (nbytes - n0) / (n1 - n0)
        (n0, t0), (n1, t1) = points[-2], points[-1]
        return t1 + (t1 - t0) * (nbytes - n1) / (n1 - n0)

    def excess(self, measured_ns: float, nbytes: int) -> int:
        """The part of a copy's time beyond the baseline and its slack (0 for a normal copy)."""
        allowed = self.expected(nbytes) * (1 + SLACK_FRACTION) + SLACK_NS
        return max(0, round(measured_ns - allowed))

    def to_json(self) -> list[list[float]]:
        return [[n, t] for n, t in self.points]


class Session:
    """The trusted side of the protocol with one running candidate sandbox."""

    def __init__(
        self,
        transport: Any,
        block: ctl.Control,
        link: Channel,
        candidate: CandidateProcess,
        baseline: Baseline | None,
        call_timeout: float,
        rtol: float,
        atol: float,
    ) -> None:
        self.transport = transport
        self.block = block
        self.link = link
        self.candidate = candidate
        self.baseline = baseline  # None: no early/late charge (the CPU stand-in)
        self.call_timeout = call_timeout
        self.rtol, self.atol = rtol, atol
        self.seq = 0
        self._case: dict[str, Any] | None = None

    def wait_ready(self, timeout: float) -> CallOutcome:
        """The worker's start-up: ACCEPTED once it imported the candidate."""
        try:
            message, _ = self.link.receive(timeout)
        except TimeoutError:
            return CallOutcome(TIME_LIMIT, f"the candidate was not ready within {timeout:g} s")
        except (ChannelClosed, OSError):
            return self._ended("while starting")
        if message["op"] == "import_failed":
            return CallOutcome(RUNTIME_ERROR, "the candidate could not be imported:\n"
                               + str(message.get("error", ""))[-3000:])  # fmt: skip
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

    def release_case(self) -> None:
        """Unmap the pool in the worker, then free it (best effort once the worker is gone)."""
        case, self._case = self._case, None
        if case is None:
            return
        self.transport.close_outputs()
        if self.candidate.alive():
            try:
                self.link.send({"op": "release"})
                self._expect("released")
            except (OSError, ChannelClosed):
                pass
        self.transport.free_pool(case["token"])

    def call(self, data: Any, expected: torch.Tensor) -> CallOutcome:
        """One call on `data`, checked against `expected` (module docstring)."""
        case = self._case
        assert case is not None, "setup_case first"
        _, tensors, _ = layout.flatten(data)
        layout.pack(case["staging"], case["tree"], tensors)
        self.transport.synchronize()
        frozen = self.candidate.freeze()
        started = time.perf_counter_ns()
        case["pool"].copy_(case["staging"])
        self.transport.synchronize()
        fill_ns = time.perf_counter_ns() - started
        self.candidate.thaw()
        if not frozen and not self.candidate.alive():
            return self._ended("between calls")
        early = self.baseline.excess(fill_ns, case["pool"].numel()) if self.baseline else 0
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
        clock_start = time.perf_counter_ns()
        self.block.set(ctl.GO, seq)
        finished = self.block.wait(ctl.DONE, seq, self.call_timeout, self.candidate.alive)
        clock_ns = time.perf_counter_ns() - clock_start
        if not finished:
            if self.candidate.alive():
                return CallOutcome(
                    TIME_LIMIT,
                    f"the call did not return within the limit of {self.call_timeout:g} s",
                    clock_ns=clock_ns,
                )
            return self._ended("during the call")
        if self.block.get(ctl.STATUS) != ctl.OK:
            return self._call_error(seq)
        return self._check(clock_ns, early, expected)

    def _check(self, clock_ns: int, early: int, expected: torch.Tensor) -> CallOutcome:
        try:
            output = self.transport.open_output(self.block.read_output())
            self.transport.synchronize()
            started = time.perf_counter_ns()
            copy = output.clone()
            self.transport.synchronize()
            copy_ns = time.perf_counter_ns() - started
        except (TransportError, ValueError, RuntimeError) as error:
            return CallOutcome(WRONG, f"the output cannot be read: {error}", clock_ns, clock_ns)
        nbytes = copy.numel() * copy.element_size()
        late = self.baseline.excess(copy_ns, nbytes) if self.baseline else 0
        charged = clock_ns + early + late
        verdict = compare(copy, expected, self.rtol, self.atol)
        status = ACCEPTED if verdict.ok else WRONG
        return CallOutcome(status, verdict.detail, charged, clock_ns, early, late,
                           verdict.max_error)  # fmt: skip

    def _call_error(self, seq: int) -> CallOutcome:
        try:
            message, _ = self.link.receive(ANSWER_TIMEOUT)
            text = str(message.get("error", "")) if message.get("op") == "call_error" else ""
        except (TimeoutError, ChannelClosed, OSError):
            text = ""
        lines = [line for line in text.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else "no traceback"
        if "TransportError" in last:
            return CallOutcome(WRONG, last.split("TransportError: ", 1)[-1])
        return CallOutcome(RUNTIME_ERROR, f"custom_kernel raised: {last}\n{text[-2000:]}")

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

    def shutdown(self) -> None:
        """Ask the worker to exit, then kill whatever is left of the sandbox."""
        if self.candidate.alive():
            try:
                self.link.send({"op": "exit"})
                self.candidate.process.wait(5)
            except Exception:
                pass
        self.candidate.kill()
