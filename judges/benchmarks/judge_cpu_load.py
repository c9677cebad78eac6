"""Whether a deterministic interactive candidate scores the same on a quiet host and a loaded one.

    python judges/benchmarks/judge_cpu_load.py [--hogs 24] [--rounds 100000] [--cases 3]
        [--workers 2] [--repeats 1]

Starts the project's judge (`python -m judges`, a subprocess on 127.0.0.1) on an interactive
problem built here: the interactor sends `--rounds` numbers one at a time and checks that each
answer is twice the number modulo 1000003; the candidate answers wrongly when the number is a
multiple of 3, so every case scores a fixed ratio of about 2/3 and the score is a pure function
of the cases. Each round is a round trip between two sandboxes, so a case needs little CPU
(about 0.13 s for 100 000 rounds) but many wake-ups: the kind of case a loaded host used to turn
into "killed at the wall-clock limit" after a fraction of its CPU time.

The candidate is judged once to warm the judge (the interactor is compiled), then `--repeats`
times on the quiet host, then `--repeats` times with `--hogs` CPU-bound processes running
beside the judge, each started in a session of its own (setsid: under autogroup, each weighs as
much as a whole login session). It prints each judgement's score and, per case, its run status,
elapsed time, CPU time and the time it waited for a CPU, and exits 1 unless every judgement
gave the same record (score, statuses, messages).

The hogs take every CPU of the host while they run (a few seconds per judgement): run it on a
machine you may load, and keep `--hogs` modest on a shared one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from judges.service.process import JudgeProcess

INTERACTOR = r"""
// Echo rounds: sends R numbers one at a time; each answer must be twice the number mod P.
#include <cstdio>
int main(int argc, char** argv) {
    FILE* in = fopen(argv[1], "r");
    long long rounds, seed;
    if (!in || fscanf(in, "%lld %lld", &rounds, &seed) != 2) {
        fprintf(stderr, "bad input\n");
        return 3;
    }
    const long long P = 1000003;
    long long right = 0;
    printf("%lld\n", rounds);
    fflush(stdout);
    for (long long i = 1; i <= rounds; ++i) {
        long long x = seed * i % P, y;
        printf("%lld\n", x);
        fflush(stdout);
        if (scanf("%lld", &y) != 1) {
            fprintf(stderr, "wrong answer: no answer in round %lld\n", i);
            return 1;
        }
        if (y == 2 * x % P) ++right;
    }
    double ratio = (double)right / rounds;
    fprintf(stderr, "points %.10f Ratio: %.9f (%lld of %lld rounds)\n",
            ratio, ratio, right, rounds);
    return ratio == 1.0 ? 0 : 7;
}
"""

CANDIDATE = r"""
#include <cstdio>
int main() {
    long long rounds, x;
    if (scanf("%lld", &rounds) != 1) return 0;
    for (long long i = 0; i < rounds; ++i) {
        if (scanf("%lld", &x) != 1) return 0;
        printf("%lld\n", x % 3 == 0 ? x : 2 * x % 1000003);  // wrong on multiples of 3
        fflush(stdout);
    }
}
"""


def build_problem(root: Path, rounds: int, cases: int) -> tuple[Path, Path]:
    """The package `echo` (interactive, 2 s, 256 MiB) and a testlib folder for it (the
    interactor needs no testlib, the loader only asks for the file)."""
    problem = root / "problems" / "echo"
    (problem / "testdata").mkdir(parents=True)
    for case in range(1, cases + 1):
        (problem / "testdata" / f"{case}.in").write_text(f"{rounds} {case * 7919}\n")
        (problem / "testdata" / f"{case}.ans").write_text("")
    (problem / "interactor.cc").write_text(INTERACTOR)
    (problem / "config.yaml").write_text(
        "type: interactive\ninteractor: interactor.cc\ntime: 2s\nmemory: 256m\n"
        f"subtasks:\n  - score: 100\n    n_cases: {cases}\n"
    )
    testlib = root / "testlib"
    testlib.mkdir()
    (testlib / "testlib.h").write_text("// not used by this problem's interactor\n")
    return root / "problems", testlib


def judge_once(url: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/submit",
        data={"pid": "echo", "lang": "cpp"},
        files={"code": ("solution.cpp", CANDIDATE.encode(), "text/x-c++src")},
        timeout=30,
    )
    answer.raise_for_status()
    sid = answer.json()["sid"]
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        record = httpx.get(f"{url}/result/{sid}", timeout=30).json()
        if record["status"] != "queued":
            return record
        time.sleep(0.2)
    raise RuntimeError(f"submission {sid} was not judged within 30 minutes")


def verdict(record: dict[str, Any]) -> tuple[Any, ...]:
    """What must not depend on the host: the score and each case's status and message."""
    if record.get("status") != "done":
        return (record.get("status"), record.get("error"))
    cases = tuple((case["runStatus"], case["msg"]) for case in record["cases"])
    return record["score"], cases


def describe(label: str, record: dict[str, Any]) -> str:
    if record.get("status") != "done":
        return f"{label:<10} {record.get('status')}: {record.get('error')}"
    cases = "; ".join(
        f"{case['runStatus']} {case['time'] / 1e9:.2f} s, CPU {case['cpuTime'] / 1e9:.3f} s, "
        f"waited {case.get('waitTime', 0) / 1e9:.2f} s"
        for case in record["cases"]
    )
    return f"{label:<10} score {record['score']:.4f}  {cases}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hogs", type=int, default=24, help="CPU-bound processes (default 24)")
    parser.add_argument("--rounds", type=int, default=100_000, help="round trips per case")
    parser.add_argument("--cases", type=int, default=3, help="cases of the problem (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="judge --workers (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="judgements per condition")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="judge-cpu-load-") as scratch:
        Path(scratch).chmod(0o755)  # the sandbox user reads the testlib folder there
        problems, testlib = build_problem(Path(scratch), args.rounds, args.cases)
        flags = ["--problems", str(problems), "--testlib", str(testlib)]
        flags += ["--workers", str(args.workers)]
        with JudgeProcess(Path(scratch) / "state", *flags) as judge:
            bound = [line for line in judge.log_path.read_text().splitlines() if "bound:" in line]
            print(bound[-1].split("INFO ")[-1] if bound else "(no bound line)")
            judge_once(judge.url)  # compiles the interactor
            records = [("quiet", judge_once(judge.url)) for _ in range(args.repeats)]
            hog = [sys.executable, "-c", "while True: pass"]
            hogs = [subprocess.Popen(hog, start_new_session=True) for _ in range(args.hogs)]
            try:
                label = f"{args.hogs} hogs"
                records += [(label, judge_once(judge.url)) for _ in range(args.repeats)]
            finally:
                for process in hogs:
                    process.kill()
                for process in hogs:
                    process.wait()
    for label, record in records:
        print(describe(label, record))
    done = all(record.get("status") == "done" for _, record in records)
    same = done and len({verdict(record) for _, record in records}) == 1
    print("identical records" if same else "RECORDS DIFFER (or not judged)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
