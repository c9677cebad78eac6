"""`guidance-ttt task new` on hostile FrontierCS folders (issue 35, finding 14 and item 6): a
3 GB statement, a YAML bomb, links out of the problem folder and `checker:`/`interactor:`
paths outside it are refused in one line (exit 2, no traceback, nothing written), and whatever
the statement's first line holds (`\\alpha`, quotes, `\"\"\"`) the task's files parse:
task.toml with tomllib, score_check.py as Python.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from harness.adapters.judge.verdict import load_case_check
from harness.cli import task as task_command

CONFIG = "type: default\nchecker: chk.cc\ntime: 2s\nmemory: 256m\nsubtasks:\n- n_cases: 3\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)


def checkout(root: Path, config: str = CONFIG, statement: str = "Problem 7: Pack\n\nText.\n"):
    folder = root / "checkout" / "algorithmic" / "problems" / "7"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(config)
    (folder / "statement.txt").write_text(statement)
    return root / "checkout", folder


def new(tmp_path: Path, source: Path, problem: str = "7") -> tuple[int, Path]:
    task = tmp_path / "task"
    status = task_command.main(["new", str(task), "--frontiercs", str(source), problem], out=print)
    return status, task


def refused(tmp_path: Path, capsys, source: Path, match: str, problem: str = "7") -> str:
    status, task = new(tmp_path, source, problem)
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err and "Traceback" not in err, err
    assert err.startswith("guidance-ttt task new: ") and match in err, err
    assert not task.exists()
    return err


def test_a_three_gigabyte_statement_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    source, folder = checkout(tmp_path)
    with open(folder / "statement.txt", "wb") as file:
        file.truncate(3 << 30)  # sparse: 3 GB long, no disk used
    refused(tmp_path, capsys, source, "statement is over 1 MiB")


def test_a_yaml_bomb_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    source, _ = checkout(tmp_path, BOMB + CONFIG)
    refused(tmp_path, capsys, source, "expands to more than 100000 values through aliases")


@pytest.mark.parametrize("name", ["statement.txt", "config.yaml"])
def test_a_link_out_of_the_problem_folder_is_refused(tmp_path: Path, capsys, name: str) -> None:
    source, folder = checkout(tmp_path)
    outside = tmp_path / f"outside-{name}"
    outside.write_text((folder / name).read_text())
    (folder / name).unlink()
    (folder / name).symlink_to(outside)
    refused(tmp_path, capsys, source, "leads outside the problem folder")


@pytest.mark.parametrize(
    ("key", "value"), [("checker", "../../x.cc"), ("interactor", "/etc/passwd")]
)
def test_a_checker_or_interactor_outside_the_folder_is_refused(
    tmp_path: Path, capsys, key: str, value: str
) -> None:
    kind = "interactive" if key == "interactor" else "default"
    config = f"type: {kind}\n{key}: {value}\ntime: 2s\nsubtasks:\n- n_cases: 3\n"
    source, _ = checkout(tmp_path, config)
    refused(tmp_path, capsys, source, f"{key} {value!r} must name a file inside the problem")


def test_a_problem_id_that_is_a_path_is_refused(tmp_path: Path, capsys) -> None:
    source, _ = checkout(tmp_path)
    refused(tmp_path, capsys, source, "is not a plain name", problem="../problems/7")


@pytest.mark.parametrize(
    "first_line",
    [
        r"Problem 7: \alpha-packing of $\mathbb{Z}^2$",
        'Problem 7: the "best" \\x packing """; import os; """',
        "Problem 7: tab\there and a DEL \x7f mark",
    ],
)
def test_what_task_new_writes_parses_whatever_the_first_line(
    tmp_path: Path, first_line: str
) -> None:
    source, _ = checkout(tmp_path, statement=f"{first_line}\n\nThe statement.\n")
    status, task = new(tmp_path, source)
    assert status == 0
    document = tomllib.loads((task / "task.toml").read_text())
    title = first_line.removeprefix("Problem 7: ")
    assert document["task"]["description"] == " ".join(
        "".join(c if c.isprintable() else " " for c in title).split()
    )
    assert document["metadata"]["judge_problem_id"] == "7"
    check = load_case_check(task / "tests" / "score_check.py")  # the docstring holds the title
    assert check({"scoreRatio": 0.0, "msg": "wrong answer", "output": ""}) is None


def test_a_statement_within_the_limit_is_written_as_the_instruction(tmp_path: Path) -> None:
    body = "x" * ((1 << 20) - 64)
    source, _ = checkout(tmp_path, statement=f"Problem 7: Big\n{body}\n")
    status, task = new(tmp_path, source)
    assert status == 0 and body in (task / "instruction.md").read_text()
    assert os.path.getsize(task / "instruction.md") < (1 << 20) + 4096


EVALUATE = "def evaluate(program_path):\n    return {'combined_score': 1.0}\n"


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--evaluator", "evaluate.py"], "--evaluator EVAL.py and --program SEED.py go together"),
        (["--program", "seed.py"], "--evaluator EVAL.py and --program SEED.py go together"),
        (["--evaluator", "missing.py", "--program", "seed.py"], "--evaluator"),
        (["--evaluator", "seed.py", "--program", "seed.py"], "defines no evaluate(program_path)"),
        (["--openevolve", "seed.py"], "--openevolve"),
        (["--openevolve", "example", "--program", "seed.py"], "drop --evaluator/--program"),
        (["--evaluator", "evaluate.py", "--program", "seed.py", "--metric", "a b"], "--metric"),
        (
            ["--evaluator", "evaluate.py", "--program", "seed.py", "--score-tolerance", "1"],
            "--score-tolerance",
        ),
    ],
)
def test_task_new_from_an_evaluator_refuses_a_wrong_flag_naming_it(
    tmp_path: Path, capsys, monkeypatch, flags: list[str], named: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    (tmp_path / "seed.py").write_text("def solve():\n    return 1\n")
    (tmp_path / "example").mkdir()
    status = task_command.main(["new", "task", *flags], out=print)
    error = capsys.readouterr().err
    assert status == 2 and named in error and len(error.strip().splitlines()) == 1, error
    assert not (tmp_path / "task").exists()


def test_an_openevolve_example_s_texts_and_limits_land_in_the_task(tmp_path: Path) -> None:
    example = tmp_path / "example"
    example.mkdir()
    (example / "initial_program.py").write_text(
        "# EVOLVE-BLOCK-START\ndef solve():\n    return 1\n# EVOLVE-BLOCK-END\n"
    )
    (example / "evaluator.py").write_text(EVALUATE)
    (example / "config_phase_1.yaml").write_text(
        "prompt:\n  system_message: Pack the circles \\alpha.\n"
        "evaluator:\n  timeout: 20\n  cascade_thresholds: [0.5, 0.75, 0.9]\n"
    )
    task = tmp_path / "my task"
    assert task_command.main(["new", str(task), "--openevolve", str(example)], out=print) == 0
    package = task / "judge" / "my_task"
    assert "time: 60s" in (package / "config.yaml").read_text()  # 20 s for each of 3 stages
    assert (package / "testdata" / "1.in").read_text().strip() == (
        '{"metric": "combined_score", "cascade": [0.5, 0.75]}'
    )
    assert "Pack the circles \\alpha." in (task / "instruction.md").read_text()
    assert "EVOLVE-BLOCK-START" in (task / "contract.json").read_text()
    assert tomllib.loads((task / "task.toml").read_text())["metadata"]["judge_problem_id"] == (
        "my_task"
    )
    load_case_check(task / "tests" / "score_check.py")
