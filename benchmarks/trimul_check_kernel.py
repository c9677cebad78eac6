"""TriMul's check kernel against its reference on a GPU: how much faster, and how close.

    python benchmarks/trimul_check_kernel.py [--out FILE] [--seeds 3]

For every case of harbor/trimul (18 tests, 7 benchmarks) and a few seeds each, times the
package's `ref_kernel` (the definition, float32 with TF32 off) and `check_kernel` (what the
judge computes for each timed call's fresh input: split TF32 products) with CUDA events, and
measures their largest gap |check - ref| / (1 + |ref|) against the package's `CHECK_BOUND`.
Prints one line per case and the totals (the sum of the benchmarks' times is what one judging
spends on expected outputs per call of each benchmark); writes them as JSON with `--out`.
Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from judges.gpu.package import load_gpu_problem  # noqa: E402

PACKAGE = REPO / "harbor" / "trimul" / "judge" / "trimul"


def event_ms(kernel, data, repeats: int = 3) -> float:
    """The median of `repeats` timed calls after one untimed one."""
    kernel(data)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel(data)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    import yaml

    config_file = PACKAGE / "config.yaml"
    problem = load_gpu_problem(PACKAGE, yaml.safe_load(config_file.read_text()), str(config_file))
    assert problem.settings is not None
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("trimul_reference", problem.settings.reference)
    assert spec is not None and spec.loader is not None
    reference = module_from_spec(spec)
    spec.loader.exec_module(reference)
    rows = []
    for case in problem.gpu_cases:
        gaps, ref_ms, check_ms = [], [], []
        for n in range(args.seeds):
            data = reference.generate_input(
                "cuda", **{**case.spec, "seed": case.spec["seed"] + 7919 * n}
            )
            exact, fast = reference.ref_kernel(data), reference.check_kernel(data)
            gap = ((fast - exact).abs() / (1 + exact.abs())).nan_to_num(float("inf")).max()
            gaps.append(float(gap.item()))
            if n == 0:
                ref_ms.append(event_ms(reference.ref_kernel, data))
                check_ms.append(event_ms(reference.check_kernel, data))
            del data, exact, fast
        row = {"kind": case.kind, "index": case.index, "refMs": ref_ms[0],
               "checkMs": check_ms[0], "largestGap": max(gaps)}  # fmt: skip
        rows.append(row)
        speedup = row["refMs"] / row["checkMs"]
        print(f"{case.kind} {case.index:2d}: ref {row['refMs']:8.3f} ms, check "
              f"{row['checkMs']:8.3f} ms ({speedup:.2f}x), largest gap "
              f"{row['largestGap']:.2e} (bound {reference.CHECK_BOUND:.0e})",
              flush=True)  # fmt: skip
    bench = [r for r in rows if r["kind"] == "benchmark"]
    total = {"benchmarkRefMs": sum(r["refMs"] for r in bench),
             "benchmarkCheckMs": sum(r["checkMs"] for r in bench),
             "largestGap": max(r["largestGap"] for r in rows),
             "bound": reference.CHECK_BOUND, "gpu": torch.cuda.get_device_name(0),
             "torch": torch.__version__}  # fmt: skip
    print(f"benchmarks, one call each: ref {total['benchmarkRefMs']:.1f} ms, check "
          f"{total['benchmarkCheckMs']:.1f} ms; largest gap {total['largestGap']:.2e} "
          f"(bound {reference.CHECK_BOUND:.0e})")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps({"cases": rows, "total": total}, indent=1))
    return 0 if total["largestGap"] <= reference.CHECK_BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
