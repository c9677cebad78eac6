"""Suite names, the seed record's suite, and re-scoring the seed on another suite (pure parts;
the run's use of them is tested against the real judge in tests/harness/test_frozen_mode.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.adapters.judge.suites import (
    PUBLIC,
    SuiteMismatch,
    align_seed,
    check_resume_suite,
    seed_on_judge_suite,
    seed_suite,
    suite_name,
)
from harness.state import INVALID, VALID, VerificationResult
from harness.storage.run_files import load_seed

TASK = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"


class ScriptedScorer:
    """Answers every program with one verdict and counts the calls (the judge is not the unit
    under test here)."""

    def __init__(self, verdict: VerificationResult, suite: str = "generated:3:2") -> None:
        self.verdict, self.serving, self.calls = verdict, suite, 0

    def __call__(self, code: str) -> VerificationResult:
        self.calls += 1
        return self.verdict

    def suite(self) -> str:
        return self.serving


def valid(score: float) -> VerificationResult:
    return VerificationResult(score, score, True, VALID, f"score {score:.6f} over 2 cases")


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ({"name": "generated:0:70", "kind": "generated"}, "generated:0:70"),
        ({"kind": "package", "label": "cases of the problem package p"}, PUBLIC),
        ({"kind": "generated", "label": "no stamp"}, "generated"),
        (None, PUBLIC),  # FrontierCS's own judge labels nothing: its public cases
    ],
)
def test_suite_names(label: object, name: str) -> None:
    assert suite_name(label) == name


def test_the_seed_records_name_the_suite_of_their_score() -> None:
    assert seed_suite(TASK / "solution" / "seed.json") == PUBLIC
    assert seed_suite(TASK / "solution" / "shelf" / "seed.json") == PUBLIC


def test_a_seed_record_without_its_suite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "seed.json"
    path.write_text(json.dumps({"entry": {"verifier_raw_score": 1.0}, "measured": {}}))
    with pytest.raises(ValueError, match="does not name the suite"):
        seed_suite(path)


def test_same_suite_keeps_the_measured_score_and_judges_nothing() -> None:
    seed = load_seed(TASK)
    scorer = ScriptedScorer(valid(99.0), suite=PUBLIC)
    on = seed_on_judge_suite(scorer, TASK / "solution" / "seed.json", seed)
    assert scorer.calls == 0 and on.record is None
    assert on.entry.verifier_raw_score == seed.verifier_raw_score
    assert on.entry.metadata["suite"] == PUBLIC


def test_another_suite_rescores_the_seed_and_records_where_it_came_from() -> None:
    seed = load_seed(TASK)
    scorer = ScriptedScorer(valid(26.5))
    on = seed_on_judge_suite(scorer, TASK / "solution" / "seed.json", seed)
    assert scorer.calls == 1
    assert on.entry.verifier_raw_score == on.entry.verifier_reward == 26.5
    assert on.entry.metadata["suite"] == "generated:3:2"
    assert on.entry.metadata["seed_rescored_from"] == {
        "suite": PUBLIC,
        "score": seed.verifier_raw_score,
    }
    assert on.record["from_score"] == seed.verifier_raw_score and on.record["score"] == 26.5


def test_a_seed_that_is_not_valid_on_the_judges_suite_stops_the_run() -> None:
    bad = VerificationResult.failure(INVALID, "no case scored")
    with pytest.raises(SuiteMismatch, match="re-scoring it there gave invalid"):
        align_seed(load_seed(TASK), PUBLIC, "generated:3:2", ScriptedScorer(bad))


def test_a_resume_across_suites_is_refused_naming_both() -> None:
    check_resume_suite("generated:3:2", "generated:3:2", "http://j")
    with pytest.raises(SuiteMismatch, match=r"measured on suite public.*serves suite generated"):
        check_resume_suite(PUBLIC, "generated:3:2", "http://j")
