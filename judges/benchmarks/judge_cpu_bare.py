"""The CPU judge's cost per candidate against a bare run of the same work, in one run.

    python judges/benchmarks/judge_cpu_bare.py CASES [--testlib DIR] [--candidates 3]
        [--baseline-tree DIR] [--source FILE]

CASES is Polyomino's public cases: a plain folder of `1.in … 70.in` (served with
`--public-cases`, checked by the built-in checker), or a FrontierCS problem package
(`config.yaml`, `chk.cc`, `testdata/`; served with `--problems`, checked by the testlib checker,
`--testlib` the folder holding `testlib.h`). The data is read where it is, never copied.

**Judge.** `python -m judges` (a subprocess, default flags, one worker) judges one warm-up
candidate (the checker is compiled, caches filled), then `--candidates` distinct ones (the seed
program with a distinct trailing comment each, so no verdict is reused), one at a time. A
candidate's CPU is what the judge's process tree spent from its submission to its final record:

- `/proc`: utime + stime + cutime + cstime of the judge's process (the sandboxes it reaped are
  in cutime/cstime: bubblewrap reaps the runner, the runner reaps the program);
- `cgroup`: where this process may make a cgroup v1 `cpuacct` group (root, say), the judge is
  started inside a fresh one and its `cpuacct.usage` is read too: every process of the tree,
  reaped or not.

**Bare.** The same work outside any sandbox, in this process: `g++` with the judge's flags, the
program on each case (stdin a file, stdout a file), and the checker on each output (the
built-in checker called in this process, or the compiled testlib checker run as a program,
compiled before timing as the judge's warm program cache is). CPU from `getrusage`.

It prints both, per candidate and their median, and the ratio. `--baseline-tree` (another
checkout, e.g. `git worktree add ../old-judge main`) also measures that tree's judge in the same
run, interleaved candidate by candidate, so a busy host weighs on both alike.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "harbor" / "polyomino_packing" / "solution" / "solution.cpp"
COMPILE = ["g++", "main.cpp", "-O2", "-pipe", "-std=gnu++17", "-o", "a"]
POLL_S = 0.25  # polling the result costs the judge CPU too: rarely
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
ANNOUNCE = "judge listening on "


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", type=Path, help="folder of N.in, or a problem package")
    parser.add_argument("--testlib", type=Path, help="folder holding testlib.h (packages)")
    parser.add_argument("--candidates", type=int, default=3, help="timed candidates (3)")
    parser.add_argument("--baseline-tree", type=Path, help="another checkout's judge, too")
    parser.add_argument("--source", type=Path, default=SEED, help="the C++ program (the seed)")
    args = parser.parse_args()
    cases = args.cases.resolve()
    package = (cases / "config.yaml").is_file()
    if package and args.testlib is None:
        parser.error("a problem package needs --testlib DIR (the folder holding testlib.h)")
    program = args.source.read_text()
    with tempfile.TemporaryDirectory(prefix="judge-cpu-bare-") as scratch:
        work = Path(scratch)
        work.chmod(0o755)
        bare = [bare_cpu(program, cases, package, args.testlib, work / f"bare-{n}")
                for n in range(args.candidates)]  # fmt: skip
        flags = _problem_flags(cases, package, args.testlib, work)
        trees = {"this tree": ROOT}
        if args.baseline_tree is not None:
            trees["baseline"] = args.baseline_tree.resolve()
        figures: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
        with contextlib.ExitStack() as stack:
            judges = {
                label: stack.enter_context(JudgeUnderTest(tree, work / label, flags))
                for label, tree in trees.items()
            }
            for judge in judges.values():
                judge.judge(f"{program}\n// warm-up\n")
            for number in range(args.candidates):
                for label, judge in judges.items():
                    figures[label].append(judge.judge(f"{program}\n// candidate {number}\n"))
    report(bare, figures, len(_case_inputs(cases, package)))
    return 0


def _problem_flags(cases: Path, package: bool, testlib: Path | None, work: Path) -> list[str]:
    if not package:
        return ["--public-cases", str(cases)]
    problems = work / "problems"
    problems.mkdir()
    (problems / "0").symlink_to(cases, target_is_directory=True)  # served where it is
    assert testlib is not None
    return ["--problems", str(problems), "--testlib", str(testlib.resolve())]


def _case_inputs(cases: Path, package: bool) -> list[Path]:
    folder = cases / "testdata" if package else cases
    numbers = sorted(int(p.stem) for p in folder.glob("*.in") if p.stem.isdigit())
    return [folder / f"{number}.in" for number in numbers]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare_cpu(
    program: str, cases: Path, package: bool, testlib: Path | None, work: Path
) -> dict[str, float]:
    """CPU seconds of compiling, running on every case and checking, outside any sandbox."""
    work.mkdir()
    checker = None
    if package:  # compiled before timing: the judge's program cache is warm too
        assert testlib is not None
        checker = work / "chk"
        subprocess.run(
            ["g++", str(cases / "chk.cc"), "-O2", "-pipe", "-std=gnu++17", "-I", str(testlib),
             "-o", str(checker)], check=True,
        )  # fmt: skip
    (work / "main.cpp").write_text(program)
    before = _children_cpu()
    subprocess.run(COMPILE, cwd=work, check=True)
    compiled = _children_cpu()
    outputs = []
    for path in _case_inputs(cases, package):
        output = work / f"{path.stem}.out"
        with open(path, "rb") as stdin, open(output, "wb") as stdout:
            subprocess.run([str(work / "a")], stdin=stdin, stdout=stdout, check=True)
        outputs.append((path, output))
    ran = _children_cpu()
    own = _self_cpu()
    if checker is None:
        from judges.problems.checkers import get_checker

        polyomino = get_checker("polyomino")
        for path, output in outputs:
            polyomino.check(polyomino.parse(path.read_text()), output.read_bytes())
    else:
        for path, output in outputs:
            answer = path.with_suffix(".ans")
            subprocess.run([str(checker), str(path), str(output), str(answer)],
                           capture_output=True, check=False)  # fmt: skip
    checked = _children_cpu() + _self_cpu() - own
    return {"compile": compiled - before, "run": ran - compiled, "check": checked - ran,
            "total": checked - before}  # fmt: skip


class JudgeUnderTest:
    """`python -m judges` from `tree` on the benchmark's problem, one worker; its CPU per
    candidate read from /proc (reaped children included) and, where possible, its cgroup."""

    def __init__(self, tree: Path, state: Path, flags: list[str]) -> None:
        self.tree, self.state, self.flags = tree, state, flags
        self.group: Path | None = None
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> JudgeUnderTest:
        self.group = _cpuacct_group(self.state.name.replace(" ", "-"))
        command = [sys.executable, "-m", "judges", "--port", "0", "--workers", "1",
                   "--state-dir", str(self.state), *self.flags]  # fmt: skip
        log = open(self.state.parent / f"{self.state.name}.log", "w")
        self.process = subprocess.Popen(
            command, cwd=self.tree, stdout=subprocess.PIPE, stderr=log, text=True,
            preexec_fn=self._enter_group,
        )  # fmt: skip
        log.close()
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if ANNOUNCE in line:
                self.url = line.split(ANNOUNCE, 1)[1].strip()
                return self
        raise SystemExit(f"the judge in {self.tree} exited before listening; see its log")

    def _enter_group(self) -> None:
        if self.group is not None:
            (self.group / "cgroup.procs").write_text("0")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=120)
        if self.group is not None:
            with contextlib.suppress(OSError):
                self.group.rmdir()

    def cpu(self) -> tuple[float, float | None]:
        """(the judge's /proc CPU seconds with its reaped children, its cgroup's or None)."""
        assert self.process is not None
        text = Path(f"/proc/{self.process.pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        ticks = sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
        group = None
        if self.group is not None:
            group = int((self.group / "cpuacct.usage").read_text()) / 1e9
        return ticks / os.sysconf("SC_CLK_TCK"), group

    def judge(self, code: str) -> dict[str, float]:
        """Submit `code` for problem 0, wait for its final record; CPU seconds it cost."""
        proc_before, group_before = self.cpu()
        started = time.monotonic()
        with httpx.Client(timeout=60) as client:
            files = {"code": ("main.cpp", code.encode(), "text/plain")}
            answer = client.post(f"{self.url}/submit", data={"pid": "0", "lang": "cpp"},
                                 files=files)  # fmt: skip
            answer.raise_for_status()
            sid = answer.json()["sid"]
            while (record := client.get(f"{self.url}/result/{sid}").json())["status"] == "queued":
                time.sleep(POLL_S)
        if record["status"] != "done":
            raise SystemExit(f"the candidate was not judged: {record.get('error')}")
        proc_after, group_after = self.cpu()
        found = {"proc": proc_after - proc_before, "wall": time.monotonic() - started,
                 "score": record["score"]}  # fmt: skip
        if group_before is not None and group_after is not None:
            found["cgroup"] = group_after - group_before
        return found


def _cpuacct_group(name: str) -> Path | None:
    """A fresh cgroup v1 cpuacct group for a judge, or None where none can be made."""
    if not (CPUACCT / "cpuacct.usage").is_file() or not os.access(CPUACCT, os.W_OK):
        return None
    group = CPUACCT / f"judge-cpu-bare-{os.getpid()}-{name}"
    try:
        group.mkdir()
    except OSError:
        return None
    return group


def report(bare: list[dict[str, float]], figures: dict[str, list[dict[str, Any]]],
           count: int) -> None:  # fmt: skip
    """Print the bare figures, each judge's per candidate, and the ratios of the medians."""
    print(f"Polyomino, {count} cases; CPU seconds per candidate (medians of {len(bare)})")
    parts = {key: statistics.median(row[key] for row in bare) for key in bare[0]}
    print(f"  bare run        {parts['total']:7.3f}  (compile {parts['compile']:.3f}, run "
          f"{parts['run']:.3f}, check {parts['check']:.3f})")  # fmt: skip
    for label, rows in figures.items():
        proc = statistics.median(row["proc"] for row in rows)
        line = f"  judge, {label:<9}{proc:7.3f} /proc  = {proc / parts['total']:.2f}x bare"
        if all("cgroup" in row for row in rows):
            group = statistics.median(row["cgroup"] for row in rows)
            line += f"; {group:.3f} cgroup = {group / parts['total']:.2f}x bare"
        wall = statistics.median(row["wall"] for row in rows)
        scores = sorted({round(row["score"], 6) for row in rows})
        print(f"{line}; wall {wall:.2f} s; score {scores}")


if __name__ == "__main__":
    sys.exit(main())
