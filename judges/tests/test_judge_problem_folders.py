"""A problem folder cannot lead the judge outside itself (issue 35, finding 7; item 10 for
config.yaml): links out, `checker:`/`interactor:`/`verifier:` paths that leave the folder, FIFOs,
an oversized statement and a YAML alias bomb are refused in one line naming the file, and
`GET /problem/ID/statement` of the real judge serves only a bounded regular file inside the
folder. A link from one file of the folder to another still works.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import httpx
import pytest

from judges.gpu.package import load_gpu_problem
from judges.kinds import load_problem, load_problems
from judges.problems.folders import STATEMENT_LIMIT
from judges.problems.package import ProblemError
from judges.problems.polyomino.generator import generate_instance
from judges.service.process import JudgeProcess

CANARY = "OUTSIDE-CANARY-not-the-problem's"
CONFIG = "judge_checker: polyomino\ntime: 1s\nmemory: 64m\nn_cases: 2\n"


def package(root: Path, pid: str, config: str = CONFIG, statement: str | None = "Pack.") -> Path:
    directory = root / pid
    (directory / "testdata").mkdir(parents=True)
    (directory / "config.yaml").write_text(config)
    for case in (1, 2):
        (directory / "testdata" / f"{case}.in").write_text(generate_instance(1, case))
    if statement is not None:
        (directory / "statement.txt").write_text(statement)
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "secret.cc"
    target.write_text(f"// {CANARY}\n{generate_instance(1, 1)}")
    return target


def _refused(directory: Path, match: str) -> str:
    with pytest.raises(ProblemError, match=match) as refusal:
        load_problem(directory)
    message = str(refusal.value)
    assert "\n" not in message and CANARY not in message
    return message


@pytest.mark.parametrize("name", ["statement.txt", "testdata/1.in", "testdata/2.ans"])
def test_a_link_out_of_the_folder_is_refused(tmp_path: Path, outside: Path, name: str) -> None:
    directory = package(tmp_path / "problems", "p")
    (directory / name).unlink(missing_ok=True)
    (directory / name).symlink_to(outside)
    message = _refused(directory, "leads outside the problem folder")
    assert name.split("/")[-1] in message


def test_a_linked_checker_source_is_refused(tmp_path: Path, outside: Path) -> None:
    directory = package(tmp_path / "problems", "p", "type: default\ntime: 1s\nn_cases: 2\n")
    (directory / "chk.cc").symlink_to(outside)
    _refused(directory, "chk.cc: leads outside the problem folder")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("checker", "../../elsewhere/secret.cc"),
        ("checker", "{outside}"),
        ("interactor", "../secret.cc"),
        ("verifier", "sub/../../secret.py"),
        ("checker", "~/chk.cc"),
    ],
)
def test_a_config_path_out_of_the_folder_is_refused(
    tmp_path: Path, outside: Path, key: str, value: str
) -> None:
    kind = {"checker": "default", "interactor": "interactive", "verifier": "verifier"}[key]
    config = f"type: {kind}\n{key}: '{value.format(outside=outside)}'\ntime: 1s\nn_cases: 2\n"
    directory = package(tmp_path / "problems", "p", config)
    _refused(directory, f"{key} .* must name a file inside the problem folder")


def test_a_gpu_package_names_its_files_inside_its_folder(tmp_path: Path, outside: Path) -> None:
    directory = tmp_path / "gpu"
    directory.mkdir()
    (directory / "reference.py").write_text("")
    for key, value in (("reference", "../elsewhere/secret.cc"), ("cases", str(outside))):
        with pytest.raises(ProblemError, match=f"{key} .* must name a file inside"):
            load_gpu_problem(directory, {"type": "gpu", key: value}, "config.yaml")


def test_a_link_inside_the_folder_is_followed(tmp_path: Path) -> None:
    directory = package(tmp_path / "problems", "p", statement=None)
    (directory / "docs").mkdir()
    (directory / "docs" / "statement.md").write_text("Pack the pieces.")
    (directory / "statement.txt").symlink_to(Path("docs") / "statement.md")
    assert len(load_problem(directory).cases) == 2


def test_a_fifo_or_an_oversized_statement_is_refused(tmp_path: Path) -> None:
    directory = package(tmp_path / "problems", "p", statement=None)
    os.mkfifo(directory / "statement.txt")
    _refused(directory, "statement is not a regular file")  # at once: the FIFO is not read
    (directory / "statement.txt").unlink()
    with open(directory / "statement.txt", "wb") as file:
        file.truncate(STATEMENT_LIMIT + 1)
    _refused(directory, "statement is over 1 MiB")


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (BOMB + CONFIG, "expands to more than 100000 values through aliases"),
        ("loop: &l [*l]\n" + CONFIG, "an alias refers to a value that contains it"),
        ("deep: " + "[" * 20000 + "]" * 20000 + "\n" + CONFIG, "nested too deeply"),
        ("time: [1s\n", "not valid YAML"),
    ],
)
def test_a_config_yaml_bomb_is_refused_in_one_line(tmp_path: Path, text: str, match: str) -> None:
    directory = package(tmp_path / "problems", "p", text)
    _refused(directory, match)


def test_ordinary_aliases_still_load(tmp_path: Path) -> None:
    config = "limits: &l {time: 1s, memory: 64m}\njudge_checker: polyomino\nn_cases: 2\n"
    config += "subtasks: [{<<: *l, n_cases: 2}]\n"
    assert len(load_problem(package(tmp_path / "problems", "p", config)).cases) == 2


def test_a_refused_package_is_skipped_and_the_rest_served(
    tmp_path: Path, outside: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "problems"
    package(root, "good")
    (package(root, "bad") / "testdata" / "1.in").unlink()
    (root / "bad" / "testdata" / "1.in").symlink_to(outside)
    with caplog.at_level(logging.WARNING, logger="judges.kinds"):
        problems = load_problems(root)
    assert sorted(problems) == ["good"]
    assert "leads outside the problem folder" in caplog.text and CANARY not in caplog.text


@pytest.mark.slow
def test_the_judge_serves_only_a_statement_inside_its_folder(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "problems"
    package(root, "good", statement="Pack the pieces into a small rectangle.")
    package(root, "later")
    package(root, "fifo")
    linked = package(root, "linked", statement=None)
    (linked / "statement.txt").symlink_to(outside)
    (package(root, "linkedcase") / "testdata" / "2.in").unlink()
    (root / "linkedcase" / "testdata" / "2.in").symlink_to(outside)
    checker = package(root, "linkedchecker", "type: default\ntime: 1s\nn_cases: 2\n")
    (checker / "chk.cc").symlink_to(outside)
    escaping = "type: default\nchecker: ../../elsewhere/secret.cc\ntime: 1s\nn_cases: 2\n"
    package(root, "escaping", escaping)
    with JudgeProcess(tmp_path / "state", "--problems", str(root), "--workers", "1") as judge:
        listed = httpx.get(f"{judge.url}/problems", timeout=30).json()["problems"]
        assert sorted(problem["id"] for problem in listed) == ["fifo", "good", "later"]
        answer = httpx.get(f"{judge.url}/problem/good/statement", timeout=30)
        assert answer.status_code == 200 and answer.text.startswith("Pack the pieces")
        assert httpx.get(f"{judge.url}/problem/linked/statement", timeout=30).status_code == 404
        # Files changed under a running judge are checked again when served.
        (root / "later" / "statement.txt").unlink()
        (root / "later" / "statement.txt").symlink_to(outside)
        (root / "fifo" / "statement.txt").unlink()
        os.mkfifo(root / "fifo" / "statement.txt")
        for pid in ("later", "fifo"):
            refused = httpx.get(f"{judge.url}/problem/{pid}/statement", timeout=30)
            assert refused.status_code == 403, refused.text
            assert "inside the problem folder" in refused.text and CANARY not in refused.text
        assert httpx.get(f"{judge.url}/health", timeout=30).status_code == 200
    log = (tmp_path / "state" / "service.log").read_text()
    for pid in ("linked", "linkedcase", "linkedchecker", "escaping"):
        assert f"skipping problem {pid}: " in log
    assert "leads outside the problem folder" in log and CANARY not in log
