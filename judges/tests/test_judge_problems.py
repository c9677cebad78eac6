"""Problem packages in the FrontierCS layout: limits, case lists, suite labels and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from judges.kinds import load_problem, load_problems
from judges.problems.package import (
    ProblemError,
    UnsupportedProblem,
    parse_memory_limit,
    parse_time_limit,
)
from judges.problems.polyomino.generator import generate_instance, write_suite


def package(
    root: Path, pid: str, config: str, cases: int, extra: dict[str, str] | None = None
) -> Path:
    directory = root / pid
    (directory / "testdata").mkdir(parents=True)
    (directory / "config.yaml").write_text(config)
    for case in range(1, cases + 1):
        (directory / "testdata" / f"{case}.in").write_text(generate_instance(1, case))
    for name, text in (extra or {}).items():
        (directory / "testdata" / name).write_text(text)
    return directory


FRONTIERCS_CONFIG = (  # the shape of FrontierCS's algorithmic/problems/0/config.yaml
    "type: default\nchecker: chk.cc\ntime: 2s\nmemory: 256m\n"
    "subtasks:\n- score: 100\n  n_cases: 2\n"
)


@pytest.mark.parametrize(
    ("value", "seconds"), [("2s", 2.0), ("1500ms", 1.5), ("0.5 s", 0.5), (3, 3.0), ("4", 4.0)]
)
def test_time_limits_use_frontiercs_units(value: object, seconds: float) -> None:
    assert parse_time_limit(value, "config") == seconds


@pytest.mark.parametrize(
    ("value", "size"),
    [("256m", 256 << 20), ("1g", 1 << 30), ("512k", 512 << 10), ("256MB", 256 << 20), (1000, 1000)],
)
def test_memory_limits_use_binary_units(value: object, size: int) -> None:
    assert parse_memory_limit(value, "config") == size


@pytest.mark.parametrize("value", ["fast", "-2s", "0", "", True])
def test_bad_time_limit_names_the_value(value: object) -> None:
    with pytest.raises(ProblemError, match="is not a positive duration"):
        parse_time_limit(value, "p/config.yaml")


def test_frontiercs_problem_zero_loads_with_its_limits(tmp_path: Path) -> None:
    problem = load_problem(package(tmp_path, "0", FRONTIERCS_CONFIG, 2))
    assert problem.checker == "polyomino"
    assert [case.number for case in problem.cases] == [1, 2]
    assert {(case.time_limit, case.memory_limit) for case in problem.cases} == {(2.0, 256 << 20)}
    assert problem.cases[0].instance.total_cells > 0
    assert problem.listing() == {
        "id": "0",
        "cases": 2,
        "suite": {
            "name": "public",
            "kind": "package",
            "label": f"cases of the problem package {tmp_path / '0'}",
            "comparableToFrontierCS": True,
        },
    }


def test_subtasks_number_cases_consecutively_with_their_own_limits(tmp_path: Path) -> None:
    config = (
        "time: 2s\nmemory: 256m\nsubtasks:\n- score: 50\n  n_cases: 1\n"
        "- score: 50\n  n_cases: 2\n  time: 1s\n  memory: 64m\n"
    )
    problem = load_problem(package(tmp_path, "0", config, 3))
    assert [(c.number, c.time_limit, c.memory_limit) for c in problem.cases] == [
        (1, 2.0, 256 << 20),
        (2, 1.0, 64 << 20),
        (3, 1.0, 64 << 20),
    ]


def test_numbered_pairs_beyond_the_configured_count_are_judged_too(tmp_path: Path) -> None:
    extra = {"3.in": generate_instance(1, 3), "3.ans": "", "4.in": generate_instance(1, 4)}
    problem = load_problem(package(tmp_path, "0", FRONTIERCS_CONFIG, 2, extra))
    assert [case.number for case in problem.cases] == [1, 2, 3]  # 4.in has no answer file


def test_missing_test_file_is_named(tmp_path: Path) -> None:
    directory = package(tmp_path, "0", FRONTIERCS_CONFIG, 1)
    with pytest.raises(ProblemError, match=r"testdata/2\.in: missing"):
        load_problem(directory)


def test_malformed_input_file_is_named(tmp_path: Path) -> None:
    directory = package(tmp_path, "0", FRONTIERCS_CONFIG, 2)
    (directory / "testdata" / "2.in").write_text("3\n1\n0 0\n")
    with pytest.raises(ProblemError, match=r"2\.in: input n = 3 is outside"):
        load_problem(directory)


def test_problem_without_a_builtin_checker_is_unsupported(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedProblem, match="judge_checker"):
        load_problem(package(tmp_path, "7", FRONTIERCS_CONFIG, 2))


def test_judge_checker_key_serves_any_problem_id(tmp_path: Path) -> None:
    problem = load_problem(
        package(tmp_path, "pack", "judge_checker: polyomino\n" + FRONTIERCS_CONFIG, 2)
    )
    assert problem.id == "pack" and problem.checker == "polyomino"


def test_checkout_serves_only_problems_it_can_check(tmp_path: Path) -> None:
    package(tmp_path, "0", FRONTIERCS_CONFIG, 2)
    package(tmp_path, "1", FRONTIERCS_CONFIG, 2)
    (tmp_path / "notes").mkdir()
    assert sorted(load_problems(tmp_path)) == ["0"]


def test_directory_with_nothing_servable_is_an_error(tmp_path: Path) -> None:
    package(tmp_path, "5", FRONTIERCS_CONFIG, 2)
    with pytest.raises(ProblemError, match="no servable problem"):
        load_problems(tmp_path)


def test_generated_suite_is_labelled_not_comparable(tmp_path: Path) -> None:
    problem = load_problem(write_suite(tmp_path / "0", seed=4, cases=1))
    assert problem.suite.kind == "generated"
    assert problem.suite.comparable_to_frontiercs is False
    assert "seed=4 cases=1" in problem.suite.label


def test_every_path_flag_is_absolute_once_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run starts in a directory of its own, so the judge keeps no relative path: a
    relative `--task`, `--problems`, `--state-dir` … is resolved against its working
    directory when parsed, and the GPU package's reference module is found from anywhere."""
    from judges.service.app import build_parser
    from judges.service.sources import load_served_problems

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    flags = "--task harbor/trimul --problems p --frontiercs f --testlib t --public-cases c"
    args = build_parser().parse_args([*flags.split(), "--state-dir", "s"])
    paths = [*args.task, *args.problems, *args.frontiercs, args.testlib, args.public_cases]
    assert all(path.is_absolute() for path in [*paths, args.state_dir]), paths
    assert args.task == [repo / "harbor" / "trimul"] and args.state_dir == repo / "s"
    assert build_parser().parse_args([]).state_dir == repo / "work" / "judge-state"
    args = build_parser().parse_args(["--task", "harbor/trimul", "--state-dir", str(tmp_path)])
    (problem,) = load_served_problems(args).values()
    monkeypatch.chdir(tmp_path)
    assert problem.settings.reference.is_absolute() and problem.settings.reference.is_file()
