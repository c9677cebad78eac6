"""TriMul on a GPU host: judge the seed, the reference and our own candidates, run the attacks,
and time the honest ones the plain way, writing every figure as JSON.

    python judges/benchmarks/trimul_acceptance.py --out DIR [--phase figures|attacks|all]
                                           [--repeat N]
                                           [--gpus 0,1] [--at-once 2] [--back-to-back] [--trace]
                                           [--honest seed,reference,fast_bf16,...]
                                           [--loops both|plain] [--attacks a.py,b.py]

Starts the local judge with `--task harbor/trimul --gpus 0` (the full task: 18 tests, 7
benchmarks; `--gpus` for others), submits each program (`--at-once N`: N in flight at once, one
per GPU, for the multi-GPU run) and keeps a summary of its record (per-benchmark means, timed
calls, spread, charges, the trial's phases, device and versions) in DIR/acceptance.json,
written after every submission; then, for `figures`, runs judges/benchmarks/trimul_event_loop.py on
each honest candidate, without and with GPU MODE's re-check of every timed call
(DIR/event_loop.json), and prints, side by side, each honest candidate's judge and event-loop
geometric means, their ratios, each benchmark's ratio, the wall clock of its judging and where
that went, and the GPU's SM clock, temperature and power while each judging and each loop ran
(`gpu_clocks.py`; DIR/side_by_side.json). `--honest` picks the honest candidates (default: the
seed, the reference and fast_bf16; `people` adds the candidates as kernel authors write them,
judges/tests/programs/trimul/: Triton autotuning, torch.compile twice, load_inline, float16
autocast). Each loop builds `load_inline` extensions in a folder of its own, as a trial does.
docs/task.md and judges/README.md quote the figures it produced. Each
batch is submitted once every GPU is idle with its next trial prepared (a candidate that
arrives at an idle judge); `--back-to-back` submits it as soon as the last record is out.
`--trace` judges a copy of the task whose package sets `trace_calls` (judges/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "judges" / "tests"))  # the GPU judge tests' helpers

from gpu_clocks import GpuClocks  # noqa: E402  (this folder, the script's, is on the path)
from gpu_judge_support import (  # noqa: E402
    ATTACKS,
    HONEST_SET,
    PROGRAMS,
    TASK,
    submit_program,
    verdict,
    wait_record,
)

from judges.service.process import JudgeProcess  # noqa: E402

HONEST = {
    "seed": TASK / "solution" / "solution.py",
    "reference": TASK / "judge" / "trimul" / "reference.py",
    "fast_bf16": REPO / "judges" / "benchmarks" / "trimul_candidates" / "fast_bf16.py",
    **{name.removesuffix(".py"): PROGRAMS / name for name in HONEST_SET},
}
STANDARD = ("seed", "reference", "fast_bf16")


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
        # the tests' calls are untimed first calls of their shapes: where compiling happens
        "testsSeconds": round(sum(c["time"] for c in cases if c["kind"] == "test") / 1e9, 3),
    }  # fmt: skip


#: flag -> the package key it sets in a copy of the task, its value, and what that does
PACKAGE_FLAGS = {
    "--trace": ("trace_calls", True, "every timed call's figures in the records"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--phase", choices=("figures", "attacks", "all"), default="all")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="judgings and event-loop timings of each honest candidate",
    )
    parser.add_argument(
        "--attacks",
        default="all",
        help="attacks to judge, comma-separated file names (default: all)",
    )
    parser.add_argument("--honest", default=",".join(STANDARD),
                        help="honest candidates to judge and time, by label, comma-separated, "
                        f"of {', '.join(HONEST)}; `people` for all of "
                        "judges/tests/programs/trimul's honest set "
                        "(default: %(default)s)")  # fmt: skip
    parser.add_argument("--loops", choices=("both", "plain"), default="both",
                        help="event loops per honest candidate: without and with the re-check "
                        "of every timed call, or without only (default: %(default)s)")  # fmt: skip
    parser.add_argument("--gpus", default="0", help="the judge's --gpus (default: %(default)s)")
    parser.add_argument("--at-once", type=int, default=1, help="submissions in flight at once")
    parser.add_argument("--back-to-back", action="store_true",
                        help="submit each batch as soon as the last record is out, rather than "
                        "once every GPU is idle with its next trial prepared")  # fmt: skip
    for flag, (key, value, effect) in PACKAGE_FLAGS.items():
        parser.add_argument(flag, action="store_true", help=f"judge a copy of the task whose "
                            f"package sets {key}: {str(value).lower()}: {effect}")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with GpuClocks(int(args.gpus.split(",")[0])) as clocks:
        return run(parser, args, clocks)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, clocks: GpuClocks) -> int:
    runs: list[tuple[str, Path]] = []
    labels = [label for part in args.honest.split(",") for label in (
        [n.removesuffix(".py") for n in HONEST_SET] if part == "people" else [part])]  # fmt: skip
    unknown = sorted(set(labels) - set(HONEST))
    if unknown:
        parser.error(f"--honest: unknown {unknown}; choose from {sorted(HONEST)} or people")
    if args.phase in ("figures", "all"):
        for label in labels:
            runs += [(label, HONEST[label])] * args.repeat
    if args.phase in ("attacks", "all"):
        chosen = sorted(ATTACKS) if args.attacks == "all" else args.attacks.split(",")
        if set(chosen) - set(ATTACKS):
            parser.error(f"--attacks: unknown {sorted(set(chosen) - set(ATTACKS))}; "
                         f"choose from {sorted(ATTACKS)}")  # fmt: skip
        runs += [(name, PROGRAMS / name) for name in chosen]
        runs += [("after_hang_seed", HONEST["seed"])]
        runs += [
            (name, PROGRAMS / name)
            for name in ("side_stream.py", "early_return.py", "background_gpu.py")
        ]
    results: list[dict[str, Any]] = []
    state = Path(tempfile.mkdtemp(prefix="trimul-judge-"))  # not under --out: many files
    keys = {key: value for flag, (key, value, _) in PACKAGE_FLAGS.items()
            if getattr(args, flag[2:].replace("-", "_"))}  # fmt: skip
    task = task_copy(state / "task", keys) if keys else TASK
    with JudgeProcess(state / "judge", "--task", str(task), "--gpus", args.gpus,
                      startup_timeout=300) as judge:  # fmt: skip
        for at in range(0, len(runs), args.at_once):
            batch = runs[at : at + args.at_once]
            if not args.back_to_back:
                settle(judge.url)
            started, began = time.monotonic(), time.time()
            sids = [submit_program(judge.url, f"{program.read_text()}\n# {at + n}\n")
                    for n, (_, program) in enumerate(batch)]  # fmt: skip
            for (label, _), sid in zip(batch, sids, strict=True):
                record = wait_record(judge.url, sid, timeout=1200)
                results.append(summary(label, record, time.monotonic() - started))
                results[-1]["clocks"] = clocks.during(began, time.time())
                item = results[-1]
                print(f"{label}: {item['verdict']} {item['valueUs']} us ({item['seconds']} s) "
                      f"{(item['firstFailure'] or '')[:200]}", flush=True)  # fmt: skip
            (args.out / "acceptance.json").write_text(json.dumps(results, indent=1))
    if args.phase in ("figures", "all"):
        loops = []
        for label in [label for label in dict.fromkeys(labels) for _ in range(args.repeat)]:
            program = HONEST[label]
            for recheck in ([], ["--recheck"]) if args.loops == "both" else ([],):
                out = args.out / f"loop-{label}.json"
                loop = REPO / "judges" / "benchmarks" / "trimul_event_loop.py"
                # A folder of its own for `load_inline`'s builds, as a trial has: a build cut
                # short leaves its lock in the shared one, and every later build waits on it.
                began = time.time()
                with tempfile.TemporaryDirectory(prefix="trimul-loop-") as extensions:
                    env = {**os.environ, "TORCH_EXTENSIONS_DIR": extensions}
                    subprocess.run([sys.executable, str(loop), str(program), "--out", str(out),
                                    *recheck], check=False, env=env)  # fmt: skip
                if out.exists():
                    loops.append({"label": label, **json.loads(out.read_text()),
                                  "clocks": clocks.during(began, time.time())})  # fmt: skip
                    out.unlink()
                    (args.out / "event_loop.json").write_text(json.dumps(loops, indent=1))
        side_by_side(results, loops, args.out / "side_by_side.json")
    return 0


def task_copy(folder: Path, keys: dict[str, Any]) -> Path:
    """A copy of the task whose judge package sets `keys` (e.g. `trace_calls: true`)."""
    import shutil

    import yaml

    copy = folder / TASK.name
    shutil.copytree(TASK, copy)
    config = copy / "judge" / "trimul" / "config.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), **keys}))
    return copy


def settle(url: str, limit: float = 180.0) -> None:
    """Wait until every GPU is idle and its next trial prepared (a candidate arriving at an
    idle judge); at most `limit` seconds (a GPU that prepares nothing is idle at once)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        gpus = httpx.get(f"{url}/health", timeout=10).json()["gpu"]["gpus"]
        if all(g["state"] == "idle" and g.get("prepared") in ("waiting", None) for g in gpus):
            return
        time.sleep(0.1)


def side_by_side(results: list[dict[str, Any]], loops: list[dict[str, Any]], out: Path) -> None:
    """Each honest judging next to its candidate's event-loop figure (the n-th judging of a
    candidate beside its n-th loop), with its phases; then each candidate's ratios."""
    loops_of: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for loop in loops:
        if loop.get("geomeanUs") is not None:
            loops_of.setdefault((loop["label"], bool(loop.get("recheck"))), []).append(loop)
    seen: dict[str, int] = {}
    rows = []
    for item in results:
        base = item["label"].removeprefix("after_hang_")
        if base not in HONEST or item["valueUs"] is None:
            continue
        n = seen[base] = seen.get(base, -1) + 1
        plain, rechecked = loops_of.get((base, False), []), loops_of.get((base, True), [])
        plain_loop = plain[min(n, len(plain) - 1)] if plain else {}
        loop = plain_loop.get("geomeanUs")
        checked = rechecked[min(n, len(rechecked) - 1)]["geomeanUs"] if rechecked else None
        timing = item.get("timing") or {}
        loop_means = {b["index"]: b["meanUs"] for b in plain_loop.get("benchmarks", [])}
        rows.append({
            "label": item["label"], "judgeUs": item["valueUs"], "loopUs": loop,
            "ratio": item["valueUs"] / loop if loop else None,
            "checkedLoopUs": checked,
            "ratioToChecked": item["valueUs"] / checked if checked else None,
            # each benchmark's judge / loop: a geometric mean can hide errors of opposite sign
            "perBenchmark": [round(b["meanUs"] / loop_means[b["index"]], 4)
                             for b in item["benchmarks"] if loop_means.get(b["index"])],
            "judgeClocks": item.get("clocks"), "loopClocks": plain_loop.get("clocks"),
            "judgedSeconds": timing.get("trialSeconds"), "gpu": timing.get("gpu"),
            "prepared": timing.get("prepared"), "phases": timing.get("phases"),
        })  # fmt: skip
        ratio = f"{rows[-1]['ratio']:.4f}" if loop else "n/a"
        to_checked = f"{rows[-1]['ratioToChecked']:.4f}" if checked else "n/a"
        print(f"{item['label']:>12}: judge {item['valueUs']:.1f} us, loop {loop} us (ratio "
              f"{ratio}), loop checking each call {checked} us (ratio {to_checked}), judged in "
              f"{timing.get('trialSeconds')} s, phases {timing.get('phases')}; per benchmark "
              f"{rows[-1]['perBenchmark']}; SM clock (MHz, medians) judge "
              f"{(item.get('clocks') or {}).get('smClockMHz')}, loop "
              f"{(plain_loop.get('clocks') or {}).get('smClockMHz')}", flush=True)  # fmt: skip
    for label in dict.fromkeys(row["label"] for row in rows):
        ratios = sorted(row["ratio"] for row in rows if row["label"] == label and row["ratio"])
        if ratios:
            print(
                f"{label:>12}: ratio judge/loop over {len(ratios)}: min {ratios[0]:.4f}, "
                f"median {ratios[len(ratios) // 2]:.4f}, max {ratios[-1]:.4f}",
                flush=True,
            )
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
