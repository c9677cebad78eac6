"""Behaviours the reference example's own tests assert, as this project's behaviour (each either
holds here or is a row of docs/differences.md, which these tests then pin)."""

from __future__ import annotations

import runpy
import tomllib
from pathlib import Path

import pytest

from harness.run.controller import ControllerSettings

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "harbor" / "polyomino_packing"


@pytest.mark.parametrize("deadline", [0.0, -1.0])
def test_a_training_timeout_that_cannot_be_met_is_refused(tmp_path: Path, deadline: float):
    with pytest.raises(ValueError, match="training timeout"):
        ControllerSettings(tmp_path, "scenario", 1, deadline_s=deadline)
    with pytest.raises(ValueError, match="poll interval"):
        ControllerSettings(tmp_path, "scenario", 1, poll_interval_s=-1.0)


def test_run_py_run_through_runpy_without_main_starts_nothing() -> None:
    """Listed difference: the reference's run.py runs its episode at import; ours only under
    `__main__`, so importing it (tests, tools) never starts a run."""
    module = runpy.run_path(str(REPO / "run.py"), run_name="not_main")
    assert callable(module["main"]) and callable(module["run_episode"])


def test_task_toml_carries_the_references_registry_fields() -> None:
    raw = tomllib.loads((TASK / "task.toml").read_text())
    assert raw["task"]["name"] == "reef-eval/guidance-ttt-polyomino-packing"
    assert raw["artifacts"] == []
    assert raw["environment"]["storage_mb"] == 4096
    metadata = raw["metadata"]
    assert (metadata["category"], metadata["difficulty"]) == ("autoresearch", "hard")
    assert metadata["tags"] == ["reef", "guidance-ttt", "tttd", "frontiercs", "discovery"]


@pytest.mark.parametrize(
    "response",
    [{}, {"choices": []}, {"choices": [{"message": {"content": None}}]}, {"choices": ["x"]}],
    ids=["no-choices", "empty-choices", "null-content", "choice-not-object"],
)
def test_a_guidance_answer_without_string_content_is_a_format_error(response) -> None:
    """Listed difference: the reference's `openai_action` raises and ends the step; here the
    answer reads as empty, which the strict parser rejects (reward 0, reported, never executed)."""
    from harness.answers import GUIDANCE_NOT_ONE_BLOCK, GuidanceFormatError, parse_guidance
    from harness.run.rollout import _content

    assert _content(response) == ""
    with pytest.raises(GuidanceFormatError, match=GUIDANCE_NOT_ONE_BLOCK):
        parse_guidance(_content(response))


def test_run_py_describe_names_an_unknown_task_text_in_one_line() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "GUIDANCE_TTT_TASK_TEXT": "nope"}
    done = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--describe"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "task_text 'nope' is not a text of this task; choose one of reference, full" in line
    env["GUIDANCE_TTT_TASK_TEXT"] = "full"
    described = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--describe"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "TASK_TEXT=full" in described.stdout.splitlines()
