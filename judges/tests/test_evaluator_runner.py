"""`judges/problems/evaluator_runner.py`, the script the judge runs in its sandbox for an
`evaluator` problem, run here as a plain process: OpenEvolve's cascade (stages in order, stopping
after the first whose metrics fail the next threshold, a later stage's failure keeping the earlier
metrics), OpenEvolve's `EvaluationResult` without OpenEvolve, and the verdict lines. The sandboxed
runs (limits, a hanging or flooding evaluation) are in tests/harness/test_task_from_evaluator.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judges.problems.evaluator import RUNNER

CASCADE = """
from openevolve.evaluation_result import EvaluationResult

def evaluate(program_path):
    return {"combined_score": -1.0}

def evaluate_stage1(program_path):
    return EvaluationResult(metrics={"combined_score": SCORE1, "stage": 1.0}, artifacts={})

def evaluate_stage2(program_path):
    if SCORE2 is None:
        raise RuntimeError("stage two broke")
    return {"combined_score": SCORE2, "stage": 2.0, "error": "dropped, as OpenEvolve drops it"}

def evaluate_stage3(program_path):
    return {"combined_score": 0.99, "stage": 3.0}
"""


def run(tmp_path: Path, evaluator: str, settings: dict) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    (tmp_path / "evaluator.py").write_text(evaluator)
    (tmp_path / "program.py").write_text("print('a program')\n")
    done = subprocess.run(
        [sys.executable, str(RUNNER), "settings.json", "evaluator.py", "program.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    first, _, rest = done.stdout.partition("\n")
    metrics = json.loads(rest.removeprefix("metrics: ")) if rest.startswith("metrics: ") else {}
    return done.returncode, first, metrics


@pytest.mark.parametrize(
    ("scores", "thresholds", "value", "stage"),
    [
        ((0.3, 0.9), [0.5, 0.95], 0.3, 1.0),  # stage 1 below 0.5: stops there
        ((0.6, 0.9), [0.5, 0.95], 0.9, 2.0),  # stage 2 below 0.95: no stage 3
        ((0.6, 0.97), [0.5, 0.95], 0.99, 3.0),  # every stage passes
        ((0.6, 0.97), [0.5], 0.97, 2.0),  # one threshold: two stages at most
    ],
)
def test_the_cascade_stops_after_the_first_stage_below_its_threshold(
    tmp_path: Path, scores: tuple[float, float], thresholds: list[float], value: float, stage: float
) -> None:
    source = CASCADE.replace("SCORE1", repr(scores[0])).replace("SCORE2", repr(scores[1]))
    code, line, metrics = run(tmp_path, source, {"metric": "combined_score", "cascade": thresholds})
    assert (code, line) == (0, f"ok Value: {value!r}")
    assert metrics["stage"] == stage and "error" not in metrics


def test_a_later_stage_that_raises_keeps_the_earlier_metrics(tmp_path: Path) -> None:
    source = CASCADE.replace("SCORE1", "0.6").replace("SCORE2", "None")
    code, line, metrics = run(tmp_path, source, {"metric": "combined_score", "cascade": [0.5]})
    assert (code, line) == (0, "ok Value: 0.6")
    assert metrics["stage2_passed"] == 0.0 and "stage two broke" in metrics["stage2_error"]


def test_without_a_cascade_evaluate_alone_is_called(tmp_path: Path) -> None:
    source = CASCADE.replace("SCORE1", "0.6").replace("SCORE2", "0.7")
    assert run(tmp_path, source, {"metric": "combined_score", "cascade": None})[:2] == (
        0,
        "ok Value: -1.0",
    )


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        ("return {'score': 1.0}", "wrong answer metric 'combined_score' is missing"),
        ("return {'combined_score': float('inf')}", "wrong answer metric 'combined_score' is inf"),
        ("return {'combined_score': 'high'}", "wrong answer metric 'combined_score' is 'high'"),
        ("return [1.0]", "fail evaluate returned list, not a dict of metrics"),
        ("raise SystemExit(0)", "fail evaluate raised SystemExit"),
    ],
)
def test_what_is_not_a_finite_metric_fails_naming_why(
    tmp_path: Path, body: str, verdict: str
) -> None:
    source = f"def evaluate(program_path):\n    {body}\n"
    code, line, _ = run(tmp_path, source, {"metric": "combined_score", "cascade": None})
    assert code == 1 and line.startswith(verdict), line
