"""Throughput of the local judge: candidates per minute and per-case latency, in one run.

    python benchmarks/judge_throughput.py [--submissions 3] [--workers K]
        [--suite public|generated] [--generated-cases 70] [--seed 0] [--program PATH]

Starts the project's judge (`python -m judges`, a subprocess on 127.0.0.1) on the 70 public
Polyomino cases (a FrontierCS package of symlinks into ../shared/data/frontiercs-p0), or on the
built-in generated suite when ../shared is absent or `--suite generated` is given, and says
which. It submits the program (default: the task's seed) `--submissions` times at once through
the harness's judge client and prints the score, candidates per minute, per-submission latency
and per-case latency (the judge's wall time per case run, and the average worker-seconds spent
per judged case), with the number of workers.
"""

from __future__ import annotations

import argparse
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

import httpx

from harness.scorer import FrontierCSScorer

ROOT = Path(__file__).resolve().parents[1]
TASK_DIR = ROOT / "harbor" / "polyomino_packing"
PUBLIC_CASES = ROOT.parent / "shared" / "data" / "frontiercs-p0"


def public_package(root: Path) -> Path | None:
    """A problem-0 package under `root` whose testdata link to the public cases; None if absent."""
    inputs = sorted(PUBLIC_CASES.glob("*.in"), key=lambda p: int(p.stem))
    if not inputs:
        return None
    (root / "0" / "testdata").mkdir(parents=True)
    (root / "0" / "config.yaml").write_text(
        "type: default\ntime: 2s\nmemory: 256m\n"
        f"subtasks:\n- score: 100\n  n_cases: {len(inputs)}\n"
    )
    for path in inputs:
        (root / "0" / "testdata" / path.name).symlink_to(path)
    return root


def start_judge(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m judges --port 0 ...` and return it with the address it prints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "judges", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    for line in process.stdout:
        found = re.search(r"judge listening on (http://\S+)", line)
        if found:
            # Keep draining the judge's log so it never blocks on a full pipe.
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process, found[1]
    raise SystemExit(f"the local judge exited before listening (status {process.wait()})")


def summary(values: list[float], unit: str) -> str:
    """`mean / p50 / p95` of `values` in `unit`."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"mean {statistics.fmean(ordered):.3f} {unit}, p50 {statistics.median(ordered):.3f} {unit},"
        f" p95 {p95:.3f} {unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--suite", choices=("public", "generated"), default="public")
    parser.add_argument("--generated-cases", type=int, default=70)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--program", type=Path, default=TASK_DIR / "solution" / "solution.cpp")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="judge-throughput-") as scratch:
        problems = public_package(Path(scratch) / "problems") if options.suite == "public" else None
        if problems is not None:
            suite = f"the {len(list(PUBLIC_CASES.glob('*.in')))} public FrontierCS cases"
            judge_args = ["--problems", str(problems)]
        else:
            if options.suite == "public":
                print(f"note: {PUBLIC_CASES} is absent; using the generated suite instead")
            suite = f"the generated suite ({options.generated_cases} cases, seed {options.seed})"
            judge_args = [
                "--generated-cases",
                str(options.generated_cases),
                "--seed",
                str(options.seed),
            ]
        state = Path(scratch) / "state"
        judge_args += ["--state-dir", str(state), "--workers", str(options.workers)]
        process, url = start_judge(judge_args)
        try:
            report(url, suite, options)
        finally:
            process.terminate()
            process.wait(timeout=30)


def report(url: str, suite: str, options: argparse.Namespace) -> None:
    """Submit the program concurrently, then print throughput and latency."""
    program = options.program.read_text()
    scorer = FrontierCSScorer.for_task(TASK_DIR, url, "0", deadline_s=3600.0, poll_interval_s=0.2)

    def timed(_: int) -> tuple[float, object]:
        started = time.monotonic()
        verdict = scorer(program)
        return time.monotonic() - started, verdict

    started = time.monotonic()
    with ThreadPoolExecutor(options.submissions) as pool:
        outcomes = list(pool.map(timed, range(options.submissions)))
    elapsed = time.monotonic() - started

    case_seconds: list[float] = []
    for _, verdict in outcomes:
        answer = httpx.get(f"{url}/result/{verdict.artifacts['judge_sid']}", timeout=30).json()
        case_seconds += [case["time"] / 1e9 for case in answer.get("cases", [])]
    verdict = outcomes[0][1]
    ratios = verdict.artifacts.get("case_ratios", [])
    print(f"judge: {url}, workers: {options.workers}, suite: {suite}")
    print(f"program: {options.program} ({verdict.status}: {verdict.message})")
    print(f"score: {verdict.raw_score} ({sum(r > 0 for r in ratios)}/{len(ratios)} cases valid)")
    print(
        f"candidates per minute: {60 * len(outcomes) / elapsed:.2f} "
        f"({len(outcomes)} submitted at once, all final after {elapsed:.1f} s)"
    )
    print(f"per-submission latency: {summary([seconds for seconds, _ in outcomes], 's')}")
    print(
        f"per-case latency, program run as timed by the judge ({len(case_seconds)} runs): "
        f"{summary(case_seconds, 's')}"
    )
    # The judge reports no per-case timestamps, so the full cost (sandbox start, checker,
    # compile share) is only known on average: worker-seconds spent per judged case.
    cost = elapsed * options.workers / max(len(case_seconds), 1)
    print(
        f"per-case judging cost (worker-seconds per case, incl. compile and checker): {cost:.3f} s"
    )


if __name__ == "__main__":
    main()
