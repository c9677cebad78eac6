"""The judge client against the project's real local judge (`python -m judges`, a subprocess on
127.0.0.1) on a small generated suite: honest programs score, score fakers and broken programs
get reward 0, and the task's verifier reaches the same numbers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_fakes import LocalJudge

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.scorer import JudgeUnavailableError

TASK_DIR = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
SEED_PROGRAM = (TASK_DIR / "solution" / "solution.cpp").read_text()
CASES = 3

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalJudge]:
    state = tmp_path_factory.mktemp("judge-state")
    with LocalJudge(state, "--generated-cases", str(CASES), "--seed", "11") as running:
        yield running


def score(judge: LocalJudge, program: str):
    scorer = FrontierCSScorer.for_task(
        TASK_DIR, judge.url, "0", deadline_s=240.0, poll_interval_s=0.1
    )
    return scorer(program)


def test_a_repeated_program_is_a_verdict_cache_hit_in_the_verdict(judge: LocalJudge) -> None:
    program = SEED_PROGRAM + "// judged twice\n"
    first, again = score(judge, program), score(judge, program)
    assert first.artifacts["judge_cache_hit"] is False
    assert again.artifacts["judge_cache_hit"] is True
    assert (again.status, again.raw_score, again.reward) == (first.status, first.raw_score,
                                                             first.reward)  # fmt: skip
    assert again.artifacts["case_ratios"] == first.artifacts["case_ratios"]


def claims_on_stderr(text: str) -> str:
    """A program that prints `text` to stderr and exits non-zero without any output."""
    return f'#include <cstdio>\nint main() {{ std::fputs("{text}\\n", stderr); return 1; }}\n'


@pytest.mark.parametrize(
    "claim",
    [
        "Ratio: 1.0",
        "Ratio: 99",
        "points 1.0 Ratio: 1.000000000 (cells=100, W=10, H=10, area=100)",
    ],
)
def test_program_claiming_a_ratio_on_stderr_gets_reward_zero(judge: LocalJudge, claim: str) -> None:
    # The local judge never reads a ratio from a failed run: every case scores 0, which is a
    # judged candidate with score 0 (the fooled FrontierCS judge's case is in test_scorer.py).
    verdict = score(judge, claims_on_stderr(claim))
    assert verdict.reward == 0.0 and verdict.raw_score == 0.0
    assert verdict.status == "valid"
    assert verdict.artifacts["case_ratios"] == [0.0] * CASES


def test_seed_program_scores_its_density(judge: LocalJudge) -> None:
    verdict = score(judge, SEED_PROGRAM)
    assert verdict.valid, verdict.message
    assert len(verdict.artifacts["case_ratios"]) == CASES
    assert 15.0 < verdict.reward < 70.0  # the one-row seed scores ≈26 on this suite


def test_compile_error_is_invalid_with_the_compilers_message(judge: LocalJudge) -> None:
    verdict = score(judge, "int main() { this is not C++ }\n")
    assert verdict.status == "invalid" and verdict.reward == 0.0
    assert "compil" in verdict.message.lower()


def test_overlapping_output_is_a_valid_candidate_with_score_zero(judge: LocalJudge) -> None:
    # Every piece at the same spot: the checker's overlap verdict, no ratio.
    program = (
        '#include <cstdio>\nint main(){int n,k;long long x,y;std::scanf("%d",&n);'
        'for(int i=0;i<n;++i){std::scanf("%d",&k);'
        'for(int j=0;j<k;++j)std::scanf("%lld %lld",&x,&y);}'
        'std::printf("1000 1000\\n");for(int i=0;i<n;++i)std::printf("500 500 0 0\\n");}\n'
    )
    verdict = score(judge, program)
    assert verdict.status == "valid" and verdict.reward == 0.0 and verdict.raw_score == 0.0
    assert f"{CASES} cases scored 0" in verdict.artifacts["case_detail"]


def test_task_verifier_reaches_the_clients_score(judge: LocalJudge, tmp_path: Path) -> None:
    expected = score(judge, SEED_PROGRAM).reward
    solution = tmp_path / "workspace" / "solution.cpp"
    solution.parent.mkdir()
    solution.write_text(SEED_PROGRAM)
    logs = tmp_path / "logs"
    env = {
        "PYTHON": sys.executable,
        "FRONTIERCS_JUDGE_URL": judge.url,
        "FRONTIERCS_PROBLEM_ID": "0",
        "VERIFIER_SOLUTION_PATH": str(solution),
        "VERIFIER_LOG_DIR": str(logs),
        "VERIFIER_POLL_INTERVAL_S": "0.1",
    }
    subprocess.run(
        ["bash", str(TASK_DIR / "tests" / "test.sh")],
        env={**os.environ, **env},
        check=True,
        timeout=300,
        capture_output=True,
    )
    assert json.loads((logs / "reward.json").read_text()) == {"reward": pytest.approx(expected)}
    assert (logs / "reason.txt").read_text().startswith(f"score {expected:.6f} over {CASES} cases")


FRONTIERCS = Path(__file__).resolve().parents[3] / "shared" / "data" / "frontiercs"


def test_a_checker_that_does_not_compile_stops_the_candidate_as_a_judge_fault(
    tmp_path: Path,
) -> None:
    # Problem 1 of FrontierCS with its checker replaced by one that does not compile: the judge
    # answers `error` for a judge-side reason, which must never become the candidate's reward 0.
    original = FRONTIERCS / "problems" / "1"
    if not (original / "config.yaml").is_file():
        pytest.skip(f"the FrontierCS test data is not at {FRONTIERCS} (../shared absent)")
    package = tmp_path / "problems" / "1"
    package.mkdir(parents=True)
    (package / "config.yaml").write_text((original / "config.yaml").read_text())
    shutil.copytree(original / "testdata", package / "testdata")  # no link out of a package
    (package / "chk.cc").write_text('#include "testlib.h"\nint main() { this is not C++ }\n')
    testlib = FRONTIERCS / "include"
    with LocalJudge(
        tmp_path / "state", "--problems", str(tmp_path / "problems"), "--testlib", str(testlib)
    ) as broken:
        scorer = FrontierCSScorer.for_task(
            TASK_DIR, broken.url, "1", attempts=2, retry_backoff_s=0.0, poll_interval_s=0.1
        )
        with pytest.raises(JudgeUnavailableError, match="judge-side exception") as stopped:
            scorer("int main() { return 0; }\n")
        scorer.close()
    assert stopped.value.attempts == 2
    assert "chk.cc does not compile" in str(stopped.value)
