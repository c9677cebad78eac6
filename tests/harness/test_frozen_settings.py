"""serve-frozen.yaml: the harness reads it as a frozen run, refuses its mistakes by key, and Reef
accepts the same file (`reef serve --print-config`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.settings.run_settings import RunSettings, RunSettingsError
from tests.reef_fixtures import free_port, running_reef

REPO = Path(__file__).resolve().parents[2]
FROZEN = REPO / "serve-frozen.yaml"
ENV = {"GUIDANCE_TTT_GUIDANCE_URL": "http://127.0.0.1:8000", "GUIDANCE_TTT_GUIDANCE_MODEL": "m"}


def variant(tmp_path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    document = yaml.safe_load(FROZEN.read_text())
    change(document)
    path = tmp_path / "serve-frozen.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def print_config(path: Path) -> subprocess.CompletedProcess[str]:
    """`reef serve -c <path> --print-config` with the guidance endpoint set, as run.sh would."""
    reef = Path(sys.executable).parent / "reef"
    return subprocess.run(
        [str(reef), "serve", "-c", str(path), "--print-config"],
        cwd=REPO,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_repository_file_is_a_frozen_run_without_training_settings() -> None:
    settings = RunSettings.load(FROZEN, environ=ENV, base_dir=REPO)
    assert settings.frozen and settings.mode == "frozen"
    assert settings.model == "m" and settings.guidance_upstream_url == "http://127.0.0.1:8000"
    assert (settings.groups_per_step, settings.rollouts_per_group) == (2, 4)
    assert settings.model_path is None and settings.megatron_checkpoint_dir is None
    identity = settings.identity()
    assert identity["mode"] == "frozen" and identity["lora_rank"] == 0
    assert settings.state_dir == REPO / "work" / "polyomino_packing-frozen"
    assert settings.executor_backend == "gpt_oss_120b"  # the ${VAR:-default} form works here


@pytest.mark.parametrize("name", ["serve.yaml", "serve-frozen.yaml"])
def test_every_settings_file_judges_the_task_s_own_problem_by_default(name: str) -> None:
    """No settings file names a problem id of its own: empty is the task's (its contract.json),
    so a run on a new task judges that task, not Polyomino (problem 0)."""
    settings = RunSettings.load(REPO / name, environ=ENV, base_dir=REPO)
    assert settings.judge_problem_id == ""
    override = RunSettings.load(
        REPO / name, environ={**ENV, "FRONTIERCS_PROBLEM_ID": "7"}, base_dir=REPO
    )
    assert override.judge_problem_id == "7"


def test_the_guidance_endpoint_must_come_from_the_environment() -> None:
    with pytest.raises(RunSettingsError, match="GUIDANCE_TTT_GUIDANCE_URL"):
        RunSettings.load(FROZEN, environ={"GUIDANCE_TTT_GUIDANCE_MODEL": "m"}, base_dir=REPO)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["inference"].update({"upstream-url": "http://h:1/v1"}), "upstream-url"),
        (lambda d: d["recipe"].update(implementation="tttd.recipe:TTTDRecipe"), "implementation"),
        (lambda d: d.update(training={"config": {}}), "training"),
        (lambda d: d["recipe"]["config"]["guidance-ttt"].update(mode="trained"), "mode"),
        (lambda d: d["recipe"]["config"]["guidance-ttt"].update(steps=0), "steps"),
        (lambda d: d["recipe"]["config"]["guidance-ttt"].update(lora_rank=8), "lora_rank"),
    ],
)
def test_each_mistake_is_refused_naming_the_key(tmp_path: Path, change, named: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RunSettingsError, match=named):
        RunSettings.load(variant(tmp_path, change), environ=ENV, base_dir=tmp_path)


@pytest.mark.slow
def test_reef_accepts_the_same_file() -> None:
    done = print_config(FROZEN)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "recipe.implementation = tttd.recipe:TTTDReportsRecipe" in done.stdout
    assert "inference.upstream-url = http://127.0.0.1:8000" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_reef_refuses_a_broken_frozen_file_at_start_with_the_harness_words(
    tmp_path: Path,
) -> None:
    def zero_steps(document: dict) -> None:
        run = document["recipe"]["config"]["guidance-ttt"]
        run.update(steps=0, state_dir=str(tmp_path / "state"))
        document["reef"]["port"] = port

    port = free_port()
    path = variant(tmp_path, zero_steps)
    words = "recipe.config.guidance-ttt.steps: must be ≥ 1, got 0"
    with pytest.raises(RunSettingsError, match=re.escape(words)):
        RunSettings.load(path, environ=ENV, base_dir=tmp_path)
    with (
        pytest.raises(RuntimeError) as refused,
        running_reef(tmp_path / "reef", config=path, port=port, env=ENV),
    ):
        pass
    assert words in refused.value.args[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda d: d["recipe"]["config"]["guidance-ttt"].update(steps=-3),
            "recipe.config.guidance-ttt.steps: must be ≥ 1, got -3",
        ),
        (
            lambda d: d["recipe"]["config"]["guidance-ttt"]["harness"].update(judge_url="ftp://x"),
            "recipe.config.guidance-ttt.harness.judge_url: must be an http:// or https:// URL",
        ),
        (
            lambda d: d["recipe"]["config"].update({"rollouts-per-group": 1}),
            "recipe.config.rollouts-per-group: must be ≥ 2, got 1",
        ),
    ],
)
def test_print_config_refuses_a_broken_frozen_file_in_the_harness_words(
    tmp_path: Path,
    change,
    words: str,  # type: ignore[no-untyped-def]
) -> None:
    path = variant(tmp_path, change)
    with pytest.raises(RunSettingsError, match=re.escape(words)):
        RunSettings.load(path, environ=ENV, base_dir=tmp_path)
    done = print_config(path)
    assert done.returncode == 2, done.stdout[-2000:]
    assert words in done.stderr + done.stdout
    assert "recipe.implementation" not in done.stdout  # refused before any setting is shown
