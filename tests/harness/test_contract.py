"""TaskContract: strict loading of a Harbor task's contract.json and instruction.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract import ContractError, TaskContract, fence_tag, load_contract, load_task
from tests.task_builders import write_task as build_task

GOOD = {
    "solution_language": "cpp",
    "solution_contract": "Return one C++17 program.",
    "mechanism_constraint": "No hard-coded answers.",
    "objective": "Maximise density.",
    "raw_score_label": "Packing score",
    "score_direction": "max",
    "judge_problem_id": "0",
}
SHIPPED_TASK = Path(__file__).parents[2] / "harbor" / "polyomino_packing"


def write_task(root: Path, contract: dict, instruction: str = "Pack the pieces.") -> Path:
    return build_task(root, contract=contract, instruction=instruction)


def test_a_valid_task_directory_loads(tmp_path):
    contract, problem = load_task(write_task(tmp_path / "task", GOOD))
    assert contract == TaskContract(**GOOD)
    assert problem == "Pack the pieces."
    assert contract.fence_tag == "cpp"


def test_unknown_key_is_an_error_naming_it(tmp_path):
    with pytest.raises(ContractError, match=r"time_limit: unknown key \(value '2s'\)"):
        load_contract(write_task(tmp_path, GOOD | {"time_limit": "2s"}))


def test_a_problem_prompt_key_is_refused(tmp_path):
    with pytest.raises(ContractError, match=r"problem_prompt: not allowed.*instruction\.md"):
        load_contract(write_task(tmp_path, GOOD | {"problem_prompt": "Pack."}))


@pytest.mark.parametrize("key", sorted(GOOD))
def test_an_empty_field_is_an_error_naming_it(tmp_path, key):
    with pytest.raises(ContractError, match=f"{key}: must not be empty, got '  '"):
        load_contract(write_task(tmp_path, GOOD | {key: "  "}))


def test_a_missing_field_is_an_error_naming_it(tmp_path):
    contract = {k: v for k, v in GOOD.items() if k != "objective"}
    with pytest.raises(ContractError, match="objective: is required but not set"):
        load_contract(write_task(tmp_path, contract))


def test_score_direction_must_be_max_or_min(tmp_path):
    with pytest.raises(
        ContractError, match="score_direction: must be one of 'max', 'min', got 'maximize'"
    ):
        load_contract(write_task(tmp_path, GOOD | {"score_direction": "maximize"}))


def test_non_string_values_are_refused(tmp_path):
    with pytest.raises(ContractError, match="judge_problem_id: must be a string, got 0"):
        load_contract(write_task(tmp_path, GOOD | {"judge_problem_id": 0}))


def test_missing_or_empty_files_are_reported(tmp_path):
    with pytest.raises(ContractError, match=r"contract\.json is missing"):
        load_contract(tmp_path)
    (tmp_path / "contract.json").write_text("{not json")
    with pytest.raises(ContractError, match="not valid JSON"):
        load_contract(tmp_path)
    with pytest.raises(ContractError, match=r"instruction\.md is empty"):
        load_task(write_task(tmp_path / "t", GOOD, instruction="\n  \n"))


def test_fence_tag_maps_language_names():
    assert [fence_tag(x) for x in ("cpp", "C++", "cxx", "python", "py")] == [
        "cpp", "cpp", "cpp", "python", "python",
    ]  # fmt: skip


def test_the_shipped_polyomino_task_has_a_valid_contract():
    if not (SHIPPED_TASK / "contract.json").exists():
        pytest.skip("harbor/polyomino_packing is not in this checkout")
    contract, problem = load_task(SHIPPED_TASK)
    assert contract.score_direction == "max" and contract.fence_tag == "cpp"
    assert problem.strip()
