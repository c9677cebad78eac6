"""What differs between tasks is declared by the task's files, never keyed on a task name.

The score direction, the candidate language and the verifier kind come from `contract.json`;
the harness, the training method and the launcher never name a task.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.judge.verdict import Scoring, judge_verdict
from harness.contract import ContractError, TaskContract, load_contract
from harness.state import ArchiveConfig

REPO = Path(__file__).resolve().parents[2]
TASKS = sorted(path for path in (REPO / "harbor").iterdir() if (path / "task.toml").is_file())


def test_no_task_name_appears_in_the_harness_the_method_or_the_launcher() -> None:
    names = set()
    for task in TASKS:
        names |= {task.name, task.name.replace("_", "-"), task.name.replace("_", " ")}
    assert len(TASKS) >= 3, "the three shipped tasks are expected under harbor/"
    sources = [*(REPO / "harness").rglob("*.py"), *(REPO / "tttd").rglob("*.py"), REPO / "run.py"]
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in sources
        for name in names
        if name in path.read_text().lower()
    ]
    assert not found, f"task names in task-agnostic code: {found}"


def done(cases: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    ratios = [case["scoreRatio"] for case in cases]
    return {"status": "done", "score": 100 * sum(ratios) / len(ratios), "cases": cases, **extra}


def certified(value: float) -> dict[str, Any]:
    return {"scoreRatio": 1.0, "msg": f"ok Value: {value}", "value": value, "status": "Correct"}


MIN_VALUE = Scoring(direction="min", verifier="value")


def test_min_direction_reward_grows_as_the_bound_falls() -> None:
    worse = judge_verdict(done([certified(0.40)], value=0.40), None, {}, MIN_VALUE)
    better = judge_verdict(done([certified(0.38)], value=0.38), None, {}, MIN_VALUE)
    assert worse.valid and better.valid
    assert (worse.raw_score, better.raw_score) == (0.40, 0.38)  # the archive keeps the bound
    assert better.reward > worse.reward > 0  # and training sees 1 / bound
    assert better.reward == pytest.approx(1 / 0.38)


def test_min_direction_archive_value_is_the_negated_bound() -> None:
    config = ArchiveConfig(rollout_n=2, groups_per_batch=1, score_direction="min")
    assert config.signed(0.38) > config.signed(0.40)


def test_value_verifier_refuses_an_uncertified_case() -> None:
    failed = {"scoreRatio": 0.0, "msg": "wrong answer h leaves [0, 1]", "status": "Wrong Answer"}
    verdict = judge_verdict(done([failed]), None, {}, MIN_VALUE)
    assert not verdict.valid and verdict.reward == 0.0
    assert "no certified value" in verdict.message


def test_a_partially_correct_case_is_named_partial_not_wrong_answer() -> None:
    half = {"scoreRatio": 0.5, "msg": "points 0.5", "status": "Wrong Answer"}
    verdict = judge_verdict(done([half]), None, {}, MIN_VALUE)
    assert verdict.message == "no certified value; case 1 partial (ratio 0.5000)"


def test_value_verifier_refuses_a_mean_that_disagrees_with_its_cases() -> None:
    verdict = judge_verdict(done([certified(0.39)], value=0.2), None, {}, MIN_VALUE)
    assert not verdict.valid and "disagrees" in verdict.message


def test_max_direction_frontiercs_scoring_is_unchanged() -> None:
    case = {"scoreRatio": 0.5, "msg": "points 0.5 Ratio: 0.5", "status": "Wrong Answer"}
    verdict = judge_verdict(done([case]), None, {}, Scoring())
    assert (verdict.reward, verdict.raw_score) == (50.0, 50.0)


def contract(**changes: str) -> dict[str, str]:
    data = json.loads((REPO / "harbor" / "polyomino_packing" / "contract.json").read_text())
    return {**data, **changes}


def test_contract_refuses_an_unsupported_language_naming_the_key() -> None:
    refusal = r"solution_language: must be a language the judge compiles.*got 'rust'"
    with pytest.raises(ContractError, match=refusal):
        TaskContract.from_dict(contract(solution_language="rust"))


def test_contract_refuses_an_unknown_verifier_kind() -> None:
    refusal = "verifier: must be one of 'frontiercs', 'value', 'geomean', got 'oracle'"
    with pytest.raises(ContractError, match=refusal):
        TaskContract.from_dict(contract(verifier="oracle"))


@pytest.mark.parametrize("task", TASKS, ids=lambda path: path.name)
def test_scorer_takes_language_problem_and_scoring_from_the_task(task: Path) -> None:
    declared = load_contract(task)
    scorer = FrontierCSScorer.for_task(task, "http://127.0.0.1:1")
    assert scorer.settings.problem_id == declared.judge_problem_id
    assert scorer.settings.lang == declared.fence_tag
    assert scorer.scoring == Scoring(declared.score_direction, declared.verifier)
    scorer.close()


@pytest.mark.parametrize("task", TASKS, ids=lambda path: path.name)
def test_task_toml_is_accepted_by_harbors_own_task_config(task: Path) -> None:
    import tomllib

    from harbor.models.task.config import TaskConfig

    config = TaskConfig.model_validate(tomllib.loads((task / "task.toml").read_text()))
    assert config.agent.timeout_sec == 604800 and config.verifier.timeout_sec == 900
    # The judge's address and problem, and its access token when it is off loopback
    # (judges/README.md, "Access"); the token is passed through from the host, never written here.
    assert set(config.verifier.env) == {
        "FRONTIERCS_JUDGE_URL",
        "FRONTIERCS_PROBLEM_ID",
        "GUIDANCE_TTT_JUDGE_TOKEN",
    }
    assert config.verifier.env["GUIDANCE_TTT_JUDGE_TOKEN"] == "${GUIDANCE_TTT_JUDGE_TOKEN:-}"


def test_every_task_ships_the_same_verifier_and_its_own_facts() -> None:
    """A task folder stands alone (its verifier runs in the trial container, without the
    harness), so each carries `tests/verify.py`: one file, identical in every task, reading the
    task's facts from `tests/task_facts.json`, which must agree with contract.json and task.toml."""
    for name in ("test.sh", "verify.py"):
        copies = {task.name: (task / "tests" / name).read_bytes() for task in TASKS}
        assert len(set(copies.values())) == 1, f"tests/{name} differs between tasks"
    verifiers = {task.name: (task / "tests" / "verify.py").read_bytes() for task in TASKS}
    assert len(set(verifiers.values())) == 1, (
        f"verify.py differs between tasks: {sorted(verifiers)}"
    )
    for task in TASKS:
        facts = json.loads((task / "tests" / "task_facts.json").read_text())
        contract = load_contract(task)
        toml = tomllib.loads((task / "task.toml").read_text())
        assert facts == {
            "judge_problem_id": contract.judge_problem_id,
            "solution_language": contract.solution_language,
            "solution_path": toml["metadata"]["solution_path"],
            "verifier": contract.verifier,
            "score_direction": contract.score_direction,
        }, task.name
