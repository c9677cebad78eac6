"""The FrontierCS judge client against scripted judges on 127.0.0.1 (tests/judge_fakes.py).

Every test runs a real HTTP exchange; deadlines, poll intervals and backoffs are shrunk so the
whole file runs in a few seconds.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from archive_builders import Spec, tree_archive
from judge_fakes import (
    NOT_FOUND,
    QUEUED,
    SUBMITTED,
    FakeJudge,
    RacySidJudge,
    Reply,
    checker_case,
    closed_port_url,
    done,
    exploit_answer,
    failed_run_case,
)

from harness.adapters.judge.frontiercs import FrontierCSScorer, JudgeSettings
from harness.adapters.judge.verdict import load_case_check
from harness.answers import rollout_entry
from harness.scorer import JudgeUnavailableError
from harness.state import ArchiveConfig
from tests.task_builders import write_task

TASK_DIR = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
PROGRAM = "int main() { return 0; }\n"
FAST = {"deadline_s": 2.0, "poll_interval_s": 0.02, "attempts": 3, "retry_backoff_s": 0.01}


def scorer_for(url: str, **overrides: float) -> FrontierCSScorer:
    """The client as the harness builds it for the Polyomino task, with test-sized timings."""
    return FrontierCSScorer.for_task(TASK_DIR, url, "0", **{**FAST, **overrides})


GENUINE = [checker_case(400, 25, 20), checker_case(1000, 40, 50), checker_case(300, 30, 25)]


def test_client_submits_multipart_code_file_and_polls_the_numeric_sid() -> None:
    with FakeJudge([SUBMITTED], [QUEUED, QUEUED, done(GENUINE)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    submit = judge.requests[0]
    assert submit.path == "/submit"
    assert submit.fields == {"pid": "0", "lang": "cpp"}
    assert submit.files == {"code": ("solution.cpp", "text/x-c++src", PROGRAM.encode())}
    assert [r.path for r in judge.requests[1:]] == ["/result/7"] * 3
    assert verdict.artifacts["submission_id"] == "7"


def test_consistent_done_result_is_valid_with_reward_equal_to_score() -> None:
    answer = done(GENUINE)
    with FakeJudge([SUBMITTED], [answer]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.valid and verdict.status == "valid"
    assert verdict.reward == verdict.raw_score == pytest.approx(answer.body["score"])
    assert verdict.artifacts["case_ratios"] == [case["scoreRatio"] for case in GENUINE]


@pytest.mark.parametrize("stderr", ["Ratio: 1.0", "Ratio: 99"])
def test_stderr_ratio_exploit_gets_reward_zero(stderr: str) -> None:
    answer = exploit_answer(stderr)
    assert answer.body["score"] in (100.0, 9900.0)  # what the pinned judge hands out
    with FakeJudge([SUBMITTED], [answer]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.reward == 0.0 and verdict.raw_score is None
    assert verdict.status == "invalid"
    assert "inconsistent judge result" in verdict.message


def test_forged_checker_line_on_stderr_is_rejected_because_no_output_was_judged() -> None:
    forged = "points 1.0 Ratio: 1.000000000 (cells=100, W=10, H=10, area=100)"
    with FakeJudge([SUBMITTED], [exploit_answer(forged)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.status == "invalid" and verdict.reward == 0.0
    assert "fails the task's score check" in verdict.message
    assert "no program output" in verdict.artifacts["score_check"]  # the check's words: artifact


def test_generic_hardening_alone_rejects_ratio_above_one() -> None:
    with FakeJudge([SUBMITTED], [exploit_answer("Ratio: 99")]) as judge:
        verdict = FrontierCSScorer(JudgeSettings(judge.url, "0", **FAST))(PROGRAM)
    assert verdict.status == "invalid"
    assert "outside [0, 1]" in verdict.message


def test_done_score_that_disagrees_with_its_cases_is_invalid() -> None:
    with FakeJudge([SUBMITTED], [done(GENUINE, score=97.5)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.status == "invalid" and verdict.reward == 0.0
    assert "disagrees with 100 × mean case ratio" in verdict.message


@pytest.mark.parametrize("score", [math.nan, None, math.inf])
def test_non_finite_score_is_invalid_not_a_reward(score: float | None) -> None:
    with FakeJudge([SUBMITTED], [done(GENUINE, score=score)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.status == "invalid" and verdict.reward == 0.0
    assert "non-finite score" in verdict.message


def test_unparseable_stderr_ratio_nan_is_invalid() -> None:
    with FakeJudge([SUBMITTED], [exploit_answer("Ratio: .", cases=2)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.status == "invalid"
    assert "non-finite" in verdict.message


def test_compile_error_is_invalid_with_the_judges_log_kept_as_an_artifact() -> None:
    """The reference (harness/scorer.py) stores an `error` answer's text as the message; a
    compile log quotes the candidate's source, so ours keeps it in `judge_logs` (the reference's
    artifact key) and the message, which Reef receives, is our sentence (differences row 37)."""
    error = Reply(200, {"status": "error", "error": "Error: compile failed: main.cpp:1: oops"})
    with FakeJudge([SUBMITTED], [error]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.status == "invalid" and verdict.reward == 0.0
    assert "main.cpp" not in verdict.message and "did not compile" in verdict.message
    assert verdict.artifacts["judge_logs"] == "Error: compile failed: main.cpp:1: oops"
    assert verdict.artifacts["judge_status"] == "error"
    assert judge.count("submit") == 1


def test_crash_on_every_case_is_a_valid_candidate_with_score_zero() -> None:
    crashed = done([failed_run_case("boom", status="Runtime Error")] * 2)
    with FakeJudge([SUBMITTED], [crashed]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert (verdict.status, verdict.valid) == ("valid", True)
    assert (verdict.reward, verdict.raw_score) == (0.0, 0.0)
    assert verdict.message == "accepted"  # the reference's, whatever the cases said
    assert verdict.artifacts["case_detail"].startswith(
        "score 0.000000 over 2 cases; 2 cases scored 0, first: case 1"
    )
    assert "boom" in verdict.artifacts["case_detail"] and "boom" not in verdict.message


def test_done_with_score_zero_becomes_a_child_and_sets_the_parents_best_child_value() -> None:
    archive = tree_archive(
        ArchiveConfig(rollout_n=2, groups_per_batch=1), [Spec("root", None, 30.0)]
    )
    parent = archive.select_parent(0, 0)
    crashed = done([failed_run_case("", status="Time Limit Exceeded")] * 3)
    with FakeJudge([SUBMITTED], [crashed]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    entry = rollout_entry(
        parent=parent,
        step=0,
        guidance="pack rows",
        execution_thinking="",
        solution=PROGRAM,
        verification=verdict,
        raw_summary="a program that times out",
        metadata={},
    )

    child = archive.submit(0, 0, entry)

    assert child is not None and child.raw_score == 0.0 and child.parent_id == "root"
    assert archive.nodes["root"].children == (child.id,)
    assert archive.puct_m == {"root": 0.0}
    assert entry.failure_mode is None and entry.verifier_reward == 0.0


def test_every_case_failing_with_a_stderr_ratio_is_still_invalid() -> None:
    # All cases failed, but the judge scored them from the candidate's stderr: the exploit
    # guard wins over "a done result is a valid candidate".
    with FakeJudge([SUBMITTED], [exploit_answer("Ratio: 1.0", cases=2)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.status == "invalid" and verdict.reward == 0.0
    assert verdict.raw_score is None


@pytest.mark.parametrize(
    "message",
    [
        "Error: checker compile failed: chk.cc:3: testlib.h: No such file",
        "Error: Checker compilation failed",
        "Error: interactor compile error",
    ],
)
def test_judge_program_compile_failure_is_infrastructure_not_a_candidate_failure(
    message: str,
) -> None:
    broken = Reply(200, {"status": "error", "error": message})
    with (
        FakeJudge([SUBMITTED], [broken]) as judge,
        pytest.raises(JudgeUnavailableError, match="judge-side exception"),
    ):
        scorer_for(judge.url)(PROGRAM)
    assert judge.count("submit") == 3


def test_some_failed_cases_still_count_as_zero_in_a_valid_score() -> None:
    cases = [*GENUINE, failed_run_case("", status="Time Limit Exceeded")]
    with FakeJudge([SUBMITTED], [done(cases)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.valid
    expected = 100 * sum(c["scoreRatio"] for c in GENUINE) / 4
    assert verdict.reward == pytest.approx(expected)
    assert "1 cases scored 0" in verdict.artifacts["case_detail"]


def test_empty_program_is_invalid_without_contacting_the_judge() -> None:
    verdict = scorer_for(closed_port_url())("  \n")
    assert verdict.status == "invalid" and "empty program" in verdict.message


def test_judge_down_at_submit_raises_after_bounded_retries() -> None:
    started = time.monotonic()
    with pytest.raises(JudgeUnavailableError) as caught:
        scorer_for(closed_port_url(), retry_backoff_s=0.05)(PROGRAM)
    assert caught.value.attempts == 3
    assert "ConnectError" in str(caught.value)
    assert time.monotonic() - started >= 0.05 + 0.1  # backoff 0.05 then 0.1


def test_submit_5xx_is_retried_then_raises() -> None:
    with (
        FakeJudge([Reply(503, {"error": "overloaded"})], [QUEUED]) as judge,
        pytest.raises(JudgeUnavailableError, match="503"),
    ):
        scorer_for(judge.url)(PROGRAM)
    assert judge.count("submit") == 3
    assert judge.count("result") == 0


def test_transient_5xx_then_recovery_gives_the_verdict() -> None:
    with FakeJudge([Reply(502, "bad gateway"), SUBMITTED], [done(GENUINE)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.valid and judge.count("submit") == 2


def test_non_json_submit_body_is_an_infrastructure_fault() -> None:
    with (
        FakeJudge([Reply(200, b"<html>proxy error</html>")], [QUEUED]) as judge,
        pytest.raises(JudgeUnavailableError, match="without a sid"),
    ):
        scorer_for(judge.url)(PROGRAM)
    assert judge.count("submit") == 3


def test_judge_side_exception_is_retried_then_raises() -> None:
    crash = Reply(200, {"status": "error", "error": "Error: connect ECONNREFUSED 127.0.0.1:5050"})
    with (
        FakeJudge([SUBMITTED], [crash]) as judge,
        pytest.raises(JudgeUnavailableError, match="judge-side exception"),
    ):
        scorer_for(judge.url)(PROGRAM)
    assert judge.count("submit") == 3


def test_unknown_problem_id_is_refused_once_without_retry() -> None:
    with (
        FakeJudge([Reply(400, {"error": "unknown pid"})], [QUEUED]) as judge,
        pytest.raises(JudgeUnavailableError, match="judge_problem_id") as caught,
    ):
        scorer_for(judge.url)(PROGRAM)
    assert caught.value.attempts == 1 and judge.count("submit") == 1


def test_404_and_5xx_before_the_final_answer_mean_not_yet() -> None:
    script = [NOT_FOUND, Reply(500, "oops"), NOT_FOUND, QUEUED, done(GENUINE)]
    with FakeJudge([SUBMITTED], script) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.valid and judge.count("result") == 5


def test_read_once_result_keeps_the_first_final_answer() -> None:
    # The judge forgets a final answer once read: every later poll would be 404.
    with FakeJudge([SUBMITTED], [QUEUED, done(GENUINE), NOT_FOUND]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
        time.sleep(0.1)
    assert verdict.valid
    assert judge.count("result") == 2  # no poll after the final answer


def test_unreadable_final_answer_then_404_is_a_lost_result_not_a_wait() -> None:
    lost = [Reply(200, b'{"status": "done", "sco'), NOT_FOUND]
    started = time.monotonic()
    with (
        FakeJudge([SUBMITTED], lost) as judge,
        pytest.raises(JudgeUnavailableError, match="lost the result"),
    ):
        scorer_for(judge.url, deadline_s=30.0, attempts=1)(PROGRAM)
    assert time.monotonic() - started < 5.0  # did not sit out the 30 s deadline


def test_non_json_poll_body_then_final_answer_is_read() -> None:
    with FakeJudge([SUBMITTED], [Reply(200, b"not json"), done(GENUINE)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert verdict.valid


def test_judge_hanging_past_the_deadline_raises() -> None:
    hang = Reply(200, {"status": "queued"}, delay_s=30.0)
    started = time.monotonic()
    with (
        FakeJudge([SUBMITTED], [hang]) as judge,
        pytest.raises(JudgeUnavailableError, match="no final answer"),
    ):
        scorer_for(judge.url, deadline_s=0.4, attempts=2)(PROGRAM)
    assert time.monotonic() - started < 3.0
    assert judge.count("submit") == 2


def test_evaluation_still_queued_at_the_deadline_is_invalid_timeout() -> None:
    with FakeJudge([SUBMITTED], [QUEUED]) as judge:
        verdict = scorer_for(judge.url, deadline_s=0.3)(PROGRAM)
    assert verdict.status == "invalid" and verdict.reward == 0.0
    assert verdict.message == "evaluation timed out after 0.3s"
    assert judge.count("submit") == 1


def test_queued_judge_whose_last_poll_is_cut_by_the_deadline_is_still_a_timeout() -> None:
    slow = Reply(200, {"status": "queued"}, delay_s=30.0)
    with FakeJudge([SUBMITTED], [QUEUED, QUEUED, slow]) as judge:
        verdict = scorer_for(judge.url, deadline_s=0.5)(PROGRAM)
    assert verdict.message == "evaluation timed out after 0.5s"


def test_done_answer_without_cases_is_an_infrastructure_fault() -> None:
    broken = Reply(200, {"status": "done", "score": 50.0, "cases": []})
    with (
        FakeJudge([SUBMITTED], [broken]) as judge,
        pytest.raises(JudgeUnavailableError, match="malformed final answer"),
    ):
        scorer_for(judge.url)(PROGRAM)


def test_settings_refuse_bad_values_and_name_them() -> None:
    with pytest.raises(ValueError, match="must be an http:// or https:// URL"):
        JudgeSettings("127.0.0.1:8081", "0")
    with pytest.raises(ValueError, match="problem id is empty"):
        JudgeSettings("http://127.0.0.1:8081", " ")
    with pytest.raises(ValueError, match="deadline_s"):
        JudgeSettings("http://127.0.0.1:8081", "0", deadline_s=0)


def test_case_check_loader_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"score_check\.py"):
        load_case_check(tmp_path / "score_check.py")
    (tmp_path / "score_check.py").write_text("def something_else(case):\n    return None\n")
    with pytest.raises(TypeError, match="must define check_case"):
        load_case_check(tmp_path / "score_check.py")


def test_task_without_a_case_check_gets_only_the_generic_hardening(tmp_path: Path) -> None:
    task = write_task(tmp_path)
    (task / "tests" / "score_check.py").unlink()
    scorer = FrontierCSScorer.for_task(task, "http://127.0.0.1:1", "0")
    assert scorer.case_check is None
    assert scorer.settings.lang == "cpp"  # the contract's language, as the judge names it
    assert FrontierCSScorer.for_task(TASK_DIR, "http://127.0.0.1:1", "0").case_check is not None


# --- concurrent submits to the FrontierCS judge -------------------------------------------------


def cells_program(cells: int) -> str:
    return f"// cells {cells}\nint main() {{ return 0; }}\n"


def test_the_racy_judge_gives_overlapping_submits_the_same_sid() -> None:
    # The fake reproduces the race: four submits at once, fewer than four distinct sids.
    start = threading.Barrier(4)

    def submit(cells: int) -> int:
        start.wait()
        response = httpx.post(
            f"{judge.url}/submit",
            data={"pid": "0", "lang": "cpp"},
            files={"code": ("solution.cpp", cells_program(cells).encode(), "text/x-c++src")},
            timeout=10,
        )
        return response.json()["sid"]

    with RacySidJudge() as judge, ThreadPoolExecutor(4) as pool:
        sids = list(pool.map(submit, [10, 20, 30, 40]))
    assert len(set(sids)) < 4


def test_concurrent_scoring_submits_one_at_a_time_so_each_candidate_gets_its_own_result() -> None:
    cells = [5 * k for k in range(1, 13)]  # 12 candidates, each with its own score
    with RacySidJudge() as judge:
        scorers = [scorer_for(judge.url, deadline_s=30.0), scorer_for(judge.url, deadline_s=30.0)]
        with ThreadPoolExecutor(4) as pool:
            verdicts = list(
                pool.map(lambda i: scorers[i % 2](cells_program(cells[i])), range(len(cells)))
            )
        for scorer in scorers:
            scorer.close()
    assert [v.raw_score for v in verdicts] == pytest.approx([float(c) for c in cells])
    assert len({v.artifacts["submission_id"] for v in verdicts}) == 12
    assert judge.max_in_submit == 1, "submits to one judge URL must not overlap"
    assert judge.polls_during_submit > 0, "polling must go on while another candidate submits"
