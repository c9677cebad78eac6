"""The recipe's side of the TriMul task against the GPU judge: serve.yaml selects the task, the
recipe's geometric-mean verdict reads the record the judge builds, and `task check` refuses in
one line where the judge has no GPU and passes where it has one.

The judge's own GPU tests are in judges/tests (test_gpu_judge_units.py, test_gpu_judge_stand_in.py,
test_gpu_judge_device.py); this module uses their small TriMul records and GPU check
(judges/tests/gpu_records.py, judges/tests/gpu_judge_support.py).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.judge.verdict import Scoring, judge_verdict
from harness.cli import task as task_command
from harness.contract import load_task
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings
from harness.settings.task_dirs import bundled_task_dir
from judges.gpu.record import build_record
from judges.service.process import JudgeProcess
from judges.tests.gpu_judge_support import TASK, gpu_missing
from judges.tests.gpu_records import CASES, SUITE, events, failing_events, score_check

GEOMEAN = Scoring("min", "geomean")


def test_serve_yaml_selects_trimul_with_its_one_task_setting(tmp_path: Path) -> None:
    document = yaml.safe_load(DEFAULT_SERVE_YAML.read_text())
    document["training"]["config"]["task"] = "trimul"
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document))
    settings = RunSettings.load(path, environ={}, base_dir=tmp_path)
    assert settings.task == "trimul" and settings.state_dir.name == "trimul"
    task_dir = bundled_task_dir(settings.task)
    assert task_dir.resolve() == TASK.resolve()
    contract, instruction = load_task(task_dir)
    assert contract.verifier == "geomean" and "custom_kernel" in instruction
    scorer = FrontierCSScorer.for_task(task_dir, "http://127.0.0.1:1")
    assert (scorer.settings.problem_id, scorer.settings.lang) == ("trimul", "python")
    assert scorer.scoring == GEOMEAN
    scorer.close()


def test_a_passing_record_is_valid_with_the_geometric_mean_as_its_raw_score() -> None:
    record = build_record(CASES, events(), SUITE)
    verdict = judge_verdict(record, score_check.check_case, {}, GEOMEAN)
    assert verdict.valid and verdict.raw_score == record["value"]
    assert verdict.reward == pytest.approx(1 / record["value"])


def test_a_failed_trial_has_no_certified_value() -> None:
    record = build_record(CASES, failing_events(), SUITE)
    verdict = judge_verdict(record, score_check.check_case, {}, GEOMEAN)
    assert not verdict.valid and "no certified value" in verdict.message


def test_a_value_that_disagrees_with_the_cases_is_refused() -> None:
    record = build_record(CASES, events(), SUITE)
    verdict = judge_verdict({**record, "value": 1.0}, score_check.check_case, {}, GEOMEAN)
    assert not verdict.valid and "disagrees" in verdict.message


@pytest.mark.slow
@pytest.mark.skipif(gpu_missing() is None, reason="this host has a GPU the judge can use")
def test_without_a_gpu_task_check_refuses_in_one_line(tmp_path: Path) -> None:
    with JudgeProcess(tmp_path / "state", "--task", str(TASK)) as judge:
        (problem,) = httpx.get(f"{judge.url}/problems").json()["problems"]
        lines: list[str] = []
        status = task_command.main(["check", str(TASK), "--judge-url", judge.url], lines.append)
    assert problem["device"]["available"] is False
    failed = [line for line in lines if line.startswith("FAIL")]
    assert status == 1 and len(failed) == 1, lines
    assert failed[0].startswith("FAIL judge: problem trimul needs a GPU and the judge at")


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(gpu_missing() is not None, reason=str(gpu_missing()))
def test_task_check_passes_on_a_gpu_host(tmp_path: Path) -> None:
    """`guidance-ttt task check harbor/trimul`: every file, and the seed re-judged within the
    task's relative tolerance (task.toml `score_rel_tolerance`)."""
    with JudgeProcess(tmp_path / "state", "--task", str(TASK), "--gpus", "0") as process:
        lines: list[str] = []
        status = task_command.main(["check", str(TASK), "--judge-url", process.url], lines.append)
    assert status == 0, lines
    assert lines[-1].startswith("ok   judge: seed reproduced"), lines
