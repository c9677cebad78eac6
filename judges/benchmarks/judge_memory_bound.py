"""How much host memory hostile candidates take while the judge runs them, with and without cgroups.

    python judges/benchmarks/judge_memory_bound.py [--cgroup auto|off] [--workers 2] [--cases 4]
        [--rounds 1] [--no-warm-up]

Starts the project's judge (`python -m judges`, a subprocess on 127.0.0.1) on a Polyomino
package of `--cases` generated cases (2 s, 256 MiB each), submits the three memory attacks of
judges/tests/programs (a user namespace with an unsized tmpfs filled with 2 GiB, 2 GiB written into
memfd files, eight forked children of 200 MiB each) `--rounds` times, and samples the host's
MemAvailable (/proc/meminfo, plus the free pages on per-CPU lists from /proc/zoneinfo) every
20 ms from one second before the first submission until the last result. It prints each
attack's run statuses and largest reported case memory, the baseline, the largest drop, that
drop per running case (divided by `--workers`, the number of programs that run at once)
against the 256 MiB limit, and, with a cgroup, the peak of all runs together. It also says where
the drop went at its lowest moment: the runs' groups (their charge then), the judge process's
own growth, this benchmark process's growth and the rest (the kernel, other processes). The
HTTP client is created and used once before the baseline, so that its set-up (TLS context,
imports: about 10 MiB, which an earlier version counted in the drop) is not measured, and the
judge first judges one harmless program (`--no-warm-up` skips it), so that its one-off first-use
growth (lazily built code paths, allocator arenas: about 1 MiB) is not counted per case.

`--cgroup off` starts the judge with per-process rlimits only (its test mode `cgroup=off`,
`judges.service.testing`, and `--accept-per-process-limits`),
to show what the attacks take without the cgroup bound: expect about 2 GiB per running case
(keep `--workers` small on a shared machine). The host is shared, so other processes move
MemAvailable too (by a few hundred MiB over a minute on a busy one): run it on a quiet machine,
compare the two modes, and read the precise figure printed with a cgroup, the peak of all the
judge's runs together (the judge's parent group, which holds every run's group; it includes the
compiler runs, bounded by `--limit compile-memory`, 1 GiB each).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

from judges.problems.polyomino.generator import generate_instance
from judges.service.process import JudgeProcess

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "judges" / "tests" / "programs"
ATTACKS = ("userns_tmpfs_fill", "memfd_fill", "fork_children_fill")
LIMIT_BYTES = 256 << 20
HARMLESS = b"int main() { return 0; }\n"
MIB = 1 << 20
_PCP_COUNT = re.compile(r"^\s+count:\s+(\d+)", re.MULTILINE)


def mem_available() -> int:
    """The host's MemAvailable plus the free pages cached on per-CPU lists, in bytes.

    Pages a killed program frees often land on per-CPU free lists, which MemAvailable does not
    count (on a 16-core host, up to ~150 MiB for a moment); they are free all the same.
    """
    available = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            available = int(line.split()[1]) * 1024
    cached = sum(int(n) for n in _PCP_COUNT.findall(Path("/proc/zoneinfo").read_text()))
    return available + cached * os.sysconf("SC_PAGE_SIZE")


def anonymous_bytes(pid: int | str) -> int:
    """A process's resident anonymous memory (RssAnon), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass(frozen=True)
class Sample:
    moment: float
    available: int
    runs: int  # the charge of all runs' groups now (0 without cgroups)
    judge: int  # the judge process's RssAnon
    own: int  # this process's RssAnon


class Sampler(threading.Thread):
    """Samples MemAvailable, the runs' charge and both processes' memory every 20 ms."""

    def __init__(self, judge_pid: int, usage: Path | None) -> None:
        super().__init__(daemon=True)
        self.judge_pid = judge_pid
        self.usage = usage
        self.samples: list[Sample] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            runs = int(self.usage.read_text().split()[0]) if self.usage else 0
            self.samples.append(
                Sample(
                    time.monotonic(),
                    mem_available(),
                    runs,
                    anonymous_bytes(self.judge_pid),
                    anonymous_bytes("self"),
                )
            )
            time.sleep(0.02)


def package(root: Path, cases: int) -> Path:
    problem = root / "problems" / "0"
    (problem / "testdata").mkdir(parents=True)
    for number in range(1, cases + 1):
        (problem / "testdata" / f"{number}.in").write_text(generate_instance(100 + number, 1))
    (problem / "config.yaml").write_text(
        f"time: 2s\nmemory: 256m\nsubtasks:\n- score: 100\n  n_cases: {cases}\n"
    )
    return root / "problems"


def runs_group_file(bound_line: str, names: tuple[str, ...]) -> Path | None:
    """A file of the parent group under which the judge creates one group per run (named in
    its start-up line): the first of `names` it has; None without cgroups."""
    if " under " not in bound_line:
        return None
    parent = Path(bound_line.split(" under ", 1)[1].split(",")[0].split(" (")[0])
    return next((parent / name for name in names if (parent / name).is_file()), None)


def runs_peak(bound_line: str) -> int | None:
    """The peak memory of all the judge's runs together; None without cgroups."""
    peak = runs_group_file(bound_line, ("memory.max_usage_in_bytes", "memory.peak"))
    return int(peak.read_text().split()[0]) if peak else None


def submit(client: httpx.Client, url: str, code: bytes) -> int:
    """Submit `code` for problem 0; its sid."""
    answer = client.post(
        f"{url}/submit",
        data={"pid": "0", "lang": "cpp"},
        files={"code": ("solution.cpp", code, "text/x-c++src")},
        timeout=30,
    )
    return answer.json()["sid"]


def wait_final(client: httpx.Client, url: str, sid: int) -> dict:
    while True:
        answer = client.get(f"{url}/result/{sid}", timeout=10).json()
        if answer["status"] != "queued":
            return answer
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cgroup", choices=("auto", "off"), default="auto")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="judge-memory-bound-") as temporary:
        root = Path(temporary)
        flags = ["--problems", str(package(root, args.cases)), "--workers", str(args.workers)]
        if args.cgroup == "off":
            flags.append("--accept-per-process-limits")
        judge = JudgeProcess(root / "state", *flags, test_mode=(f"cgroup={args.cgroup}",))
        with judge, httpx.Client() as client:
            bound = [
                line.split("sandbox bound: ", 1)[1]
                for line in judge.log_path.read_text().splitlines()
                if "sandbox bound: " in line
            ]
            client.get(f"{judge.url}/health", timeout=10).raise_for_status()
            if args.warm_up:
                wait_final(client, judge.url, submit(client, judge.url, HARMLESS))
            usage = runs_group_file(
                bound[0] if bound else "", ("memory.usage_in_bytes", "memory.current")
            )
            sampler = Sampler(judge.process.pid, usage)
            sampler.start()
            time.sleep(1.0)
            started = time.monotonic()
            sids = []
            for _ in range(args.rounds):
                for name in ATTACKS:
                    code = (PROGRAMS / f"{name}.cpp").read_bytes()
                    sids.append((name, submit(client, judge.url, code)))
            results = [(name, wait_final(client, judge.url, sid)) for name, sid in sids]
            sampler.stop.set()
            sampler.join()
            together = runs_peak(bound[0] if bound else "")
    before = [sample for sample in sampler.samples if sample.moment < started]

    def baseline(field: str) -> float:
        return statistics.median(getattr(sample, field) for sample in before)

    lowest = min(sampler.samples, key=lambda sample: sample.available)
    drop = baseline("available") - lowest.available
    print(f"judge: {bound[0][:40] if bound else '?'}… workers={args.workers} cases={args.cases}")
    for name in ATTACKS:
        statuses: Counter[str] = Counter()
        memory = 0
        for attack, result in results:
            if attack != name:
                continue
            for case in result.get("cases", []):
                statuses[case["runStatus"]] += 1
                memory = max(memory, case["memory"])
            if result["status"] != "done":
                statuses[f"error: {result.get('error', '')[:60]}"] += 1
        print(f"  {name:20s} {dict(statuses)}  largest case memory {memory / MIB:.0f} MiB")
    print(
        f"MemAvailable: baseline {baseline('available') / MIB:.0f} MiB, lowest "
        f"{lowest.available / MIB:.0f} MiB, largest drop {drop / MIB:.0f} MiB over "
        f"{len(sampler.samples)} samples ({time.monotonic() - started:.0f} s)"
    )
    parts = {
        "the runs' groups": lowest.runs - baseline("runs"),
        "the judge process": lowest.judge - baseline("judge"),
        "this benchmark process": lowest.own - baseline("own"),
    }
    parts["the rest (kernel, other processes)"] = drop - sum(parts.values())
    print(
        "at the lowest moment, the drop went to: "
        + ", ".join(f"{where} {size / MIB:+.1f} MiB" for where, size in parts.items())
    )
    if together is not None:
        print(f"peak of all runs together (the judge's cgroup subtree): {together / MIB:.0f} MiB")
    per_case = drop / args.workers
    excess = per_case - LIMIT_BYTES
    if excess < 0:
        verdict = f"below the {LIMIT_BYTES // MIB} MiB limit per case"
    elif excess <= MIB:
        verdict = f"at the {LIMIT_BYTES // MIB} MiB limit per case (+{excess / MIB:.1f} MiB)"
    else:
        verdict = f"ABOVE the {LIMIT_BYTES // MIB} MiB limit per case (+{excess / MIB:.1f} MiB)"
    print(f"drop per running case: {per_case / MIB:.1f} MiB, {verdict}")
    runs = parts["the runs' groups"] / args.workers
    print(f"runs' groups per running case at that moment: {runs / MIB:.1f} MiB")


if __name__ == "__main__":
    main()
