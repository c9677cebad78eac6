"""Where a GPU judging's wall clock goes, and the judge against another tree's, side by side.

    python judges/benchmarks/gpu_judge_latency.py --baseline-tree DIR [--stand-in]
        [--task harbor/trimul]
                                           [--rounds 3] [--back-to-back N] [--out FILE]

Starts two judges serving the same GPU package — this checkout's and the one in DIR (e.g.
`git archive <commit> judges | tar -x -C DIR`) — and judges an honest candidate on each in
interleaved rounds (one on this tree, one on DIR's, and again), so that both see the same host
load. Prints for each the median wall clock of a trial (`timing.trialSeconds`) and, where the
tree records them (`timing.phases`), the median time of each part: the trusted process's start,
the sandbox's, the CUDA context, the tests' preparation, the worker's hello, the calibration,
the candidate's import, the tests, the warm-up and the benchmarks. With `--stand-in` the GPU
judge's CPU stand-in and the task's small test package (judges/tests/gpu_judge_support.py) are used,
so it runs anywhere (the figures then say how the start-up overlaps on this host's CPUs, not
what an H200 takes; a tree older than the judge's test mode, `judges.service.testing`, gets
the stand-in by its former flag); without it, `--task` (default harbor/trimul) on GPU 0.
`--back-to-back N`: each round submits N candidates to each judge, each as soon as the last
record is out (as a step's queue does), and counts only the 2nd to Nth, whose trials found no
idle time before them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "judges" / "tests"))  # the GPU judge tests' helpers

from gpu_judge_support import PROGRAMS, TASK, judge_program, small_package  # noqa: E402

from judges.service.process import JudgeProcess  # noqa: E402


def deltas(phases: dict[str, float]) -> dict[str, float]:
    """Each part's own time: a mark minus the one before it (the first from the trial's start)."""
    found, before = {}, 0.0
    for name, at in phases.items():
        found[name] = round(at - before, 4)
        before = at
    return found


def stand_in_judge(state: Path, flags: list[str], tree: Path) -> JudgeProcess:
    """A judge of `tree` on the GPU judge's CPU stand-in: its test mode, or in a tree from
    before the test mode its former flag."""
    if (tree / "judges" / "service" / "testing.py").exists():
        return JudgeProcess(state, *flags, cwd=tree, startup_timeout=600,
                            test_mode=("gpu-cpu-stand-in",))  # fmt: skip
    return JudgeProcess(state, *flags, "--gpu-cpu-stand-in", cwd=tree, startup_timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", type=Path, required=True)
    parser.add_argument("--stand-in", action="store_true")
    parser.add_argument("--task", type=Path, default=TASK)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--back-to-back", type=int, default=1, metavar="N")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpu-judge-latency-"))
    if args.stand_in:
        packages = small_package(root / "packages")
        config = packages / "trimul" / "config.yaml"  # without the keys an older tree lacks
        config.write_text(config.read_text().replace("determinism_check: true\n", ""))
        flags = ["--problems", str(packages)]
    else:
        flags = ["--task", str(args.task.resolve()), "--gpus", "0"]
    code = (PROGRAMS / "honest.py").read_text()
    trees = {"this tree": REPO, "baseline": args.baseline_tree.resolve()}
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    judges = {name: stand_in_judge(root / name.replace(" ", "-"), flags, tree)
              if args.stand_in else
              JudgeProcess(root / name.replace(" ", "-"), *flags, cwd=tree, startup_timeout=600)
              for name, tree in trees.items()}  # fmt: skip
    for judge in judges.values():
        judge.start()
    try:
        for round_number in range(args.rounds):
            for name, judge in judges.items():
                for n in range(args.back_to_back):
                    record = judge_program(judge.url, f"{code}\n# round {round_number} {n}\n")
                    if n == 0 and args.back_to_back > 1:
                        continue  # it found the judge idle
                    timing = record.get("timing") or {}
                    found[name].append({"passed": record.get("passed"),
                                        "value": record.get("value"),
                                        "trialSeconds": timing.get("trialSeconds"),
                                        "phases": deltas(timing.get("phases") or {})})  # fmt: skip
                    print(f"round {round_number + 1} {name}: {found[name][-1]}", flush=True)
    finally:
        for judge in judges.values():
            judge.stop()
    summary = {}
    for name, runs in found.items():
        parts: dict[str, list[float]] = {}
        for run in runs:
            for part, seconds in run["phases"].items():
                parts.setdefault(part, []).append(seconds)
        summary[name] = {
            "trialSeconds": statistics.median(r["trialSeconds"] for r in runs),
            "phases": {part: statistics.median(values) for part, values in parts.items()},
            "allPassed": all(r["passed"] for r in runs),
        }
    ratio = summary["this tree"]["trialSeconds"] / summary["baseline"]["trialSeconds"]
    for name, item in summary.items():
        print(f"{name}: median trial {item['trialSeconds']:.2f} s, passed {item['allPassed']}, "
              f"parts {item['phases']}")  # fmt: skip
    print(f"this tree / baseline: {ratio:.3f}")
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": found, "summary": summary, "ratio": ratio},
                                       indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
