"""`guidance-ttt task check DIR` and `guidance-ttt task seed DIR PROGRAM`: a task, checked.

A task is a directory of files (docs/adding-a-task.md). `check` validates every file and every
key the harness and Harbor read, then scores the seed program through the judge on the named
suite and compares it with the seed record; it prints one line per problem found (or one `ok`
line per check) and exits 1 when anything is wrong, naming the file and the key. `seed` scores a
program through the judge and writes `solution/seed.json`: the seed's archive entry, its root
node and the measurement with its suite.

    guidance-ttt task check harbor/<task> [--judge-url URL] [--suite public]
    guidance-ttt task seed harbor/<task> harbor/<task>/solution/solution.cpp --summary-file S
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import tomllib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.adapters.judge.frontiercs import DEFAULT_JUDGE_URL, FrontierCSScorer
from harness.adapters.judge.suites import suite_name
from harness.adapters.judge.token import judge_headers
from harness.adapters.judge.verdict import Scoring
from harness.contract import ContractError, TaskContract, load_contract, load_instruction
from harness.scorer import JudgeUnavailableError
from harness.state import LibraryEntry, LibraryNode

SEED_RECORD = Path("solution") / "seed.json"
REQUIRED_FILES = (
    "task.toml",
    "instruction.md",
    "contract.json",
    "environment/Dockerfile",
    "tests/test.sh",
    str(SEED_RECORD),
)
EXTENSIONS = {"cpp": "cpp", "python": "py"}
#: task.toml: the tables and keys this project's tasks may use (Harbor's schema 1.4 subset);
#: None means any key (free-form tables). Required keys are listed in TOML_REQUIRED.
TOML_KEYS: dict[str, set[str] | None] = {
    "": {"schema_version", "artifacts", "task", "metadata", "agent", "verifier", "environment"},
    "task": {"name", "description", "keywords"},
    "metadata": None,
    "agent": {"timeout_sec"},
    "verifier": {"timeout_sec", "env"},
    "verifier.env": None,
    "environment": {
        "cpus", "memory_mb", "storage_mb", "build_timeout_sec", "network_mode", "allowed_hosts",
        "docker_image",
    },
}  # fmt: skip
TOML_REQUIRED = ("schema_version", "task.name", "agent.timeout_sec", "verifier.timeout_sec")
SCORE_TOLERANCE = 1e-6
DEFAULT_SUITE = "public"


@dataclass(frozen=True)
class Finding:
    """One line of the check: `ok` or a problem naming its file and key."""

    ok: bool
    where: str
    message: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.where}: {self.message}"


def check_files(task: Path) -> list[Finding]:
    """Every required file exists; the task's own files are read only when present."""
    missing = [name for name in REQUIRED_FILES if not (task / name).is_file()]
    found = [Finding(False, name, "missing (every task ships it)") for name in missing]
    return found or [Finding(True, "files", ", ".join(REQUIRED_FILES) + " present")]


def check_task_toml(task: Path) -> list[Finding]:
    """task.toml parses, uses only known tables and keys, and sets the required ones."""
    path = task / "task.toml"
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        return [Finding(False, "task.toml", f"not valid TOML ({exc})")]
    found = []

    def walk(table: dict[str, Any], prefix: str) -> None:
        allowed = TOML_KEYS.get(prefix, set())
        for key, value in table.items():
            name = f"{prefix}.{key}" if prefix else key
            if allowed is not None and key not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                found.append(Finding(False, "task.toml", f"unknown key {name!r} (known: {known})"))
            elif isinstance(value, dict) and allowed is not None:
                walk(value, name)

    walk(data, "")
    for dotted in TOML_REQUIRED:
        table: Any = data
        for part in dotted.split("."):
            table = table.get(part) if isinstance(table, dict) else None
        if table is None:
            found.append(Finding(False, "task.toml", f"key {dotted!r} is required but not set"))
    return found or [Finding(True, "task.toml", "every key known, required keys set")]


def check_contract(task: Path) -> tuple[list[Finding], TaskContract | None]:
    """contract.json and instruction.md, through the harness's own loaders."""
    if not (task / "contract.json").is_file():
        return [], None
    try:
        contract = load_contract(task)
        load_instruction(task)
    except ContractError as exc:
        return [Finding(False, "contract.json", _relative(str(exc), task))], None
    return [
        Finding(
            True,
            "contract.json",
            f"{contract.solution_language}, "
            f"{contract.score_direction}, verifier {contract.verifier}",
        )
    ], contract


def check_seed_record(task: Path, contract: TaskContract, suite: str) -> list[Finding]:
    """seed.json holds a valid entry whose program is the task's seed program, a root node that
    agrees with it, and a measurement on `suite` equal to the entry's raw score."""
    path = task / SEED_RECORD
    if not path.is_file():
        return []
    where = str(SEED_RECORD)
    try:
        data = json.loads(path.read_text())
        entry = LibraryEntry.from_dict(data["entry"])
        node = LibraryNode.from_dict(data["node"])
    except (ValueError, KeyError, TypeError) as exc:
        return [Finding(False, where, f"unreadable seed record ({type(exc).__name__}: {exc})")]
    found = []
    program = task / "solution" / f"solution.{EXTENSIONS[contract.fence_tag]}"
    if not program.is_file():
        found.append(Finding(False, str(program.relative_to(task)), "missing seed program"))
    elif entry.solution != program.read_text():
        found.append(Finding(False, f"{where}: entry.solution", f"differs from {program.name}"))
    if not entry.is_valid or entry.verifier_raw_score is None:
        return [*found, Finding(False, f"{where}: entry.verifier_status", "the seed is not valid")]
    raw = float(entry.verifier_raw_score)
    scoring = Scoring(contract.score_direction, contract.verifier)
    if not math.isclose(entry.verifier_reward, scoring.reward(raw), rel_tol=1e-12):
        found.append(
            Finding(
                False,
                f"{where}: entry.verifier_reward",
                f"{entry.verifier_reward!r} is not the reward of raw score {raw!r} "
                f"({contract.score_direction})",
            )
        )
    sign = 1.0 if contract.score_direction == "max" else -1.0
    if node.entry_id != entry.id or node.raw_score != raw or node.value != sign * raw:
        found.append(Finding(False, f"{where}: node", "does not agree with the entry"))
    measured = [m for m in data.get("measured", {}).values() if m.get("suite") == suite]
    if not measured:
        found.append(Finding(False, f"{where}: measured", f"no measurement on suite {suite!r}"))
    elif not math.isclose(measured[0].get("score", math.nan), raw, abs_tol=SCORE_TOLERANCE):
        found.append(
            Finding(
                False,
                f"{where}: measured",
                f"score on {suite!r} is not the entry's raw score {raw!r}",
            )
        )
    return found or [Finding(True, where, f"seed {raw!r} measured on {suite!r}")]


def check_with_judge(task: Path, contract: TaskContract, judge_url: str, suite: str) -> Finding:
    """The judge serves the task's problem on `suite` and reproduces the seed's recorded score."""
    where = f"{SEED_RECORD}: entry.verifier_raw_score"
    try:
        listing = httpx.get(
            f"{judge_url.rstrip('/')}/problems", timeout=30, headers=judge_headers()
        ).json()
    except (httpx.HTTPError, ValueError) as exc:
        return Finding(False, "judge", f"{judge_url} unreachable ({exc}); start it or --judge-url")
    problems = {str(p.get("id")): p for p in listing.get("problems", [])}
    problem = problems.get(contract.judge_problem_id)
    if problem is None:
        return Finding(
            False,
            "contract.json: judge_problem_id",
            f"{contract.judge_problem_id!r} is not served by {judge_url} "
            f"(it serves {sorted(problems)})",
        )
    served = suite_name(problem.get("suite"))
    if served != suite:
        return Finding(
            False,
            "judge",
            f"serves problem {contract.judge_problem_id} on suite {served!r}, not {suite!r}",
        )
    seed = LibraryEntry.from_dict(json.loads((task / SEED_RECORD).read_text())["entry"])
    with FrontierCSScorer.for_task(task, judge_url, poll_interval_s=0.2) as scorer:
        try:
            verdict = scorer(seed.solution)
        except JudgeUnavailableError as exc:
            return Finding(False, "judge", str(exc))
    if not verdict.valid or verdict.raw_score is None:
        return Finding(
            False, where, f"the judge finds the seed {verdict.status}: {verdict.message}"
        )
    recorded = float(seed.verifier_raw_score or math.nan)
    if not math.isclose(verdict.raw_score, recorded, abs_tol=SCORE_TOLERANCE):
        return Finding(
            False,
            where,
            f"recorded {recorded!r} but the judge gives "
            f"{verdict.raw_score!r} on {suite!r}; re-run `guidance-ttt task seed`",
        )
    return Finding(True, "judge", f"seed reproduced: {verdict.raw_score!r} on {suite!r}")


def check_task(task: Path, judge_url: str | None, suite: str) -> list[Finding]:
    """Every check of a task directory, in order; the judge is asked only when the files pass."""
    findings = [*check_files(task), *check_task_toml(task)]
    contract_findings, contract = check_contract(task)
    findings += contract_findings
    if contract is not None:
        findings += check_seed_record(task, contract, suite)
    if contract is not None and judge_url and all(f.ok for f in findings):
        findings.append(check_with_judge(task, contract, judge_url, suite))
    return findings


def write_seed(
    task: Path, program: Path, summary: str, judge_url: str, suite: str
) -> dict[str, Any]:
    """Score `program` through the judge and write `solution/seed.json` (entry, root node, the
    measurement on `suite`). Returns the record; ValueError when the program is not valid."""
    contract = load_contract(task)
    code = program.read_text()
    if not summary.strip():
        raise ValueError("the seed needs a code-free summary (--summary or --summary-file)")
    with FrontierCSScorer.for_task(task, judge_url, poll_interval_s=0.2) as scorer:
        verdict = scorer(code)
    if not verdict.valid or verdict.raw_score is None:
        raise ValueError(f"{program}: the judge finds it {verdict.status}: {verdict.message}")
    raw = verdict.raw_score
    entry_id, node_id = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        source = program.resolve().relative_to(task.resolve().parents[1]).as_posix()
    except ValueError:
        source = program.name
    entry = {
        "id": entry_id, "parent_id": None, "problem_id": task.name, "timestep": 0,
        "guidance": "", "execution_thinking": "", "solution": code,
        "verifier_reward": verdict.reward, "verifier_raw_score": raw,
        "verifier_status": verdict.status, "verifier_message": verdict.message,
        "summary": summary.strip(), "reusable_idea": summary.strip(), "failure_mode": None,
        "metadata": {"raw_model_summary": summary.strip(),
                     "summary_semantics": "canonical_full_candidate", "source": source},
    }  # fmt: skip
    sign = 1.0 if contract.score_direction == "max" else -1.0
    node = {
        "id": node_id, "problem_id": task.name, "timestep": 0, "entry_id": entry_id,
        "value": sign * raw, "raw_score": raw, "visits": 0, "parent_id": None, "children": [],
        "metadata": {"kind": "root", "archive_candidate": True, "verifier_status": "valid"},
    }  # fmt: skip
    artifacts = verdict.artifacts
    ratios = artifacts.get("case_ratios", [])
    label = artifacts.get("judge_suite", {}).get("label", "")
    measurement = {
        "suite": suite, "suite_description": label, "judge": judge_url, "score": raw,
        "cases": artifacts.get("case_count"), "valid_cases": sum(1 for r in ratios if r > 0),
        "date": datetime.date.today().isoformat(),
        "command": f"guidance-ttt task seed {task.name} {source}",
    }  # fmt: skip
    path = task / SEED_RECORD
    previous = json.loads(path.read_text()).get("measured", {}) if path.is_file() else {}
    record = {"entry": entry, "node": node, "measured": {**previous, suite: measurement}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def _relative(message: str, task: Path) -> str:
    return message.replace(str(task) + os.sep, "")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="guidance-ttt task", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    default_url = os.environ.get("FRONTIERCS_JUDGE_URL", DEFAULT_JUDGE_URL)
    check = sub.add_parser("check", help="validate a task directory and its seed through the judge")
    check.add_argument("task", type=Path, help="the task directory, e.g. harbor/<task>")
    check.add_argument("--judge-url", default=default_url, help=f"default: {default_url}")
    check.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        help="suite of the seed's measurement (default: %(default)s)",
    )
    check.add_argument(
        "--no-judge", action="store_true", help="check the files only (default: ask the judge too)"
    )
    seed = sub.add_parser("seed", help="score a program through the judge and write seed.json")
    seed.add_argument("task", type=Path, help="the task directory, e.g. harbor/<task>")
    seed.add_argument("program", type=Path, help="the seed program (e.g. solution/solution.cpp)")
    seed.add_argument("--summary", default="", help="the seed's code-free summary (default: none)")
    seed.add_argument(
        "--summary-file", type=Path, help="read the summary from a file (default: --summary)"
    )
    seed.add_argument("--judge-url", default=default_url, help=f"default: {default_url}")
    seed.add_argument(
        "--suite", default=DEFAULT_SUITE, help="the suite the judge serves (default: %(default)s)"
    )
    return parser


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    """`guidance-ttt task ...`: 0 when the task passes (or the seed was written), 1 when a
    check fails or the seed is not valid, 2 for bad arguments."""
    args = _parser().parse_args(argv)
    task: Path = args.task
    if not task.is_dir():
        print(f"guidance-ttt task: {task} is not a directory", file=sys.stderr)
        return 2
    if args.action == "check":
        findings = check_task(task, None if args.no_judge else args.judge_url, args.suite)
        for finding in findings:
            out(finding.line())
        return 0 if all(finding.ok for finding in findings) else 1
    summary = args.summary_file.read_text() if args.summary_file else args.summary
    program = args.program if args.program.is_file() else task / args.program
    try:
        record = write_seed(task, program, summary, args.judge_url, args.suite)
    except (ValueError, OSError, ContractError, JudgeUnavailableError) as exc:
        print(f"guidance-ttt task seed: {exc}", file=sys.stderr)
        return 1
    out(f"wrote {task / SEED_RECORD}: {record['entry']['verifier_raw_score']!r} on {args.suite!r}")
    return 0
