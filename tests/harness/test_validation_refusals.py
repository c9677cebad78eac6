"""What the real start would refuse is refused before anything starts, naming key and value.

Settings: each broken ``serve.yaml`` goes through the three real commands that validate it,
``run.py --describe`` (what ``run.sh`` runs first), ``reef serve -c <file> --print-config``
(reef-infra 0.1.3's own CLI with this repository's recipe package) and ``guidance-ttt doctor
--config <file>``, as subprocesses; each must exit 2 with the same line and create nothing.

Tasks: each broken task directory goes through the preflight (its entry function, and the real
``guidance-ttt doctor`` command) against the real local judge, which must stay unasked; the
run's own start (``load_task``) refuses it with the same words.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.adapters.executor.backends import backend_from_name
from harness.contract import SOLUTION_LANGUAGES, ContractError, load_task
from harness.preflight.doctor import run_preflight
from harness.preflight.task import seed_scorer
from tests.judge_fakes import LocalJudge, closed_port_url
from tests.task_builders import GOOD_CONTRACT, GOOD_TASK_TOML, write_task

REPO = Path(__file__).resolve().parents[2]
SERVE = yaml.safe_load((REPO / "serve.yaml").read_text())
BIN = Path(sys.executable).parent
#: Settings the harness reads from the environment; the cases below must not depend on them.
HARNESS_VARIABLES = ("FRONTIERCS_JUDGE_URL", "FRONTIERCS_PROBLEM_ID", "GUIDANCE_TTT_EXECUTOR")


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node[part]
        node[last] = value

    return edit


def _rename(path: str, new_name: str) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node[part]
        node[new_name] = node.pop(last)

    return edit


#: (serve.yaml edit, the line both commands must print)
SETTINGS_CASES = {
    "groups-per-step 0": (
        _set("recipe.config.groups-per-step", 0),
        "recipe.config.groups-per-step: must be ≥ 1, got 0",
    ),
    "groups-per-step negative": (
        _set("recipe.config.groups-per-step", -2),
        "recipe.config.groups-per-step: must be ≥ 1, got -2",
    ),
    "rollouts-per-group 1": (
        _set("recipe.config.rollouts-per-group", 1),
        "recipe.config.rollouts-per-group: must be ≥ 2, got 1",
    ),
    "rollouts-per-group 0": (
        _set("recipe.config.rollouts-per-group", 0),
        "recipe.config.rollouts-per-group: must be ≥ 2, got 0",
    ),
    "lora rank 0": (
        _set("training.config.lora_rank", 0),
        "training.config.lora_rank: must be ≥ 1, got 0",
    ),
    "lora rank negative": (
        _set("training.config.lora_rank", -32),
        "training.config.lora_rank: must be ≥ 1, got -32",
    ),
    "negative max_response_len": (
        _set("training.config.max_response_len", -1),
        "training.config.max_response_len: must be ≥ 1, got -1",
    ),
    "negative context_length": (
        _set("training.config.context_length", -12288),
        "training.config.context_length: must be ≥ 1, got -12288",
    ),
    "max_response_len above the context": (
        _set("training.config.max_response_len", 16384),
        "training.config.max_response_len: must be less than context_length (12288): the prompt "
        "needs room in the context too, got 16384",
    ),
    "port 0": (_set("reef.port", 0), "reef.port: must be ≥ 1, got 0"),
    "port above 65535": (_set("reef.port", 65536), "reef.port: must be ≤ 65535, got 65536"),
    "checkpoint every 0 versions": (
        _set("recipe.config.checkpoint-every-n-versions", 0),
        "recipe.config.checkpoint-every-n-versions: must be ≥ 1, got 0",
    ),
    "judge url ftp": (
        _set("training.config.harness.judge_url", "ftp://127.0.0.1:8081"),
        "training.config.harness.judge_url: must be an http:// or https:// URL with a host "
        "(e.g. http://127.0.0.1:8081), got 'ftp://127.0.0.1:8081'",
    ),
    "judge url without scheme": (
        _set("training.config.harness.judge_url", "127.0.0.1:8081"),
        "training.config.harness.judge_url: must be an http:// or https:// URL with a host "
        "(e.g. http://127.0.0.1:8081), got '127.0.0.1:8081'",
    ),
    "misspelt training.config key": (
        _rename("training.config.lora_rank", "lora_rnak"),
        "training.config.lora_rnak: unknown key (value 32); did you mean 'lora_rank'?",
    ),
    "misspelt harness key": (
        _rename("training.config.harness.judge_url", "judge_ulr"),
        "training.config.harness.judge_ulr: unknown key (value 'http://127.0.0.1:8081'); "
        "did you mean 'judge_url'?",
    ),
}


def _broken_serve_yaml(tmp_path: Path, edit: Callable[[dict], None]) -> Path:
    document = copy.deepcopy(SERVE)
    edit(document)
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    return path


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SETTINGS_CASES))
def test_describe_print_config_and_doctor_refuse_the_same_setting_with_key_and_value(
    tmp_path: Path, case: str
) -> None:
    edit, line = SETTINGS_CASES[case]
    config = _broken_serve_yaml(tmp_path, edit)

    describe = _run(
        [sys.executable, str(REPO / "run.py"), "--describe", "--serve-yaml", str(config)], tmp_path
    )
    reef = _run([str(BIN / "reef"), "serve", "-c", str(config), "--print-config"], tmp_path)
    doctor = _run([str(BIN / "guidance-ttt"), "doctor", "--config", str(config)], tmp_path)

    assert describe.returncode == 2, describe.stdout + describe.stderr
    assert line in describe.stderr
    assert "STATE_DIR=" not in describe.stdout
    assert reef.returncode == 2, reef.stdout + reef.stderr
    assert line in reef.stderr
    assert "resolved settings" not in reef.stdout
    assert doctor.returncode == 2, doctor.stdout + doctor.stderr
    assert line in doctor.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["serve.yaml"]


# ------------------------------------------------------------------------------------ tasks


def _without(key: str) -> dict[str, Any]:
    return {name: value for name, value in GOOD_CONTRACT.items() if name != key}


#: (how to break a valid task directory, the words naming the key and the value)
TASK_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "contract lacks a key": (
        lambda task: (task / "contract.json").write_text(json.dumps(_without("objective"))),
        "contract.json: objective: is required but not set",
    ),
    "contract has an unknown key": (
        lambda task: (task / "contract.json").write_text(
            json.dumps(GOOD_CONTRACT | {"time_limit": "2s"})
        ),
        "contract.json: time_limit: unknown key (value '2s')",
    ),
    "wrong score_direction": (
        lambda task: (task / "contract.json").write_text(
            json.dumps(GOOD_CONTRACT | {"score_direction": "maximize"})
        ),
        "contract.json: score_direction: must be one of 'max', 'min', got 'maximize'",
    ),
    "non-string problem id": (
        lambda task: (task / "contract.json").write_text(
            json.dumps(GOOD_CONTRACT | {"judge_problem_id": 0})
        ),
        "contract.json: judge_problem_id: must be a string, got 0",
    ),
    "a language the judge cannot compile": (
        lambda task: (task / "contract.json").write_text(
            json.dumps(GOOD_CONTRACT | {"solution_language": "rust"})
        ),
        "contract.json: solution_language: must be a language the judge compiles, one of "
        + ", ".join(SOLUTION_LANGUAGES)
        + ", got 'rust'",
    ),
    "broken task.toml": (
        lambda task: (task / "task.toml").write_text(GOOD_TASK_TOML + "[agent\ntimeout_sec = ]\n"),
        "task.toml is not valid TOML",
    ),
    "missing task.toml": (lambda task: (task / "task.toml").unlink(), "task.toml is missing"),
    "task.toml with a non-positive timeout": (
        lambda task: (task / "task.toml").write_text(
            GOOD_TASK_TOML.replace("timeout_sec = 60.0", "timeout_sec = 0")
        ),
        "task.toml: verifier.timeout_sec: must be > 0, got 0",
    ),
    "task.toml names another problem": (
        lambda task: (task / "task.toml").write_text(
            GOOD_TASK_TOML.replace('judge_problem_id = "0"', 'judge_problem_id = "5"')
        ),
        "task.toml: metadata.judge_problem_id: '5' differs from contract.json judge_problem_id '0'",
    ),
    "missing instruction.md": (
        lambda task: (task / "instruction.md").unlink(),
        "instruction.md is missing",
    ),
}


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalJudge]:
    """The project's real judge service, healthy; a refused task must never reach it."""
    state = tmp_path_factory.mktemp("judge")
    with LocalJudge(state, "--generated-cases", "1", "--accept-per-process-limits") as service:
        yield service


def _submissions(judge: LocalJudge) -> list[Path]:
    state = Path(judge.command[judge.command.index("--state-dir") + 1])
    return list((state / "submissions").rglob("meta.json"))


def _broken_task(tmp_path: Path, case: str) -> Path:
    task = write_task(tmp_path / "task", "int main() { return 0; }\n")
    TASK_CASES[case][0](task)
    return task


@pytest.mark.slow
@pytest.mark.parametrize("case", list(TASK_CASES))
def test_preflight_refuses_a_broken_task_before_the_judge_is_asked(
    tmp_path: Path, judge: LocalJudge, case: str
) -> None:
    task = _broken_task(tmp_path, case)
    words = TASK_CASES[case][1]

    report = run_preflight(
        state_dir=tmp_path / "state",
        model_dir=tmp_path / "model",
        judge_url=judge.url,
        executor=backend_from_name("gpt_oss_120b", base_url=f"{closed_port_url()}/v1"),
        score_seed=seed_scorer(task, judge.url),
        min_free_gb=0.001,
        task_dir=task,
    )
    rows = {check.name: check for check in report.checks}

    assert not report.ok
    assert not rows["task"].ready and words in rows["task"].detail
    assert not rows["judge"].ready and words in rows["judge"].detail
    assert "healthy but scoring the seed failed" in rows["judge"].detail
    assert _submissions(judge) == []
    # The run's own start refuses the directory with the same words.
    with pytest.raises(ContractError) as refused:
        load_task(task)
    assert words in str(refused.value)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["wrong score_direction", "a language the judge cannot compile"])
def test_guidance_ttt_doctor_exits_1_naming_the_task_and_the_judge(
    tmp_path: Path, judge: LocalJudge, case: str
) -> None:
    task = _broken_task(tmp_path, case)
    env = {**os.environ, "COLUMNS": "400"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [
            str(BIN / "guidance-ttt"),
            "doctor",
            f"--state-dir={tmp_path / 'state'}",
            f"--model-dir={tmp_path / 'model'}",
            f"--judge-url={judge.url}",
            f"--task-dir={task}",
            f"--executor-url={closed_port_url()}/v1",
            "--min-free-gb=0.001",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "missing" in done.stderr and "task" in done.stderr and "judge" in done.stderr
    table = " ".join(done.stdout.split())
    key, value = TASK_CASES[case][1].split(": ")[1], TASK_CASES[case][1].rsplit("got ", 1)[1]
    assert key in table and value in table, done.stdout
    assert _submissions(judge) == []


def test_a_valid_task_directory_passes_the_task_row(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", "int main() { return 0; }\n")

    report = run_preflight(
        state_dir=tmp_path / "state",
        model_dir=tmp_path / "model",
        judge_url=closed_port_url(),
        executor=backend_from_name("gpt_oss_120b", base_url=f"{closed_port_url()}/v1"),
        task_dir=task,
    )

    (row,) = [check for check in report.checks if check.name == "task"]
    assert row.ready, row.detail
    assert "cpp, score max, judge problem '0'" in row.detail
