"""Time a TriMul candidate the plain way: in-process, with CUDA events, as GPU MODE does.

    python benchmarks/trimul_event_loop.py CANDIDATE.py [--package DIR] [--out FILE]

The comparison for the GPU judge's hardening (docs/judge.md): the same cases, inputs (the
task's generator), warm-up and stopping rule as the judge, but the candidate imported into this
process and each call timed by two CUDA events on the current stream around it (GPU MODE's
eval.py, leaderboard mode, without its re-check). Prints and writes per-benchmark means and
their geometric mean in microseconds. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from judges.gpu.package import load_gpu_problem  # noqa: E402
from judges.gpu.timing import StoppingRule, geometric_mean, stats  # noqa: E402


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_calls(kernel, generate, case, rule, step) -> list[float]:
    durations: list[float] = []
    data = generate("cuda", **case.spec)
    kernel(data)
    torch.cuda.synchronize()
    started = time.perf_counter_ns()
    k = 0
    while not rule.done(durations, time.perf_counter_ns() - started):
        k += 1
        data = generate("cuda", **{**case.spec, "seed": case.spec["seed"] + step * k})
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        output = kernel(data)
        end.record()
        torch.cuda.synchronize()
        durations.append(start.elapsed_time(end) * 1e6)
        del output, data
    return durations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--package", type=Path, default=REPO / "harbor/trimul/judge/trimul")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import yaml

    config = yaml.safe_load((args.package / "config.yaml").read_text())
    problem = load_gpu_problem(args.package, config, str(args.package / "config.yaml"))
    settings = problem.settings
    assert settings is not None
    generate = load(settings.reference, "reference").generate_input
    kernel = getattr(load(args.candidate, "candidate"), settings.entry)
    benchmarks = [case for case in problem.gpu_cases if case.kind == "benchmark"]
    wall = settings.benchmark_wall * 1e9
    warm = StoppingRule(settings.min_repeats, settings.max_repeats, settings.target_error,
                        settings.warmup_seconds * 1e9, wall)  # fmt: skip
    timed_calls(kernel, generate, benchmarks[0], warm, settings.seed_step)
    rule = StoppingRule(settings.min_repeats, settings.max_repeats, settings.target_error,
                        settings.benchmark_seconds * 1e9, wall)  # fmt: skip
    results = []
    for case in benchmarks:
        summary = stats(timed_calls(kernel, generate, case, rule, settings.seed_step)).to_json()
        results.append({"index": case.index, "spec": case.label(), **summary})
        print(f"benchmark {case.index}: {summary['meanUs']:.3f} us over {summary['runs']}")
    geomean = geometric_mean([r["meanUs"] for r in results])
    print(f"{args.candidate.name}: geometric mean {geomean:.3f} us (CUDA events, in-process)")
    if args.out:
        found = {"candidate": args.candidate.name, "geomeanUs": geomean, "benchmarks": results}
        args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
