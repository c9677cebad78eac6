"""A `type: gpu` judge package: its settings, its cases, and the problem the service lists.

    <package>/config.yaml   type: gpu, language: python, entry, reference, cases, rtol, atol,
                            time, call_timeout, compile_budget, startup_timeout, memory,
                            processes, tmpfs,
                            warmup_time, min_repeats, max_repeats, target_error,
                            benchmark_time, benchmark_wall, seed_step, determinism_check,
                            peak_bandwidth, peak_flops, trace_calls
    <package>/cases.yaml    tests: [{generator arguments}], benchmarks: [{...}]
    <package>/<reference>   generate_input(device, **case) and ref_kernel(data); optional
                            minimum_work(**case) -> {"bytes", "flops"} (judges.gpu.limits)

Pure loading and validation (no torch, no GPU): the service reads the package at start-up,
where a wrong key is a one-line error naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judges.problems import bounded_yaml
from judges.problems.folders import CONFIG_LIMIT, member, read_bounded, regular
from judges.problems.package import (
    Case,
    Problem,
    ProblemError,
    Suite,
    parse_memory_limit,
    parse_time_limit,
)

CASE_KINDS = ("tests", "benchmarks")
_DEFAULTS: dict[str, Any] = {
    "entry": "custom_kernel",
    "reference": "reference.py",
    "cases": "cases.yaml",
    "rtol": 2e-2,
    "atol": 2e-2,
    "time": "900s",
    "call_timeout": "30s",
    "compile_budget": "300s",  # the untimed first calls of a trial together (compiling, tuning)
    "startup_timeout": "180s",
    "memory": "32g",
    "processes": 1024,
    "tmpfs": "2g",
    "warmup_time": "10ms",
    "min_repeats": 3,
    "max_repeats": 100,
    "target_error": 1e-3,
    "benchmark_time": "30s",
    "benchmark_wall": "120s",
    "seed_step": 13,
    "determinism_check": False,  # one test's input twice, outputs compared bit for bit (a flag)
    "peak_bandwidth": None,  # bytes/s for the hardware floor; None: the device's, queried
    "peak_flops": None,  # FLOP/s for the hardware floor; None: the device's, queried
    "trace_calls": False,  # each benchmark's timed calls, one by one, in the record (diagnostic)
}
_KNOWN = {"type", "language", *_DEFAULTS}


@dataclass(frozen=True)
class GpuSettings:
    """How a GPU package is judged: tolerance, limits and GPU MODE's timing rule."""

    entry: str
    reference: Path
    rtol: float
    atol: float
    wall_seconds: float
    call_timeout: float
    startup_timeout: float
    memory_bytes: int
    processes: int
    tmpfs_bytes: int
    warmup_seconds: float
    min_repeats: int
    max_repeats: int
    target_error: float
    benchmark_seconds: float
    benchmark_wall: float
    seed_step: int
    determinism_check: bool = False
    trace_calls: bool = False
    peak_bandwidth: float | None = None
    peak_flops: float | None = None
    compile_budget: float = 300.0

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["reference"] = str(self.reference)
        return data


@dataclass(frozen=True)
class GpuCase:
    """One generator call: a correctness test or a benchmark, numbered from 1 within its kind."""

    kind: str  # "test" or "benchmark"
    index: int
    spec: dict[str, Any]

    def label(self) -> str:
        """GPU MODE's spec line, e.g. `seqlen: 32; bs: 1; ...; distribution: normal`."""
        return "; ".join(f"{key}: {value}" for key, value in self.spec.items())

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "spec": dict(self.spec)}


@dataclass
class DeviceStatus:
    """Whether the service can judge GPU problems, set once at start-up (`judges.gpu.judge`)."""

    available: bool | None = None  # None: not yet probed
    detail: str = "not probed yet"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "gpu", "available": self.available, "detail": self.detail}


@dataclass(frozen=True)
class GpuProblem(Problem):
    """A served GPU problem: the generic `Problem` plus its settings, cases and device status."""

    settings: GpuSettings | None = None
    gpu_cases: tuple[GpuCase, ...] = ()
    device: DeviceStatus = field(default_factory=DeviceStatus, compare=False)

    def listing(self) -> dict[str, Any]:
        """The `/problems` entry, with the device it needs and whether this judge has one."""
        tests = sum(1 for case in self.gpu_cases if case.kind == "test")
        return {
            **super().listing(),
            "tests": tests,
            "benchmarks": len(self.gpu_cases) - tests,
            "device": self.device.to_json(),
        }


def load_gpu_problem(
    directory: Path, config: dict[str, Any], where: str, suite: Suite | None = None
) -> GpuProblem:
    """The problem of a `type: gpu` package; ProblemError naming the file and key if wrong.
    Its paths are absolute: the trusted process loads the reference from its own directory."""
    directory = directory.absolute()
    unknown = sorted(set(config) - _KNOWN)
    if unknown:
        raise ProblemError(f"{where}: unknown keys {unknown} (known: {sorted(_KNOWN)})")
    if str(config.get("language", "python")).lower() != "python":
        raise ProblemError(f"{where}: language must be python for a gpu package")
    values = {**_DEFAULTS, **config}
    settings = _settings(directory, values, where)
    cases_path = member(directory, values["cases"], "cases", where)
    cases = load_cases(cases_path, directory)
    listed = tuple(
        Case(number, cases_path, settings.call_timeout, settings.memory_bytes, case)
        for number, case in enumerate(cases, start=1)
    )
    suite = suite or Suite("package", f"cases of the GPU package {directory}", True)
    return GpuProblem(
        directory.name,
        directory,
        listed,
        None,
        suite,
        "gpu",
        settings.reference,
        None,
        "python",
        settings,
        cases,
    )


def _settings(directory: Path, values: dict[str, Any], where: str) -> GpuSettings:
    reference = member(directory, values["reference"], "reference", where)
    if not regular(directory, reference, "reference module").is_file():
        raise ProblemError(f"{reference}: missing; a gpu package needs its reference module")
    counts = {}
    for key in ("min_repeats", "max_repeats", "seed_step", "processes"):
        value = values[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ProblemError(f"{where}: {key} must be a positive integer, got {value!r}")
        counts[key] = value
    if counts["min_repeats"] > counts["max_repeats"]:
        raise ProblemError(f"{where}: min_repeats exceeds max_repeats")
    floats = {}
    for key in ("rtol", "atol", "target_error"):
        value = values[key]
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ProblemError(f"{where}: {key} must be a non-negative number, got {value!r}")
        floats[key] = float(value)
    for key in ("determinism_check", "trace_calls"):
        if not isinstance(values[key], bool):
            raise ProblemError(f"{where}: {key} must be true or false")
    peaks = {}
    for key in ("peak_bandwidth", "peak_flops"):
        value = values[key]
        if value is not None and (
            not isinstance(value, int | float) or isinstance(value, bool) or value <= 0
        ):
            raise ProblemError(f"{where}: {key} must be a positive number or null, got {value!r}")
        peaks[key] = None if value is None else float(value)
    return GpuSettings(
        entry=str(values["entry"]),
        reference=reference,
        rtol=floats["rtol"],
        atol=floats["atol"],
        wall_seconds=parse_time_limit(values["time"], where),
        call_timeout=parse_time_limit(values["call_timeout"], where),
        compile_budget=parse_time_limit(values["compile_budget"], where),
        startup_timeout=parse_time_limit(values["startup_timeout"], where),
        memory_bytes=parse_memory_limit(values["memory"], where),
        processes=counts["processes"],
        tmpfs_bytes=parse_memory_limit(values["tmpfs"], where),
        warmup_seconds=parse_time_limit(values["warmup_time"], where),
        min_repeats=counts["min_repeats"],
        max_repeats=counts["max_repeats"],
        target_error=floats["target_error"],
        benchmark_seconds=parse_time_limit(values["benchmark_time"], where),
        benchmark_wall=parse_time_limit(values["benchmark_wall"], where),
        seed_step=counts["seed_step"],
        determinism_check=values["determinism_check"],
        trace_calls=values["trace_calls"],
        **peaks,
    )


def load_cases(path: Path, directory: Path | None = None) -> tuple[GpuCase, ...]:
    """The tests, then the benchmarks, of a cases file; ProblemError naming the entry if wrong.

    Every entry is a mapping of generator arguments with an integer `seed` (the judge varies
    it between timed repeats); both lists must be non-empty."""
    if not path.is_file():
        raise ProblemError(f"{path}: missing; a gpu package lists its cases there")
    text = read_bounded(directory or path.parent, path, CONFIG_LIMIT, "cases file")
    try:
        data = bounded_yaml.load(text, str(path)) or {}
    except bounded_yaml.YamlRefused as error:
        raise ProblemError(str(error)) from None
    if not isinstance(data, dict) or set(data) != set(CASE_KINDS):
        raise ProblemError(f"{path}: expected exactly the keys {list(CASE_KINDS)}")
    cases: list[GpuCase] = []
    for key in CASE_KINDS:
        entries = data[key]
        if not isinstance(entries, list) or not entries:
            raise ProblemError(f"{path}: {key} must be a non-empty list")
        for index, spec in enumerate(entries, start=1):
            seed = spec.get("seed") if isinstance(spec, dict) else None
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise ProblemError(f"{path}: {key}[{index - 1}] needs an integer seed: {spec!r}")
            cases.append(GpuCase(key[:-1], index, dict(spec)))
    return tuple(cases)
