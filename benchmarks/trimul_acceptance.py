"""TriMul on a GPU host: judge the seed, the reference and our own candidates, run the attacks,
and time the honest ones the plain way, writing every figure as JSON.

    python benchmarks/trimul_acceptance.py --out DIR [--phase figures|attacks|all] [--repeat N]

Starts the local judge with `--task harbor/trimul --gpus 0` (the full task: 18 tests, 7
benchmarks), submits each program and keeps a summary of its record (per-benchmark means,
timed calls, spread, charges, device and versions) in DIR/acceptance.json, written after every
submission; then, for `figures`, runs benchmarks/trimul_event_loop.py on each honest candidate
(DIR/event_loop.json). docs/task.md and docs/judge.md quote the figures it produced.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from judges.service.process import JudgeProcess  # noqa: E402
from tests.gpu_judge_support import ATTACKS, PROGRAMS, TASK, judge_program, verdict  # noqa: E402

HONEST = {
    "seed": TASK / "solution" / "solution.py",
    "reference": TASK / "judge" / "trimul" / "reference.py",
    "fast_bf16": REPO / "benchmarks" / "trimul_candidates" / "fast_bf16.py",
}


def summary(label: str, record: dict[str, Any], seconds: float) -> dict[str, Any]:
    cases = record.get("cases", [])
    return {
        "label": label, "verdict": verdict(record), "valueUs": record.get("value"),
        "seconds": round(seconds, 1), "gpu": record.get("gpu"), "timing": record.get("timing"),
        "warmup": record.get("warmup"), "error": record.get("error"),
        "firstFailure": next((c["msg"][:600] for c in cases if c["scoreRatio"] == 0.0), None),
        "benchmarks": [
            {"index": c["index"], "spec": c["spec"], **(c.get("timing") or {})}
            for c in cases if c["kind"] == "benchmark" and c["scoreRatio"] == 1.0
        ],
        "tests": [{"index": c["index"], "timeNs": c["time"], "maxError": c.get("maxError")}
                  for c in cases if c["kind"] == "test" and c["scoreRatio"] == 1.0],
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--phase", choices=("figures", "attacks", "all"), default="all")
    parser.add_argument("--repeat", type=int, default=3, help="judgings of fast_bf16")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, Path]] = []
    if args.phase in ("figures", "all"):
        runs += [("seed", HONEST["seed"]), ("reference", HONEST["reference"])]
        runs += [("fast_bf16", HONEST["fast_bf16"])] * args.repeat
    if args.phase in ("attacks", "all"):
        runs += [(name, PROGRAMS / name) for name in sorted(ATTACKS)]
        runs += [("after_hang_seed", HONEST["seed"])]
        runs += [(name, PROGRAMS / name) for name in ("side_stream.py", "early_return.py")]
    results: list[dict[str, Any]] = []
    state = Path(tempfile.mkdtemp(prefix="trimul-judge-"))  # not under --out: many files
    with JudgeProcess(state, "--task", str(TASK), "--gpus", "0", startup_timeout=300) as judge:
        for label, program in runs:
            started = time.monotonic()
            record = judge_program(judge.url, program.read_text(), timeout=1200)
            results.append(summary(label, record, time.monotonic() - started))
            item = results[-1]
            print(f"{label}: {item['verdict']} {item['valueUs']} us ({item['seconds']} s) "
                  f"{(item['firstFailure'] or '')[:200]}", flush=True)  # fmt: skip
            (args.out / "acceptance.json").write_text(json.dumps(results, indent=1))
    if args.phase in ("figures", "all"):
        loops = []
        for label, program in HONEST.items():
            out = args.out / f"loop-{label}.json"
            subprocess.run([sys.executable, str(REPO / "benchmarks" / "trimul_event_loop.py"),
                            str(program), "--out", str(out)], check=False)  # fmt: skip
            if out.exists():
                loops.append({"label": label, **json.loads(out.read_text())})
                out.unlink()
        (args.out / "event_loop.json").write_text(json.dumps(loops, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
