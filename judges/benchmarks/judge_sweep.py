"""The judge's scaling sweep and the verdict cache's effect (for `benchmarks/judge_throughput.py
--ray`, the recipe's benchmark of the judge through its client).

One task (Polyomino by default), one run, every figure a ratio to the single-process judge
measured in the same run. The judges run side by side and are measured in `--rounds`
interleaved rounds (medians reported), so a host busy with other work slows them alike:

1. **single process** (`python -m judges --workers W`), cache off (the path without the cache)
   and cache on (distinct candidates: every one a miss), and optionally the judge of another
   checkout (`--baseline-tree`, e.g. the code before the cache); and the per-case cost of one
   worker running the cases one after another;
2. **Ray** (`--ray`): for each worker count of `--sweep` a local Ray cluster
   (`ray.cluster_utils.Cluster`, one node of that many CPUs) and `python -m judges --ray ADDR`;
   then Ray's per-task overhead (a no-op task's round trip, one at a time and many at once);
3. **cache**: steps of `--step` candidates of which a fraction `--duplicates` repeats one
   judged in the step before, with the cache off and on (side by side, interleaved rounds):
   a step's wall time and CPU seconds, and their ratios.

Each round measures the latency of one candidate alone and the candidates per minute for
`--submissions` at once. Candidates are the task's seed program with a distinct trailing
comment each, so no two are identical unless a duplicate is meant.
"""

from __future__ import annotations

import argparse
import os
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

ROOT = Path(__file__).resolve().parents[2]
POLL_S = 0.05


class Judge:
    """`python -m judges --port 0 ...` started from `tree` (this checkout by default)."""

    def __init__(self, flags: list[str], tree: Path = ROOT) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "judges", "--port", "0", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tree,
        )  # fmt: skip
        self.roots = {self.process.pid}  # whose CPU time counts as this judge's
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


def one_round(judge: Judge, pid: str, lang: str, variants: Variants, submissions: int) -> dict:
    """Latency of one candidate alone, then candidates per minute for `submissions` at once and
    the CPU seconds the judge's processes (its Ray cluster's too) spent per candidate."""
    latency, _ = judge_one(judge.url, pid, lang, variants.next()[0])
    cpu, front = tree_cpu(judge.roots), tree_cpu({judge.process.pid})
    wall, records = batch(judge.url, pid, lang, variants.next(submissions))
    cpu = (tree_cpu(judge.roots) - cpu) / submissions
    front = (tree_cpu({judge.process.pid}) - front) / submissions
    return {"latency": latency, "per_min": 60 * submissions / wall, "cpu": cpu, "front": front,
            "records": records}  # fmt: skip


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children) from /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu(roots: set[int]) -> float:
    """CPU seconds of the processes `roots` and all their live descendants (each counting the
    children it reaped: sandboxes, compilers)."""
    found = {int(pid): stat for pid in os.listdir("/proc") if pid.isdigit()
             if (stat := _stat(pid)) is not None}  # fmt: skip
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in found.items():
        children.setdefault(parent, []).append(pid)
    total, todo, seen = 0.0, [pid for pid in roots if pid in found], set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            total += found[pid][1]
            todo.extend(children.get(pid, ()))
    return total


def my_children() -> set[int]:
    return {pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if (stat := _stat(str(pid))) is not None and stat[0] == os.getpid()}  # fmt: skip


def per_case_cost(flags: list[str], pid: str, lang: str, variants: Variants) -> float:
    """Seconds per case of one worker running the cases one after another."""
    judge = Judge([*flags, "--workers", "1", "--limit", "verdict-cache-mb=0"])
    try:
        batch(judge.url, pid, lang, variants.next(1))
        _, (record,) = batch(judge.url, pid, lang, variants.next(1))
    finally:
        judge.stop()
    return record["timing"]["casesSeconds"] / len(record["cases"])


def ray_task_overhead(address: str) -> tuple[float, float, float]:
    """A no-op Ray task's round trip on the cluster: one at a time, per task for 200 at once, and
    the submitting process's CPU per task then (what the front spends to run one task)."""
    import ray

    ray.init(address=address, logging_level="ERROR")
    try:
        noop = ray.remote(num_cpus=1)(lambda: None)
        ray.get([noop.remote() for _ in range(20)])  # workers started
        started = time.monotonic()
        for _ in range(100):
            ray.get(noop.remote())
        alone = (time.monotonic() - started) / 100
        started, cpu = time.monotonic(), time.process_time()
        ray.get([noop.remote() for _ in range(200)])
        many = (time.monotonic() - started) / 200
        driver = (time.process_time() - cpu) / 200
    finally:
        ray.shutdown()
    return alone, many, driver


def step_with_duplicates(
    options: argparse.Namespace, flags: list[str], state: str, pid: str, lang: str,
    variants: Variants,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """Steps of `--step` candidates, round(step x duplicates) of them repeats of candidates
    judged in the step before, on the single-process judge with the cache off and on (side by
    side, interleaved rounds): median wall seconds, CPU seconds and cache hits of a step."""
    repeats = round(options.step * options.duplicates)
    judges = {}
    found: dict[str, list[tuple[float, float, int]]] = {"off": [], "on": []}
    try:
        for label, megabytes in (("off", "0"), ("on", "1024")):
            judges[label] = Judge([*flags, f"--state-dir={state}-{label}",
                                   "--limit", f"verdict-cache-mb={megabytes}"])  # fmt: skip
        for _ in range(options.rounds):
            for label, judge in judges.items():
                earlier = variants.next(repeats)
                batch(judge.url, pid, lang, [*earlier, *variants.next(1)])  # the step before
                cpu = tree_cpu(judge.roots)
                wall, records = batch(
                    judge.url, pid, lang, earlier + variants.next(options.step - repeats)
                )
                hits = sum(bool(r.get("verdictCache", {}).get("hit")) for r in records)
                found[label].append((wall, tree_cpu(judge.roots) - cpu, hits))
    finally:
        for judge in judges.values():
            judge.stop()
    return {label: {"wall": statistics.median(w for w, _, _ in rows),
                    "cpu": statistics.median(c for _, c, _ in rows),
                    "hits": statistics.median(h for _, _, h in rows)}
            for label, rows in found.items()}  # fmt: skip


def start_judges(options: argparse.Namespace, flags: list[str], scratch: str, clusters: list):
    """Every judge of the sweep, started side by side (label -> Judge); each has its own state
    directory under `scratch`; the Ray clusters started are appended to `clusters`."""
    cores = str(options.workers)
    judges = {}
    for label, cache in (("single process, cache off", "0"), ("single process, cache on", "1024")):
        judges[label] = Judge([*flags, f"--state-dir={scratch}/cache-{label[-3:]}",
                               "--workers", cores,
                               "--limit", f"verdict-cache-mb={cache}"])  # fmt: skip
    if options.baseline_tree is not None:
        label = f"single process, {options.baseline_tree.name}"
        judges[label] = Judge([*flags, f"--state-dir={scratch}/baseline", "--workers", cores],
                              options.baseline_tree)  # fmt: skip
    if options.ray:
        from ray.cluster_utils import Cluster

        for workers in options.sweep:
            before = my_children()
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": workers, "include_dashboard": False})  # fmt: skip
            clusters.append((workers, cluster))
            label = f"Ray, {workers} worker{'s' * (workers > 1)}"
            judges[label] = Judge([*flags, f"--state-dir={scratch}/ray-{workers}", "--ray",
                                   cluster.address])  # fmt: skip
            judges[label].roots |= my_children() - before  # the cluster's processes
    return judges


def sweep(options: argparse.Namespace, sources: list[str], program: str, pid: str, lang: str):
    """Print the sweep's tables (see the module docstring)."""
    variants = Variants(program, "#" if lang == "python" else "//")
    clusters: list = []
    samples: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="judge-sweep-") as scratch:
        flags = [*sources]
        cost = per_case_cost([*flags, f"--state-dir={scratch}/cost"], pid, lang, variants)
        judges = {}
        try:
            judges = start_judges(options, flags, scratch, clusters)
            for judge in judges.values():  # warm: checker compiled, Ray workers started
                batch(judge.url, pid, lang, variants.next(2))
            for _ in range(options.rounds):  # interleaved, so a busy host slows all alike
                for label, judge in judges.items():
                    found = one_round(judge, pid, lang, variants, options.submissions)
                    samples.setdefault(label, []).append(found)
            overheads = [(w, ray_task_overhead(cluster.address)) for w, cluster in clusters]
        finally:
            for judge in judges.values():
                judge.stop()
            for _, cluster in clusters:
                cluster.shutdown()
        step_flags = [*flags, "--workers", str(options.workers)]
        step = step_with_duplicates(options, step_flags, f"{scratch}/step", pid, lang, variants)
    report(options, samples, cost, overheads, step)


def report(options: argparse.Namespace, samples: dict, cost: float, overheads: list, step: dict):
    medians = {label: {key: statistics.median(s[key] for s in found)
                       for key in ("latency", "per_min", "cpu", "front")}
               for label, found in samples.items()}  # fmt: skip
    first = next(iter(samples.values()))[0]["records"][0]
    base = next(iter(medians.values()))
    print(f"\n{len(first['cases'])} cases, score {first['score']:.4f}; host: "
          f"{options.workers} cores; medians of {options.rounds} interleaved rounds; "
          f"{options.submissions} candidates at once for throughput")  # fmt: skip
    print(f"{'judge':30} {'cand/min':>9} {'ratio':>6} {'latency s':>10} {'ratio':>6} "
          f"{'CPU s/cand':>11} {'ratio':>6}")  # fmt: skip
    for label, found in medians.items():
        print(f"{label:30} {found['per_min']:9.2f} {found['per_min'] / base['per_min']:6.2f} "
              f"{found['latency']:10.2f} {found['latency'] / base['latency']:6.2f} "
              f"{found['cpu']:11.2f} {found['cpu'] / base['cpu']:6.2f}")  # fmt: skip
    print(f"per-case cost, one worker, cases in sequence: {1000 * cost:.1f} ms")
    cases = len(first["cases"])
    for label, found in medians.items():
        if label.startswith("Ray"):
            print(f"{label}: the front process's own CPU {1000 * found['front'] / cases:.2f} ms "
                  "per case (HTTP, task submission, aggregation)")  # fmt: skip
    for workers, (alone, many, driver) in overheads:
        print(f"Ray no-op task on {workers} CPU(s): {1000 * alone:.2f} ms alone, "
              f"{1000 * many:.2f} ms each for 200 at once, submitter CPU "
              f"{1000 * driver:.2f} ms per task")  # fmt: skip
    off, on = step["off"], step["on"]
    print(f"step of {options.step} candidates, {round(options.step * options.duplicates)} "
          f"repeating the step before (assumed duplicate rate {options.duplicates:.0%}), medians "
          f"of {options.rounds}: cache off {off['wall']:.1f} s, {off['cpu']:.1f} CPU s "
          f"({off['hits']:g} hits); cache on {on['wall']:.1f} s, {on['cpu']:.1f} CPU s "
          f"({on['hits']:g} hits) -> {off['wall'] / on['wall']:.2f}x wall, "
          f"{off['cpu'] / on['cpu']:.2f}x CPU")  # fmt: skip
