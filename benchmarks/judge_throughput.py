"""Throughput of the local judge per task: candidates per minute and how much time is compiling.

    python benchmarks/judge_throughput.py [--task harbor/treasure_packing ...] [--suite public]
        [--submissions 3] [--workers K] [--generated-cases 70] [--seed 0] [--program PATH]
    python benchmarks/judge_throughput.py --ray [--sweep 1,2,4] [--step 8 --duplicates 0.25]
        [--baseline-tree DIR] [--task harbor/polyomino_packing] [--suite public] ...

For each task (default: the three shipped tasks) a fresh judge (`python -m judges`, 127.0.0.1)
serves the task's problem and the task's seed program (or `--program`) is judged three ways:

- **cold**: the first submission, the checker or interactor not yet compiled;
- **warm**: `--submissions` more submitted at once (checker cached in memory); this gives the
  candidates per minute;
- **restart**: one submission after restarting the judge on the same state directory (the
  checker comes from the on-disk cache).

Each line says where the time went, from the judge's `timing` record: compiling the candidate,
preparing the checker (compile when cold), and running the cases.

Suites: `public` (default) judges Polyomino on the 70 public cases (`../shared/data/frontiercs-p0`)
and Treasure Packing on FrontierCS problem 1's cases (`../shared/data/frontiercs`); it **fails
loudly when they are absent** instead of measuring another suite. `generated` judges Polyomino on
the built-in generated suite (Treasure Packing has no generated suite and is skipped). The Erdős
task's package ships with the task, so it runs on either.

`--ray` measures instead, for the first task, the single-process judge against the judge on a
local Ray cluster of 1, 2, 4, … workers (`--sweep`), and the verdict cache's effect on a step
with duplicates, all in one run (`judges/benchmarks/judge_sweep.py`).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.contract import load_contract

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
PUBLIC_CASES = SHARED / "frontiercs-p0"
FRONTIERCS = SHARED / "frontiercs"
TASKS = ("polyomino_packing", "treasure_packing", "erdos_min_overlap")


class SuiteMissing(SystemExit):
    """The requested suite's data is absent: stop, naming it, rather than measure another."""


def judge_sources(task: Path, options: argparse.Namespace, scratch: Path) -> list[str] | None:
    """The judge flags serving `task`'s problem on the requested suite; None to skip the task."""
    if (task / "judge").is_dir():
        return ["--task", str(task)]
    problem = load_contract(task).judge_problem_id
    if options.suite == "generated":
        if problem != "0":
            print(f"{task.name}: no generated suite for problem {problem}; skipped")
            return None
        return ["--generated-cases", str(options.generated_cases), "--seed", str(options.seed)]
    if problem == "0":
        if not any(PUBLIC_CASES.glob("*.in")):
            raise SuiteMissing(
                f"--suite public: the public cases are absent ({PUBLIC_CASES}/*.in); put the 70 "
                "public Polyomino cases there, or pass --suite generated"
            )
        return ["--public-cases", str(PUBLIC_CASES)]
    package = FRONTIERCS / "problems" / problem
    if not (package / "config.yaml").is_file():
        raise SuiteMissing(
            f"--suite public: FrontierCS problem {problem} is absent ({package}); put a "
            "FrontierCS algorithmic/ copy there, or leave this task out"
        )
    problems = scratch / "problems"
    problems.mkdir(exist_ok=True)
    (problems / problem).symlink_to(package)
    return ["--problems", str(problems), "--testlib", str(FRONTIERCS / "include")]


def start_judge(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m judges --port 0 ...` and return it with the address it prints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "judges", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:
        found = re.search(r"judge listening on (http://\S+)", line)
        if found:
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process, found[1]
    raise SystemExit(f"the local judge exited before listening (status {process.wait()})")


_SUBMITTED = itertools.count()


def judge_many(url: str, task: Path, program: str, count: int) -> tuple[float, list[dict]]:
    """Submit `program` `count` times at once, each copy with its own trailing comment (so the
    verdict cache answers none of them: every one is compiled and judged); wall seconds and
    each submission's judge record."""
    scorer = FrontierCSScorer.for_task(task, url, deadline_s=3600.0, poll_interval_s=0.2)
    comment = "#" if load_contract(task).fence_tag != "cpp" else "//"

    def one(_: int) -> dict[str, Any]:
        verdict = scorer(f"{program}\n{comment} submission {next(_SUBMITTED)}\n")
        sid = verdict.artifacts["submission_id"]
        record = httpx.get(f"{url}/result/{sid}", timeout=30).json()
        return {"verdict": verdict, "record": record}

    started = time.monotonic()
    with ThreadPoolExecutor(count) as pool:
        outcomes = list(pool.map(one, range(count)))
    scorer.close()
    return time.monotonic() - started, outcomes


def timing_line(label: str, outcomes: list[dict], wall: float) -> str:
    """Where the judge's time went for these submissions (means over them)."""
    timings = [o["record"].get("timing", {}) for o in outcomes]
    compile_s = statistics.fmean(t.get("compileSeconds", 0.0) for t in timings)
    checker_s = statistics.fmean(t.get("checkerSeconds", 0.0) for t in timings)
    cases_s = statistics.fmean(t.get("casesSeconds", 0.0) for t in timings)
    total = compile_s + checker_s + cases_s
    compiling = 100 * (compile_s + checker_s) / total if total else 0.0
    origins = sorted({t.get("checkerCache", "?") for t in timings})
    return (
        f"  {label:8} {len(outcomes)} in {wall:6.1f} s: candidate compile {compile_s:6.2f} s, "
        f"checker {checker_s:6.2f} s ({'/'.join(origins)}), cases {cases_s:6.2f} s "
        f"-> {compiling:4.1f}% compiling"
    )


def bench_task(task: Path, options: argparse.Namespace) -> None:
    contract = load_contract(task)
    extension = "cpp" if contract.fence_tag == "cpp" else "py"
    program_path = options.program or task / "solution" / f"solution.{extension}"
    program = program_path.read_text()
    with tempfile.TemporaryDirectory(prefix="judge-throughput-") as scratch:
        sources = judge_sources(task, options, Path(scratch))
        if sources is None:
            return
        flags = [*sources, "--state-dir", f"{scratch}/state", "--workers", str(options.workers)]
        process, url = start_judge(flags)
        try:
            cold_wall, cold = judge_many(url, task, program, 1)
            warm_wall, warm = judge_many(url, task, program, options.submissions)
        finally:
            process.terminate()
            process.wait(timeout=60)
        process, url = start_judge(flags)
        try:
            restart_wall, restart = judge_many(url, task, program, 1)
        finally:
            process.terminate()
            process.wait(timeout=60)
    verdict = warm[0]["verdict"]
    suite = warm[0]["record"].get("suite", {}).get("label", "?")
    print(f"{task.name}: {contract.solution_language}, {contract.score_direction}; suite: {suite}")
    print(f"  program {program_path.relative_to(ROOT)}: {verdict.status}, raw {verdict.raw_score}")
    print(
        f"  candidates per minute (warm, {options.submissions} at once, {options.workers} "
        f"workers): {60 * options.submissions / warm_wall:.2f}"
    )
    print(timing_line("cold", cold, cold_wall))
    print(timing_line("warm", warm, warm_wall))
    print(timing_line("restart", restart, restart_wall))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--task", type=Path, action="append",
        help="task directory (repeatable; default: the three shipped tasks)",
    )  # fmt: skip
    parser.add_argument("--suite", choices=("public", "generated"), default="public")
    parser.add_argument("--submissions", type=int, default=3, help="warm submissions at once")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--generated-cases", type=int, default=70)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--program", type=Path, help="default: each task's seed (a program implies its task)"
    )
    parser.add_argument(
        "--ray", action="store_true",
        help="the scaling sweep: single process against a local Ray cluster, and the cache",
    )  # fmt: skip
    parser.add_argument(
        "--sweep", type=lambda text: [int(part) for part in text.split(",")], default=[1, 2, 4],
        help="Ray worker counts of the sweep (default 1,2,4)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the sweep")
    parser.add_argument("--step", type=int, default=8, help="candidates of the cache's step")
    parser.add_argument(
        "--duplicates", type=float, default=0.25,
        help="fraction of the step repeating earlier candidates (assumed; default 0.25)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-tree", type=Path,
        help="also measure the single-process judge of this checkout (e.g. the code before)",
    )  # fmt: skip
    options = parser.parse_args()
    if options.program is not None and not options.task:  # the task the program belongs to
        owner = next(
            (d for d in options.program.resolve().parents if (d / "task.toml").is_file()), None
        )
        if owner is None:
            parser.error(f"--program {options.program} is in no task directory; add --task DIR")
        options.task = [owner]
    elif options.program is not None and len(options.task) > 1:
        parser.error("--program names one program: give one --task with it")
    tasks = options.task or [ROOT / "harbor" / name for name in TASKS]
    if options.ray:
        sweep_task(tasks[0].resolve(), options)
        return
    for task in tasks:
        bench_task(task.resolve(), options)


def sweep_task(task: Path, options: argparse.Namespace) -> None:
    """The scaling sweep and the cache's effect for `task` (judges/benchmarks/judge_sweep.py)."""
    sys.path.insert(0, str(ROOT / "judges" / "benchmarks"))  # the judge's own benchmarks
    from judge_sweep import sweep

    contract = load_contract(task)
    extension = "cpp" if contract.fence_tag == "cpp" else "py"
    program = (options.program or task / "solution" / f"solution.{extension}").read_text()
    with tempfile.TemporaryDirectory(prefix="judge-throughput-") as scratch:
        sources = judge_sources(task, options, Path(scratch))
        if sources is None:
            return
        language = "python" if extension == "py" else "cpp"
        pid = contract.judge_problem_id
        print(f"{task.name}: {contract.solution_language}; sweep {options.sweep}")
        sweep(options, sources, program, pid, language)


if __name__ == "__main__":
    main()
