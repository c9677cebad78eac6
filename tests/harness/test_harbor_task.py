"""The Polyomino Harbor task directory: its config validated by Harbor itself, its contract, its
environment, its oracle, and its verifier run as a subprocess against judges on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from harbor.models.task.config import NetworkMode, TaskConfig
from judge_fakes import (
    QUEUED,
    SUBMITTED,
    FakeJudge,
    Reply,
    checker_case,
    closed_port_url,
    done,
    exploit_answer,
    failed_run_case,
)

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.contract import load_task
from harness.scorer import JudgeUnavailableError
from judges.problems.polyomino import checker

TASK_DIR = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
FULL_TEXT = TASK_DIR / "variants" / "full"
SEED_PROGRAM = (TASK_DIR / "solution" / "solution.cpp").read_text()


def test_task_toml_is_accepted_by_harbors_own_task_config() -> None:
    raw = tomllib.loads((TASK_DIR / "task.toml").read_text())
    config = TaskConfig.model_validate(raw)
    assert config.schema_version == "1.4"
    assert config.agent.timeout_sec == 604800
    assert config.verifier.timeout_sec == 900
    assert config.environment.cpus == 1 and config.environment.memory_mb == 4096
    assert config.environment.network_mode is NetworkMode.ALLOWLIST
    assert config.environment.allowed_hosts == ["host.docker.internal"]
    assert set(config.verifier.env) == {
        "FRONTIERCS_JUDGE_URL",
        "FRONTIERCS_PROBLEM_ID",
        "GUIDANCE_TTT_JUDGE_TOKEN",  # the judge's access token, where it needs one
    }
    _assert_no_key_ignored(raw, config.model_dump(), "task.toml")


def _assert_no_key_ignored(raw: dict[str, Any], parsed: dict[str, Any], where: str) -> None:
    """Pydantic drops unknown keys silently; a misspelt key must fail here instead."""
    for key, value in raw.items():
        assert key in parsed, f"{where}: key {key!r} is not part of Harbor's TaskConfig"
        if (
            isinstance(value, dict)
            and isinstance(parsed[key], dict)
            and key not in ("env", "metadata")
        ):
            _assert_no_key_ignored(value, parsed[key], f"{where}.{key}")


def test_contract_and_instruction_load_through_the_harness() -> None:
    contract, instruction = load_task(TASK_DIR)
    assert contract.solution_language == "cpp" and contract.fence_tag == "cpp"
    assert contract.score_direction == "max"
    assert contract.judge_problem_id == "0"
    keys = json.loads((TASK_DIR / "contract.json").read_text())
    assert sorted(keys) == sorted(
        [
            "solution_language",
            "solution_contract",
            "mechanism_constraint",
            "objective",
            "raw_score_label",
            "score_direction",
            "judge_problem_id",
        ]
    )
    assert instruction == (TASK_DIR / "instruction.md").read_text()
    assert "FrontierCS algorithmic problem 0" in instruction
    assert contract.raw_score_label == "FrontierCS score"
    full, statement = load_task(TASK_DIR, "full")
    assert (full.solution_language, full.judge_problem_id) == ("cpp", "0")
    assert full.raw_score_label == "Packing score" and full.objective != contract.objective
    for needed in (
        "## Input",
        "## Output",
        "(x, y) ← (y, −x)",
        "x ← −x",
        "[0, W) × [0, H)",
        "W · H",
    ):
        assert needed in statement, f"variants/full/instruction.md lost {needed!r}"
    assert "g++ main.cpp -O2 -pipe -std=gnu++17" in statement
    assert "256 MiB" in statement and "2 seconds" in statement


def test_full_text_carries_every_rule_of_the_frontiercs_statement() -> None:
    """The facts of FrontierCS problem 0's statement, in this project's words (the `full` task
    text): the tie rule, the transform order, the input bounds, the holes, the generation rule,
    the statement's W = H remark and leaderboard formula next to what the judge actually
    scores."""
    instruction = " ".join((FULL_TEXT / "instruction.md").read_text().split())
    for fact in (
        "the one with the smaller `H` is preferred, and when `H` is equal too, the one with the "
        "smaller `W`",
        "`100 ≤ n ≤ 10000`",
        "`1 ≤ k ≤ 10`",
        "may enclose holes",
        "may be negative",
        "4-connected",
        "mirror, then turn, then move",
        "`W = H`",
        "`10^5 · Σk / A`",
        "the other tests still count",
        "uniformly, with replacement",
        "`p` uniform in `[2, 4]`",
        "-O2 -pipe -std=gnu++17",
    ):
        assert fact in instruction, f"instruction.md lost {fact!r}"


def test_full_text_example_is_a_valid_answer_with_ratio_one(monkeypatch) -> None:
    """The worked example of the full text, judged by the project's checker (whose piece-count
    floor of 100 is lowered for this three-piece example)."""
    instruction = (FULL_TEXT / "instruction.md").read_text()
    example = instruction[instruction.index("## Example") : instruction.index("## Scoring")]
    blocks = example.split("```")[1::2]
    assert len(blocks) == 2
    monkeypatch.setattr(checker, "MIN_PIECES", 1)
    verdict = checker.check(checker.parse_instance(blocks[0].strip()), blocks[1].strip().encode())
    assert verdict.points == 1.0, verdict.message


def test_environment_passes_the_judge_address_to_the_container() -> None:
    compose = yaml.safe_load((TASK_DIR / "environment" / "docker-compose.yaml").read_text())
    environment = compose["services"]["main"]["environment"]
    assert set(environment) == {"FRONTIERCS_JUDGE_URL", "FRONTIERCS_PROBLEM_ID"}
    dockerfile = (TASK_DIR / "environment" / "Dockerfile").read_text()
    assert "httpx" in dockerfile  # the verifier's only dependency


def test_oracle_installs_the_seed_program(tmp_path: Path) -> None:
    dest = tmp_path / "workspace" / "solution.cpp"
    subprocess.run(
        ["bash", str(TASK_DIR / "solution" / "solve.sh")],
        env={**os.environ, "SOLUTION_DEST": str(dest)},
        check=True,
        timeout=30,
    )
    assert dest.read_text() == SEED_PROGRAM


def run_verifier(
    tmp_path: Path, judge_url: str, program: str | None, **env: str
) -> tuple[float, str]:
    """Run tests/test.sh as Harbor would, with its paths moved into tmp_path; it must give a
    verdict (exit 0 and a reward file)."""
    completed, logs = run_test_sh(tmp_path, judge_url, program, **env)
    assert completed.returncode == 0, completed.stderr
    reward = json.loads((logs / "reward.json").read_text())
    assert set(reward) == {"reward"}
    return reward["reward"], (logs / "reason.txt").read_text().strip()


def verifier_failure(tmp_path: Path, judge_url: str, program: str | None, **env: str) -> str:
    """Run tests/test.sh where no verdict can be given: it must fail loudly (exit 1, no reward
    file, the reason on stderr and in reason.txt and verdict.json). Returns the reason."""
    completed, logs = run_test_sh(tmp_path, judge_url, program, **env)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert not (logs / "reward.json").exists(), "a verifier that cannot score wrote a reward"
    assert "VERIFIER FAILED" in completed.stderr
    assert json.loads((logs / "verdict.json").read_text())["status"] == "verifier_failed"
    reason = (logs / "reason.txt").read_text().strip()
    assert reason.startswith("verifier failed: ")
    return reason.removeprefix("verifier failed: ")


def run_test_sh(
    tmp_path: Path, judge_url: str, program: str | None, **env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    solution = tmp_path / "workspace" / "solution.cpp"
    if program is not None:
        solution.parent.mkdir(parents=True, exist_ok=True)
        solution.write_text(program)
    logs = tmp_path / "logs" / "verifier"
    settings = {
        "PYTHON": sys.executable,
        "FRONTIERCS_JUDGE_URL": judge_url,
        "FRONTIERCS_PROBLEM_ID": "0",
        "VERIFIER_SOLUTION_PATH": str(solution),
        "VERIFIER_LOG_DIR": str(logs),
        "VERIFIER_POLL_INTERVAL_S": "0.05",
        "VERIFIER_RETRY_BACKOFF_S": "0.01",
        **env,
    }
    completed = subprocess.run(
        ["bash", str(TASK_DIR / "tests" / "test.sh")],
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return completed, logs


def test_verifier_without_a_program_writes_zero_with_a_reason(tmp_path: Path) -> None:
    reward, reason = run_verifier(tmp_path, closed_port_url(), program=None)
    assert reward == 0.0
    assert reason.startswith("no program at ") and "solution.cpp" in reason


def test_verifier_with_the_judge_down_fails_loudly_without_a_reward(tmp_path: Path) -> None:
    reason = verifier_failure(tmp_path, closed_port_url(), program=SEED_PROGRAM)
    assert reason.startswith("judge unavailable after 3 attempts")


def test_verifier_with_a_hanging_judge_stops_within_its_budget(tmp_path: Path) -> None:
    hang = Reply(200, {"status": "queued"}, delay_s=60.0)
    with FakeJudge([SUBMITTED], [hang]) as judge:
        started = time.monotonic()
        reason = verifier_failure(tmp_path, judge.url, SEED_PROGRAM, VERIFIER_BUDGET_S="1.5")
    assert time.monotonic() - started < 15  # the 340 s deadline never ran out
    assert reason.startswith("judge unavailable after 1 attempts")


GENUINE = [checker_case(400, 25, 20), checker_case(1000, 40, 50)]
ANSWERS = {
    "genuine": done(GENUINE),
    "partly failed": done([*GENUINE, failed_run_case("", status="Time Limit Exceeded")]),
    "exploit 1.0": exploit_answer("Ratio: 1.0"),
    "exploit 99": exploit_answer("Ratio: 99"),
    "forged checker line": exploit_answer("points 1.0 Ratio: 1.0 (cells=9, W=3, H=3, area=9)"),
    "score disagrees": done(GENUINE, score=99.0),
    "nan score": done(GENUINE, score=float("nan")),
    "null score": done(GENUINE, score=None),
    "compile error": Reply(200, {"status": "error", "error": "Error: compile failed: x"}),
    "all crashed": done([failed_run_case("boom", status="Runtime Error")]),
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_verifier_and_harness_client_agree_on_every_answer(tmp_path: Path, name: str) -> None:
    with FakeJudge([SUBMITTED], [QUEUED, ANSWERS[name]]) as judge:
        verdict = FrontierCSScorer.for_task(TASK_DIR, judge.url, "0", poll_interval_s=0.02)(
            SEED_PROGRAM
        )
    with FakeJudge([SUBMITTED], [QUEUED, ANSWERS[name]]) as judge:
        reward, reason = run_verifier(tmp_path, judge.url, SEED_PROGRAM)
    assert reward == pytest.approx(verdict.reward), (name, verdict.message, reason)
    if not verdict.valid:
        assert reward == 0.0
    if name in ("exploit 1.0", "exploit 99", "forged checker line", "score disagrees"):
        assert "inconsistent judge result" in reason and "inconsistent" in verdict.message


def test_judge_side_exception_stops_the_harness_and_fails_the_verifier_loudly(
    tmp_path: Path,
) -> None:
    crash = Reply(200, {"status": "error", "error": "Error: go-judge unreachable"})
    with FakeJudge([SUBMITTED], [crash]) as judge, pytest.raises(JudgeUnavailableError):
        FrontierCSScorer.for_task(TASK_DIR, judge.url, "0", attempts=2, retry_backoff_s=0.01)(
            SEED_PROGRAM
        )
    with FakeJudge([SUBMITTED], [crash]) as judge:
        reason = verifier_failure(tmp_path, judge.url, SEED_PROGRAM)
    assert reason == f"judge-side exception at {judge.url}: Error: go-judge unreachable"


def test_verdict_file_names_the_suite_the_score_was_measured_on(tmp_path: Path) -> None:
    labelled = done(GENUINE)
    labelled.body["suite"] = {"name": "generated:4:2", "kind": "generated"}
    for answer, suite in ((done(GENUINE), "public"), (labelled, "generated:4:2")):
        with FakeJudge([SUBMITTED], [QUEUED, answer]) as judge:
            run_verifier(tmp_path / suite, judge.url, SEED_PROGRAM)
        verdict = json.loads((tmp_path / suite / "logs" / "verifier" / "verdict.json").read_text())
        assert verdict["suite"] == suite
