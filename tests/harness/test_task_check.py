"""`guidance-ttt task check` on the three shipped tasks and on broken copies of one of them.

The real local judge serves FrontierCS problems 0 and 1 from `../shared/data/frontiercs` (the
test skips when that copy is absent) and the Erdős task's own package. The shipped tasks pass,
their seeds reproduced by the judge; each broken copy is refused with a line naming the file and
the key: a missing file, an unknown key (contract.json, task.toml), a seed whose recorded score
the judge does not reproduce, an unsupported language.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import task as task_command
from judges.service.process import JudgeProcess

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "frontiercs"
TASKS = ("polyomino_packing", "treasure_packing", "erdos_min_overlap")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SHARED / "problems" / "1").is_dir(),
        reason="FrontierCS test data ../shared/data/frontiercs is absent",
    ),
]


@pytest.fixture(scope="module")
def judge_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state = tmp_path_factory.mktemp("judge")
    erdos = REPO / "harbor" / "erdos_min_overlap"
    with JudgeProcess(state, "--frontiercs", str(SHARED), "--task", str(erdos)) as judge:
        yield judge.url


def check(task: Path, *flags: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    status = task_command.main(["check", str(task), *flags], out=lines.append)
    return status, lines


def broken_copy(tmp_path: Path, name: str = "treasure_packing") -> Path:
    copy = tmp_path / name
    shutil.copytree(REPO / "harbor" / name, copy)
    return copy


@pytest.mark.parametrize("name", TASKS)
def test_shipped_task_passes_with_its_seed_reproduced(judge_url: str, name: str) -> None:
    status, lines = check(REPO / "harbor" / name, "--judge-url", judge_url)
    assert status == 0, lines
    assert all(line.startswith("ok") for line in lines)
    assert any(line.startswith("ok   judge: seed reproduced") for line in lines), lines


def test_missing_file_is_named(tmp_path: Path) -> None:
    task = broken_copy(tmp_path)
    (task / "tests" / "test.sh").unlink()
    status, lines = check(task, "--no-judge")
    assert status == 1
    assert "FAIL tests/test.sh: missing (every task ships it; docs/adding-a-task.md)" in lines


def test_unknown_contract_key_is_named(tmp_path: Path) -> None:
    task = broken_copy(tmp_path)
    contract = json.loads((task / "contract.json").read_text())
    (task / "contract.json").write_text(json.dumps({**contract, "timeout": "5"}))
    status, lines = check(task, "--no-judge")
    assert status == 1
    assert any(
        line.startswith("FAIL contract.json") and "timeout: unknown key" in line for line in lines
    ), lines


def test_unknown_task_toml_key_is_named(tmp_path: Path) -> None:
    task = broken_copy(tmp_path)
    text = (task / "task.toml").read_text().replace("[agent]\n", "[agent]\nretries = 3\n")
    (task / "task.toml").write_text(text)
    status, lines = check(task, "--no-judge")
    assert status == 1
    assert any("FAIL task.toml: unknown key 'agent.retries'" in line for line in lines), lines


def test_unsupported_language_is_named(tmp_path: Path) -> None:
    task = broken_copy(tmp_path)
    contract = json.loads((task / "contract.json").read_text())
    (task / "contract.json").write_text(json.dumps({**contract, "solution_language": "rust"}))
    status, lines = check(task, "--no-judge")
    assert status == 1
    assert any(
        line.startswith("FAIL contract.json")
        and "solution_language: must be a language the judge compiles" in line
        and "got 'rust'" in line
        for line in lines
    ), lines


def test_seed_the_judge_does_not_reproduce_is_refused(judge_url: str, tmp_path: Path) -> None:
    task = broken_copy(tmp_path)
    path = task / "solution" / "seed.json"
    record = json.loads(path.read_text())
    claimed = 64.0  # a consistent record of a score the program does not reach
    record["entry"].update(verifier_raw_score=claimed, verifier_reward=claimed)
    record["node"].update(raw_score=claimed, value=claimed)
    record["measured"]["public"]["score"] = claimed
    path.write_text(json.dumps(record))
    status, lines = check(task, "--judge-url", judge_url)
    assert status == 1
    assert any(
        line.startswith("FAIL solution/seed.json: entry.verifier_raw_score")
        and "recorded 64.0 but the judge gives 28.07" in line
        for line in lines
    ), lines


def test_seed_command_writes_a_record_that_check_accepts(judge_url: str, tmp_path: Path) -> None:
    task = broken_copy(tmp_path, "erdos_min_overlap")
    (task / "solution" / "seed.json").unlink()
    summary = "A symmetric bump refined by projected subgradient steps on the worst shift."
    program = task / "solution" / "solution.py"
    lines: list[str] = []
    args = ["seed", str(task), str(program), "--summary", summary, "--judge-url", judge_url]
    assert task_command.main(args, out=lines.append) == 0, lines
    record = json.loads((task / "solution" / "seed.json").read_text())
    bound = record["entry"]["verifier_raw_score"]
    assert 0.38 < bound < 0.39  # the bound itself, lower is better
    assert record["entry"]["verifier_reward"] == pytest.approx(1 / bound)
    assert record["node"]["value"] == -bound
    status, lines = check(task, "--judge-url", judge_url)
    assert status == 0, lines


@pytest.mark.parametrize("name", ["treasure_packing", "erdos_min_overlap"])
def test_task_verifier_rewards_the_seed_and_fails_loudly_without_a_judge(
    judge_url: str, name: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    task = REPO / "harbor" / name
    record = json.loads((task / "solution" / "seed.json").read_text())["entry"]
    program = task / "solution" / ("solution.py" if name.startswith("erdos") else "solution.cpp")
    env = {
        "PATH": "/usr/bin:/bin",
        "VERIFIER_SOLUTION_PATH": str(program),
        "VERIFIER_POLL_INTERVAL_S": "0.2",
        "VERIFIER_ATTEMPTS": "1",
    }
    logs = tmp_path / "logs"
    done = subprocess.run(
        [sys.executable, str(task / "tests" / "verify.py")],
        env={**env, "FRONTIERCS_JUDGE_URL": judge_url, "VERIFIER_LOG_DIR": str(logs)},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reward = json.loads((logs / "reward.json").read_text())["reward"]
    assert reward == pytest.approx(record["verifier_reward"], abs=1e-6)  # 1 / bound for Erdős
    down = tmp_path / "down"
    failed = subprocess.run(
        [sys.executable, str(task / "tests" / "verify.py")],
        env={**env, "FRONTIERCS_JUDGE_URL": "http://127.0.0.1:9", "VERIFIER_LOG_DIR": str(down)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert failed.returncode == 1 and "VERIFIER FAILED" in failed.stderr
    assert not (down / "reward.json").exists()


def test_a_judge_on_another_suite_says_what_to_do(judge_url: str, tmp_path: Path) -> None:
    task = broken_copy(tmp_path)
    record_path = task / "solution" / "seed.json"
    record = json.loads(record_path.read_text())
    score = record["entry"]["verifier_raw_score"]
    record["measured"]["generated:3:2"] = {"suite": "generated:3:2", "score": score}
    record_path.write_text(json.dumps(record))
    status, lines = check(task, "--judge-url", judge_url, "--suite", "generated:3:2")
    assert status == 1
    (line,) = [line for line in lines if line.startswith("FAIL judge")]
    assert "on suite 'public', not 'generated:3:2'" in line
    assert "--suite public" in line and "task seed" in line
