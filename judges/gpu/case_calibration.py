"""Each benchmark's own calibration, measured by one trial and kept for the next on its GPU.

A benchmark's null calls (`Session.calibrate_case`) measure how much more the GPU's switch into the
candidate's process, and the copy of the inputs into the pool, cost on that benchmark's memory than
on the plain null calls: seven calls per benchmark, each after the case's own inputs and reference,
~1.05 s for TriMul's seven benchmarks on the H200 (judges/README.md). A prepared trial makes them
while it waits for its submission; back-to-back, when the submission is already there, they were on
its critical path. What they give — per benchmark, the clock, late-probe and window differences
from the plain null calls (`Session.case_deltas`) — is a property of the GPU, the host and the
benchmark's sizes, measured before any candidate is imported, so the service keeps the last
measured ones per GPU and problem and hands them to the GPU's next trials for `KEPT_FOR_S` seconds.
Every trial still measures the plain null calls itself, right before its candidate's import, and
adds the kept differences to them (`Session.use_case`). A prepared trial whose kept differences
expire while it waits measures its own then, with the GPU idle.

Pure apart from `measure` (which runs null calls through a `Session`): the service reads what a
trial measured from its `startup` line (`kept_from_startup`), never from anything the candidate
writes.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judges.gpu.package import GpuCase
from judges.gpu.timing import combine_seed

if TYPE_CHECKING:  # torch, in the trusted process only
    from judges.gpu import session as calls

CALLS = 7  # null calls per benchmark, each after that case's own work
KEPT_FOR_S = 600.0  # how long one trial's measurement serves the same GPU's next trials


MEASURED = (
    "calls",
    "lowestNullClockUs",
    "copyKernelUs",
    "moreThanPlainUs",
    "deltaNs",
    "measuredAt",
)  # a benchmark's calibration entry as measured, before its offsets


@dataclass(frozen=True)
class Kept:
    """One trial's measured calibration entries, per benchmark index (`measure`); each holds
    its differences from the plain null calls, `deltaNs`: [clock, late, window]."""

    entries: dict[str, dict[str, Any]]
    measured_at: float  # time.time() of the measurement

    def age(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.measured_at)

    def covers(self, cases: list[GpuCase] | tuple[GpuCase, ...]) -> bool:
        """Whether it holds exactly the benchmarks of `cases`, each with three differences."""
        wanted = {str(case.index) for case in cases if case.kind == "benchmark"}
        return set(self.entries) == wanted and all(
            isinstance(deltas := entry.get("deltaNs"), list)
            and len(deltas) == 3
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in deltas)
            for entry in self.entries.values()
        )

    def to_spec(self) -> dict[str, Any]:
        return {"entries": self.entries, "measuredAt": self.measured_at}

    @classmethod
    def from_spec(cls, data: Any) -> Kept | None:
        if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
            return None
        measured_at = data.get("measuredAt")
        if not isinstance(measured_at, int | float) or isinstance(measured_at, bool):
            return None
        entries = {str(k): v for k, v in data["entries"].items() if isinstance(v, dict)}
        return cls(entries, float(measured_at))


def measure(
    judge: calls.Session, reference: Any, cases: list[GpuCase], device: str
) -> dict[str, dict[str, Any]]:
    """Each benchmark's own null calls (`Session.calibrate_case`), each made right after the
    work a real call of it follows: its inputs generated (from a seed of this process's own,
    never the submission's) and its reference output computed. Each entry carries its
    differences (`deltaNs`) and when they were measured, for the service to keep."""
    found: dict[str, dict[str, Any]] = {}
    for case in cases:
        if case.kind != "benchmark":
            continue
        own = secrets.randbelow(1 << 30)

        def prepare(step: int, case: GpuCase = case, own: int = own) -> Any:
            seed = combine_seed(case.spec["seed"] + 13 * step, own)
            data = reference.generate_input(device, **{**case.spec, "seed": seed})
            reference.ref_kernel(data)
            return data

        entry = judge.calibrate_case(case.index, prepare, CALLS)
        delta = judge.case_deltas.get(case.index)
        if "failed" not in entry and delta is not None:
            entry["deltaNs"] = [round(delta.clock_ns), round(delta.late_ns), round(delta.window_ns)]
            entry["measuredAt"] = round(time.time(), 3)
        found[str(case.index)] = entry
    return found


def use(judge: calls.Session, kept: Kept) -> dict[str, dict[str, Any]]:
    """Kept differences as this trial's (`Session.case_deltas`), and their calibration
    entries as measured, each marked `kept` with the measurement's age."""
    from judges.gpu.session import Null

    age = round(kept.age(), 1)
    judge.case_deltas = {
        int(index): Null(*map(float, entry["deltaNs"])) for index, entry in kept.entries.items()
    }
    return {
        index: {**entry, "kept": True, "measuredAgoS": age}
        for index, entry in sorted(kept.entries.items())
    }


def kept_from_startup(startup: dict[str, Any]) -> Kept | None:
    """What a trial measured itself (not what it was handed), from its `startup` line's
    calibration; None when it measured nothing or any benchmark's calibration failed."""
    calibration = startup.get("calibration")
    entries = calibration.get("cases") if isinstance(calibration, dict) else None
    if not isinstance(entries, dict) or not entries:
        return None
    if any(
        not isinstance(e, dict) or e.get("kept") or "deltaNs" not in e or "failed" in e
        for e in entries.values()
    ):
        return None
    when = min(float(e.get("measuredAt", 0.0)) for e in entries.values())
    kept = {index: {key: e[key] for key in MEASURED if key in e} for index, e in entries.items()}
    return Kept(kept, when)
