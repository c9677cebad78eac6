"""The CPU rehearsal runs one step on each of the three shipped tasks with the same harness code.

Per task: the real `reef serve` (record-only), the real local judge serving that task's problem
(a generated Polyomino suite; FrontierCS problem 1 from `../shared/data/frontiercs`, skipped when
absent; the Erdős task's own package), the real run loop. The stand-in executor answers with the
task's own seed program (annotated, in the task's language), so every rollout is judged for real:
C++ and Python candidates, a FrontierCS checker and a Python verifier, directions max and min.
Nothing in the harness is told which task it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from judge_fakes import LocalJudge

from harness import results
from harness.contract import load_contract
from harness.storage.run_files import load_seed
from tests.openai_fixture import OpenAIFixture, RecordedRequest, Reply
from tests.reef_fixtures import running_reef
from tests.rehearsal_support import (
    GuidanceScript,
    ReefReports,
    journal,
    run_cpu_steps,
    write_serve_yaml,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "frontiercs"
G, R = 1, 2


def judge_flags(name: str, root: Path) -> list[str]:
    if name == "polyomino_packing":
        return ["--generated-cases", "2", "--seed", "5"]
    if name == "treasure_packing":
        if not (SHARED / "problems" / "1").is_dir():
            pytest.skip("FrontierCS test data ../shared/data/frontiercs is absent")
        problems = root / "problems"
        problems.mkdir()
        (problems / "1").symlink_to(SHARED / "problems" / "1")
        return ["--problems", str(problems), "--testlib", str(SHARED / "include")]
    return ["--task", str(REPO / "harbor" / name)]


def seed_executor(task: Path) -> Callable[[RecordedRequest], Reply]:
    contract = load_contract(task)
    extension = "cpp" if contract.fence_tag == "cpp" else "py"
    program = (task / "solution" / f"solution.{extension}").read_text()
    comment = "//" if contract.fence_tag == "cpp" else "#"

    def reply(request: RecordedRequest) -> Reply:
        annotated = f"{comment} variant: the parent, annotated\n{program}"
        summary = "The candidate is the parent unchanged, with one explanatory comment added."
        return Reply(
            content=f"<solution>\n```{contract.fence_tag}\n{annotated}\n```\n</solution>\n\n"
            f"<summary>\n{summary}\n</summary>",
            usage={"prompt_tokens": 900, "completion_tokens": 700, "total_tokens": 1600},
        )

    return reply


@pytest.mark.parametrize("name", ["polyomino_packing", "treasure_packing", "erdos_min_overlap"])
def test_one_step_runs_on_the_task_with_the_same_harness(name: str, tmp_path: Path) -> None:
    task = REPO / "harbor" / name
    contract = load_contract(task)
    flags = judge_flags(name, tmp_path)
    with (
        LocalJudge(tmp_path / "judge", *flags) as judge,
        OpenAIFixture(GuidanceScript()) as guidance,
        OpenAIFixture(seed_executor(task)) as executor,
        running_reef(
            tmp_path / "reef",
            upstream=guidance,
            recipe_config={"groups-per-step": G, "rollouts-per-group": R},
        ) as reef,
    ):
        settings = write_serve_yaml(
            tmp_path / "serve.yaml",
            state_dir=tmp_path / "state",
            reef_port=reef.port,
            judge_url=judge.url,
            groups=G,
            rollouts=R,
            steps=1,
            task=name,
        )
        result = run_cpu_steps(settings, executor.v1_url, task)
        reports = ReefReports(reef.url, settings.scenario).reports()
    assert result.next_step == 1
    rollouts = [line.entry for line in journal(settings.state_dir)]
    assert len(rollouts) == G * R
    seed = load_seed(task)
    for entry in rollouts:
        assert entry["verifier_status"] == "valid", entry["verifier_message"]
        raw, reward = entry["verifier_raw_score"], entry["verifier_reward"]
        if contract.score_direction == "min":
            assert reward == pytest.approx(1 / raw)  # training sees 1 / bound
        else:
            assert reward == raw
        if name != "polyomino_packing":  # the seed's own suite: the same score again
            assert raw == pytest.approx(seed.verifier_raw_score, abs=1e-6)
    assert sorted(r.score for r in reports) == sorted(e["verifier_reward"] for e in rollouts)
    prompts = [e["metadata"]["guidance_prompt"]["user"] for e in rollouts]
    assert all(contract.objective in prompt for prompt in prompts)  # the task's own words
    assert result.best is not None and result.best.verifier_raw_score is not None
    # The records show the raw score with its direction: the bound itself for a min task.
    view = results.load_run(settings.state_dir)
    assert view.direction == contract.score_direction
    problem = results.seed_entry(view.archive).problem_id
    rows = results.trajectory(view.archive, problem, view.committed_step)
    # The run's seed score is measured on the judge's suite (re-scored when the record's differs).
    start = results.seed_entry(view.archive).verifier_raw_score
    raws = [float(e["verifier_raw_score"]) for e in rollouts] + [start]
    best = min(raws) if contract.score_direction == "min" else max(raws)
    assert rows[-1].cumulative_best == pytest.approx(best)
