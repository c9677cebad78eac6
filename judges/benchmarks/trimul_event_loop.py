"""Time a TriMul candidate the plain way: in-process, with CUDA events, as GPU MODE does.

    python judges/benchmarks/trimul_event_loop.py CANDIDATE.py [--package DIR] [--out FILE]
        [--recheck]

The comparison for the GPU judge's hardening (judges/README.md): the same cases in the same order
(each test once, untimed, then the benchmarks), inputs (the task's generator), warm-up and
stopping rule as the judge, but the candidate imported into this
process and each call timed by two CUDA events on the current stream around it (GPU MODE's
eval.py, leaderboard mode; its re-check of every timed call against the reference with
`--recheck`, without it by default). Prints and writes per-benchmark means and
their geometric mean in microseconds. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from judges.gpu.package import load_gpu_problem  # noqa: E402
from judges.gpu.timing import StoppingRule, geometric_mean, stats  # noqa: E402


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_calls(kernel, generate, case, rule, step, check=None, host=None) -> list[float]:
    """Timed calls on fresh inputs until `rule` stops them (with `host`, a list, each call's
    host time in microseconds appended to it: the judge's `workerCallUs`); with `check` (GPU MODE's
    leaderboard mode), a clone of each call's inputs is taken before it and, after it, the
    reference on the clone and the comparison (`check(clone, output)`), as in GPU MODE's
    eval.py and in the judge: the GPU does the reference's work between timed calls."""
    durations: list[float] = []
    data = generate("cuda", **case.spec)
    kernel(data)
    torch.cuda.synchronize()
    started = time.perf_counter_ns()
    k = 0
    while not rule.done(durations, time.perf_counter_ns() - started):
        k += 1
        data = generate("cuda", **{**case.spec, "seed": case.spec["seed"] + step * k})
        clone = _clone(data) if check else None
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        called = time.perf_counter_ns()
        output = kernel(data)
        called = time.perf_counter_ns() - called
        end.record()
        torch.cuda.synchronize()
        durations.append(start.elapsed_time(end) * 1e6)
        if host is not None:
            host.append(called / 1e3)
        if check:
            check(clone, output)
        del output, data, clone
    return durations


def _clone(data):
    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, dict):
        return {key: _clone(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_clone(value) for value in data)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--package", type=Path, default=REPO / "harbor/trimul/judge/trimul")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--recheck", action="store_true",
                        help="check every timed call against the reference, as GPU MODE's "
                        "leaderboard mode and the judge do")  # fmt: skip
    args = parser.parse_args()
    import yaml

    config = yaml.safe_load((args.package / "config.yaml").read_text())
    problem = load_gpu_problem(args.package, config, str(args.package / "config.yaml"))
    settings = problem.settings
    assert settings is not None
    reference = load(settings.reference, "reference")
    generate = reference.generate_input
    kernel = getattr(load(args.candidate, "candidate"), settings.entry)
    check = None
    if args.recheck:
        from judges.gpu.compare import compare

        def check(clone, output) -> None:
            verdict = compare(output, reference.ref_kernel(clone), settings.rtol, settings.atol)
            if not verdict.ok:
                raise SystemExit(f"{args.candidate.name}: a timed call failed: {verdict.detail}")

    # The judge's call order: each test case once (untimed), then the benchmarks. A candidate
    # whose state depends on the shapes it has seen (torch.compile specialises a shape, then
    # recompiles with dynamic shapes) is then timed in the state the judge times it in.
    for case in (case for case in problem.gpu_cases if case.kind == "test"):
        kernel(generate("cuda", **case.spec))
    torch.cuda.synchronize()
    benchmarks = [case for case in problem.gpu_cases if case.kind == "benchmark"]
    wall = settings.benchmark_wall * 1e9
    warm = StoppingRule(settings.min_repeats, settings.max_repeats, settings.target_error,
                        settings.warmup_seconds * 1e9, wall)  # fmt: skip
    timed_calls(kernel, generate, benchmarks[0], warm, settings.seed_step, check)
    rule = StoppingRule(settings.min_repeats, settings.max_repeats, settings.target_error,
                        settings.benchmark_seconds * 1e9, wall)  # fmt: skip
    results = []
    for case in benchmarks:
        host: list[float] = []
        durations = timed_calls(kernel, generate, case, rule, settings.seed_step, check, host)
        summary = stats(durations).to_json()
        results.append({"index": case.index, "spec": case.label(), **summary,
                        "hostCallUs": statistics.median(host)})  # fmt: skip
        print(f"benchmark {case.index}: {summary['meanUs']:.3f} us over {summary['runs']}")
    geomean = geometric_mean([r["meanUs"] for r in results])
    how = "each call checked" if args.recheck else "no checks"
    print(f"{args.candidate.name}: geometric mean {geomean:.3f} us (CUDA events, in-process, "
          f"{how})")  # fmt: skip
    if args.out:
        found = {"candidate": args.candidate.name, "geomeanUs": geomean, "benchmarks": results,
                 "recheck": args.recheck}  # fmt: skip
        args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
