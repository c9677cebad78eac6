"""`guidance-ttt task new` writes every file a task needs, and `task check` (the same validator
as the preflight's task row) checks every required file and key. FrontierCS problems 1, 5
(default checker) and 10 (interactive) come from the design data folder at test time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.adapters.judge.verdict import load_case_check
from harness.cli import task as task_command
from harness.preflight.task import check_task as preflight_task_row
from harness.preflight.task_files import required_files

FRONTIERCS = Path(__file__).resolve().parents[3] / "shared" / "data" / "frontiercs"
SEED = "#include <cstdio>\nint main() { return 0; }\n"


def frontiercs() -> Path:
    if not (FRONTIERCS / "problems" / "10" / "config.yaml").is_file():
        pytest.skip(f"the FrontierCS problems are absent from {FRONTIERCS}")
    return FRONTIERCS


def run(*argv: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    return task_command.main(list(argv), out=lines.append), lines


def new_task(root: Path, problem: str) -> Path:
    task = root / f"frontiercs_{problem}"
    status, lines = run("new", str(task), "--frontiercs", str(frontiercs()), problem)
    assert status == 0, lines
    return task


@pytest.mark.parametrize("problem", ["1", "5", "10"])
def test_a_new_task_passes_task_check_once_its_seed_program_is_written(
    tmp_path: Path, problem: str
) -> None:
    task = new_task(tmp_path, problem)
    status, lines = run("check", str(task), "--no-judge")
    assert status == 1 and "FAIL solution/solution.cpp: missing" in lines[0]
    (task / "solution" / "solution.cpp").write_text(SEED)
    status, lines = run("check", str(task), "--no-judge")
    assert status == 0, lines
    assert any("not recorded yet" in line and "task seed" in line for line in lines)
    assert f"judge problem {problem!r}" in next(line for line in lines if "contract.json" in line)
    assert f'judge_problem_id = "{problem}"' in (task / "task.toml").read_text()
    instruction = (task / "instruction.md").read_text()
    assert instruction.startswith("# ") and "How a program is judged" in instruction


def test_the_score_check_fits_the_problem_kind(tmp_path: Path) -> None:
    interactive = load_case_check(new_task(tmp_path, "10") / "tests" / "score_check.py")
    default = load_case_check(new_task(tmp_path, "5") / "tests" / "score_check.py")
    verdict = {"scoreRatio": 0.5, "msg": "points 0.5 Ratio: 0.500000"}
    # An interactive program's output goes to the interactor: its cases carry none.
    assert interactive(verdict) is None
    assert "no program output" in (default(verdict) or "")
    assert default({**verdict, "output": "1 2 3\n"}) is None
    # A ratio the checker did not print, or a message that is not a testlib verdict, is refused.
    assert "0.9" in (interactive({**verdict, "scoreRatio": 0.9}) or "")
    assert "'ok' or 'points'" in (interactive({"scoreRatio": 1.0, "msg": "Ratio: 1.0"}) or "")
    assert interactive({"scoreRatio": 0.0, "msg": "anything"}) is None


@pytest.mark.parametrize(
    "name",
    [
        "task.toml",
        "instruction.md",
        "contract.json",
        "environment/Dockerfile",
        "environment/docker-compose.yaml",
        "tests/test.sh",
        "tests/verify.py",
        "tests/score_check.py",
        "tests/task_facts.json",
        "solution/solve.sh",
        "solution/solution.cpp",
    ],
)
def test_task_check_refuses_each_deleted_required_file(tmp_path: Path, name: str) -> None:
    task = new_task(tmp_path, "1")
    (task / "solution" / "solution.cpp").write_text(SEED)
    assert name in required_files(task)
    (task / name).unlink()
    status, lines = run("check", str(task), "--no-judge")
    assert status == 1
    assert f"FAIL {name}: missing (every task ships it; docs/adding-a-task.md)" in lines
    # The preflight's task row refuses the same task (one validator).
    assert not preflight_task_row(task).ready


def test_a_problem_id_task_toml_and_contract_disagree_on_is_refused_by_both(
    tmp_path: Path,
) -> None:
    task = new_task(tmp_path, "5")
    (task / "solution" / "solution.cpp").write_text(SEED)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace('judge_problem_id = "5"', 'judge_problem_id = "7"'))
    status, lines = run("check", str(task), "--no-judge")
    assert status == 1
    (line,) = [line for line in lines if line.startswith("FAIL")]
    assert "metadata.judge_problem_id: '7' differs from contract.json" in line
    row = preflight_task_row(task)
    assert not row.ready and "metadata.judge_problem_id: '7' differs" in row.detail


def test_a_broken_score_check_is_one_line_even_without_the_judge(tmp_path: Path) -> None:
    task = new_task(tmp_path, "1")
    (task / "solution" / "solution.cpp").write_text(SEED)
    (task / "tests" / "score_check.py").write_text("def check_case(case)\n    return None\n")
    status, lines = run("check", str(task), "--no-judge")
    assert status == 1
    (line,) = [line for line in lines if line.startswith("FAIL")]
    assert line.startswith("FAIL tests/score_check.py: does not load: SyntaxError")
    assert "\n" not in line


def test_task_facts_must_agree_with_the_contract(tmp_path: Path) -> None:
    task = new_task(tmp_path, "1")
    (task / "solution" / "solution.cpp").write_text(SEED)
    facts = task / "tests" / "task_facts.json"
    facts.write_text(
        facts.read_text().replace('"judge_problem_id": "1"', '"judge_problem_id": "2"')
    )
    status, lines = run("check", str(task), "--no-judge")
    assert status == 1 and any("task_facts.json: judge_problem_id" in line for line in lines)


def test_a_skeleton_has_every_file_and_marks_what_to_write(tmp_path: Path) -> None:
    task = tmp_path / "my_task"
    status, _ = run("new", str(task), "--problem-id", "42")
    assert status == 0
    assert all((task / name).is_file() for name in required_files(task) if "solution." not in name)
    assert "TODO" in (task / "instruction.md").read_text()
    status, _ = run("new", str(task), "--problem-id", "42")
    assert status == 2  # never overwrites a task


def test_the_verifier_files_are_the_shipped_ones(tmp_path: Path) -> None:
    task = new_task(tmp_path, "10")
    shipped = Path(task_command.__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
    for name in ("tests/test.sh", "tests/verify.py"):
        assert (task / name).read_bytes() == (shipped / name).read_bytes()
    shutil.rmtree(task)
