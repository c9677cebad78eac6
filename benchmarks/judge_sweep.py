"""The judge's scaling sweep and the verdict cache's effect (`judge_throughput.py --ray`).

One task (Polyomino by default), one run, every figure a ratio to the single-process judge
measured in the same run:

1. **single process** (`python -m judges --workers W`, cache off = the path before the cache,
   then cache on with distinct candidates; optionally the code of another checkout,
   `--baseline-tree`): latency of one candidate alone, candidates per minute for
   `--submissions` at once, and the per-case cost with one worker;
2. **Ray** (`--ray`): for each worker count of `--sweep` a local Ray cluster
   (`ray.cluster_utils.Cluster`, one node of that many CPUs) and `python -m judges --ray ADDR`:
   the same latency and throughput, their ratios to (1), and Ray's per-task overhead (a no-op
   task's round trip, one at a time and many at once) next to the measured per-case cost;
3. **cache**: a step of `--step` candidates of which a fraction `--duplicates` repeats one
   judged earlier, with the cache off and on: the step's wall time and the ratio.

Candidates are the task's seed program with a distinct trailing comment each, so no two are
identical unless a duplicate is meant; every one is compiled and judged.
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 0.05


class Judge:
    """`python -m judges --port 0 ...` started from `tree` (this checkout by default)."""

    def __init__(self, flags: list[str], tree: Path = ROOT) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "judges", "--port", "0", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tree,
        )  # fmt: skip
        assert self.process.stdout is not None
        lines = []
        for line in self.process.stdout:
            lines.append(line)
            if "judge listening on " in line:
                self.url = line.split("judge listening on ", 1)[1].strip()
                threading.Thread(target=self.process.stdout.read, daemon=True).start()
                return
        raise SystemExit(f"the judge exited before listening:\n{''.join(lines[-30:])}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=120)


def judge_one(url: str, pid: str, lang: str, code: str) -> tuple[float, dict[str, Any]]:
    """Submit, poll until final: (seconds from submit to final record, the record)."""
    started = time.monotonic()
    with httpx.Client(timeout=60) as client:
        files = {"code": ("solution", code.encode(), "text/plain")}
        sid = client.post(f"{url}/submit", data={"pid": pid, "lang": lang}, files=files)
        sid.raise_for_status()
        while True:
            record = client.get(f"{url}/result/{sid.json()['sid']}").json()
            if record["status"] != "queued":
                return time.monotonic() - started, record
            time.sleep(POLL_S)


def batch(url: str, pid: str, lang: str, sources: list[str]) -> tuple[float, list[dict]]:
    """All `sources` submitted at once: (wall seconds until the last is final, records)."""
    started = time.monotonic()
    with ThreadPoolExecutor(len(sources)) as pool:
        outcomes = list(pool.map(lambda code: judge_one(url, pid, lang, code), sources))
    for _, record in outcomes:
        if record["status"] != "done":
            raise SystemExit(f"a benchmark candidate was not judged: {record.get('error')}")
    return time.monotonic() - started, [record for _, record in outcomes]


class Variants:
    """The seed program with a fresh trailing comment each time: distinct, equally costly."""

    def __init__(self, program: str, comment: str) -> None:
        self.program, self.comment, self.count = program, comment, 0

    def next(self, count: int = 1) -> list[str]:
        self.count += count
        return [f"{self.program}\n{self.comment} variant {n}\n"
                for n in range(self.count - count, self.count)]  # fmt: skip


def measure(judge: Judge, pid: str, lang: str, variants: Variants, submissions: int) -> dict:
    """Warm up (cold compile of checker and workers), then latency of one alone (median of 3)
    and candidates per minute for `submissions` at once."""
    batch(judge.url, pid, lang, variants.next(2))
    latencies = [judge_one(judge.url, pid, lang, code)[0] for code in variants.next(3)]
    wall, records = batch(judge.url, pid, lang, variants.next(submissions))
    cases = len(records[0]["cases"])
    return {
        "latency": statistics.median(latencies),
        "per_min": 60 * submissions / wall,
        "cases": cases,
        "score": records[0]["score"],
    }


def per_case_cost(flags: list[str], pid: str, lang: str, variants: Variants) -> float:
    """Seconds per case of one worker running the cases one after another."""
    judge = Judge([*flags, "--workers", "1", "--verdict-cache-mb", "0"])
    try:
        batch(judge.url, pid, lang, variants.next(1))
        _, (record,) = batch(judge.url, pid, lang, variants.next(1))
    finally:
        judge.stop()
    return record["timing"]["casesSeconds"] / len(record["cases"])


def ray_task_overhead(address: str) -> tuple[float, float]:
    """A no-op Ray task's round trip on the cluster: one at a time, and per task for 200 at once."""
    import ray

    ray.init(address=address, logging_level="ERROR")
    try:
        noop = ray.remote(num_cpus=1)(lambda: None)
        ray.get([noop.remote() for _ in range(20)])  # workers started
        started = time.monotonic()
        for _ in range(100):
            ray.get(noop.remote())
        alone = (time.monotonic() - started) / 100
        started = time.monotonic()
        ray.get([noop.remote() for _ in range(200)])
        many = (time.monotonic() - started) / 200
    finally:
        ray.shutdown()
    return alone, many


def step_with_duplicates(
    flags: list[str], pid: str, lang: str, variants: Variants, step: int, duplicates: float
) -> dict[str, float]:
    """One step of `step` candidates, round(step x duplicates) of them repeats of candidates
    judged in an earlier step, with the cache off and on: wall seconds each."""
    repeats = round(step * duplicates)
    walls = {}
    for label, cache in (("off", "0"), ("on", "1024")):
        judge = Judge([*flags, "--verdict-cache-mb", cache])
        try:
            earlier = variants.next(repeats)
            batch(judge.url, pid, lang, [*earlier, *variants.next(1)])  # the earlier step
            wall, records = batch(judge.url, pid, lang, earlier + variants.next(step - repeats))
        finally:
            judge.stop()
        hits = sum(bool(r.get("verdictCache", {}).get("hit")) for r in records)
        walls[label] = wall
        walls[f"hits_{label}"] = hits
    return walls


def sweep(options: argparse.Namespace, sources: list[str], program: str, pid: str, lang: str):
    """Print the sweep's tables (see the module docstring)."""
    cores = options.workers
    comment = "#" if lang == "python" else "//"
    variants = Variants(program, comment)
    with tempfile.TemporaryDirectory(prefix="judge-sweep-") as scratch:
        flags = [*sources, "--state-dir", f"{scratch}/state"]
        rows: list[tuple[str, dict]] = []
        for label, cache, tree in (("single process, cache off", "0", ROOT),
                                   ("single process, cache on", "1024", ROOT)):  # fmt: skip
            judge = Judge([*flags, "--workers", str(cores), "--verdict-cache-mb", cache], tree)
            try:
                rows.append((label, measure(judge, pid, lang, variants, options.submissions)))
            finally:
                judge.stop()
        if options.baseline_tree is not None:
            judge = Judge([*flags, "--workers", str(cores)], options.baseline_tree)
            try:
                found = measure(judge, pid, lang, variants, options.submissions)
                rows.append((f"single process, {options.baseline_tree.name}", found))
            finally:
                judge.stop()
        cost = per_case_cost(flags, pid, lang, variants)
        overheads = []
        if options.ray:
            from ray.cluster_utils import Cluster

            for workers in options.sweep:
                cluster = Cluster(initialize_head=True, head_node_args={
                    "num_cpus": workers, "include_dashboard": False})  # fmt: skip
                try:
                    judge = Judge([*flags, "--ray", cluster.address])
                    try:
                        found = measure(judge, pid, lang, variants, options.submissions)
                    finally:
                        judge.stop()
                    rows.append((f"Ray, {workers} worker{'s' * (workers > 1)}", found))
                    overheads.append((workers, ray_task_overhead(cluster.address)))
                finally:
                    cluster.shutdown()
        step = step_with_duplicates([*flags, "--workers", str(cores)], pid, lang, variants,
                                    options.step, options.duplicates)  # fmt: skip
    base = rows[0][1]
    print(f"\n{pid=}: {base['cases']} cases, score {base['score']:.4f}; this host has {cores} "
          f"cores; {options.submissions} candidates at once for throughput")  # fmt: skip
    print(f"{'judge':34} {'cand/min':>9} {'ratio':>6} {'latency s':>10} {'ratio':>6}")
    for label, found in rows:
        print(f"{label:34} {found['per_min']:9.2f} {found['per_min'] / base['per_min']:6.2f} "
              f"{found['latency']:10.2f} {found['latency'] / base['latency']:6.2f}")  # fmt: skip
    print(f"per-case cost, one worker, cases in sequence: {1000 * cost:.1f} ms")
    for workers, (alone, many) in overheads:
        print(f"Ray no-op task on {workers} CPU(s): {1000 * alone:.2f} ms alone, "
              f"{1000 * many:.2f} ms each for 200 at once")  # fmt: skip
    print(f"step of {options.step} candidates, {round(options.step * options.duplicates)} "
          f"repeating earlier ones (assumed duplicate rate {options.duplicates:.0%}): "
          f"cache off {step['off']:.1f} s ({step['hits_off']} hits), cache on {step['on']:.1f} s "
          f"({step['hits_on']} hits) -> {step['off'] / step['on']:.2f}x")  # fmt: skip
