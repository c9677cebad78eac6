"""The seed archive of the Polyomino task: its records, its code-free summary, and its program,
judged by the real local judge on the 70 public cases and on the generated suite."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from judge_fakes import LocalJudge, public_problems

from harness.contract import load_contract
from harness.scorer import FrontierCSScorer
from harness.state import LibraryEntry, LibraryNode

TASK_DIR = Path(__file__).resolve().parents[1] / "harbor" / "polyomino_packing"
SEED = json.loads((TASK_DIR / "solution" / "seed.json").read_text())
PROGRAM = (TASK_DIR / "solution" / "solution.cpp").read_text()


def test_seed_archive_holds_one_root_node_and_its_entry() -> None:
    assert set(SEED) == {"entry", "node", "measured"}
    entry, node = LibraryEntry.from_dict(SEED["entry"]), LibraryNode.from_dict(SEED["node"])
    assert entry.parent_id is None and entry.timestep == 0
    assert entry.verifier_status == "valid" and entry.failure_mode is None
    assert entry.solution == PROGRAM
    assert node.entry_id == entry.id and node.parent_id is None and node.children == ()
    assert node.problem_id == entry.problem_id and node.timestep == 0
    assert node.metadata == {"kind": "root", "archive_candidate": True, "verifier_status": "valid"}
    # score direction is max, so the PUCT value is the raw score itself
    assert load_contract(TASK_DIR).score_direction == "max"
    assert node.value == node.raw_score == entry.verifier_raw_score == entry.verifier_reward


def test_seed_score_is_the_measured_public_score() -> None:
    measured = SEED["measured"]
    public = measured["public_cases"]
    assert public["cases"] == 70 and public["valid_cases"] == 70
    assert SEED["node"]["raw_score"] == public["score"]
    assert measured["generated_suite"]["valid_cases"] == measured["generated_suite"]["cases"]
    for suite in (public, measured["generated_suite"]):
        assert suite["command"] and suite["date"]


def test_seed_summary_is_code_free_and_canonical() -> None:
    entry = SEED["entry"]
    summary = entry["summary"]
    assert summary == entry["reusable_idea"] == entry["metadata"]["raw_model_summary"]
    assert len(summary.split()) >= 40
    code_like = r"[{}`#<>=\[\]]|::|->|\w\(|;\S|\d|\b(int|long|void|return|std|printf|scanf)\b"
    assert not re.search(code_like, summary), "the seed summary must hold no code or constants"
    assert not any(
        line.strip() in summary for line in PROGRAM.splitlines() if len(line.strip()) > 12
    )


def _judge_seed(judge: LocalJudge) -> tuple[float, list[float]]:
    scorer = FrontierCSScorer.for_task(
        TASK_DIR, judge.url, "0", deadline_s=600.0, poll_interval_s=0.2
    )
    verdict = scorer(PROGRAM)
    assert verdict.valid, verdict.message
    return verdict.reward, verdict.artifacts["case_ratios"]


@pytest.mark.slow
def test_seed_is_valid_on_all_70_public_cases(tmp_path: Path) -> None:
    problems = public_problems(tmp_path / "problems")
    with LocalJudge(tmp_path / "state", "--problems", str(problems)) as judge:
        score, ratios = _judge_seed(judge)
    assert len(ratios) == 70
    assert min(ratios) > 0.3, "every public case must be a valid packing"
    assert score == pytest.approx(SEED["measured"]["public_cases"]["score"], abs=1e-6)


@pytest.mark.slow
def test_seed_is_valid_on_the_generated_suite(tmp_path: Path) -> None:
    generated = SEED["measured"]["generated_suite"]
    options = ["--generated-cases", str(generated["cases"]), "--seed", str(generated["seed"])]
    with LocalJudge(tmp_path / "state", *options) as judge:
        score, ratios = _judge_seed(judge)
    assert len(ratios) == generated["cases"]
    assert min(ratios) > 0.3, "every generated case must be a valid packing"
    assert score == pytest.approx(generated["score"], abs=1e-6)
