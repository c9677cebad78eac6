"""Every client of the judge sends its access token: the run's scorer, the preflight and the task
verifier, against the project's real judge (`python -m judges` on 127.0.0.1) started with
GUIDANCE_TTT_JUDGE_TOKEN set, so every call but /health needs `Authorization: Bearer`.

Each client, given the token in its environment, judges the seed; without it, it stops with a
message naming the variable (the scorer at once, not after its retries; the verifier loudly,
without a reward; the preflight as a missing row) and never shows the token.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import judges.service.auth
from harness.adapters.judge import token as harness_token
from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.preflight.services import check_judge
from harness.scorer import JudgeUnavailableError
from judges.service.process import JudgeProcess

TASK_DIR = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
SEED_PROGRAM = (TASK_DIR / "solution" / "solution.cpp").read_text()
TOKEN_ENV = judges.service.auth.TOKEN_ENV

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(url, token) of a judge that needs its token."""
    token = secrets.token_urlsafe(32)
    state = tmp_path_factory.mktemp("token-judge")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(TOKEN_ENV, token)
        judge = JudgeProcess(state, "--generated-cases", "2", "--seed", "4").start()
    try:
        yield judge.url, token
    finally:
        judge.stop()


def scorer(url: str) -> FrontierCSScorer:
    return FrontierCSScorer.for_task(TASK_DIR, url, "0", deadline_s=240.0, poll_interval_s=0.1)


def test_every_client_reads_the_variable_the_judge_reads() -> None:
    verifier = (TASK_DIR / "tests" / "verify.py").read_text()
    assert harness_token.TOKEN_ENV == TOKEN_ENV
    assert f'TOKEN_ENV = "{TOKEN_ENV}"' in verifier
    assert f"{TOKEN_ENV} = " in (TASK_DIR / "task.toml").read_text()  # passed to the verifier


def test_the_scorer_sends_the_token(
    guarded: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, token = guarded
    monkeypatch.setenv(TOKEN_ENV, token)
    with scorer(url) as client:
        verdict = client(SEED_PROGRAM)
        assert client.suite().startswith("generated")  # GET /problems, with the token
    assert verdict.valid and verdict.raw_score > 0, verdict.message


def test_without_the_token_the_scorer_stops_at_once_naming_the_variable(
    guarded: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = guarded
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with scorer(url) as client, pytest.raises(JudgeUnavailableError) as refused:
        client(SEED_PROGRAM)
    assert refused.value.attempts == 1
    assert f"401; the judge wants its access token and {TOKEN_ENV} is not set" in str(refused.value)
    monkeypatch.setenv(TOKEN_ENV, "x" * 40)
    with scorer(url) as client, pytest.raises(JudgeUnavailableError, match=f"{TOKEN_ENV} is wrong"):
        client(SEED_PROGRAM)


def test_the_preflight_checks_the_judge_accepts_the_token(
    guarded: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, token = guarded
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    missing = check_judge(url, None)
    assert not missing.ready, missing
    text = f"{missing.detail} {missing.fix}"
    assert f"{TOKEN_ENV} is not set" in text and f"export {TOKEN_ENV}" in text
    monkeypatch.setenv(TOKEN_ENV, token)
    with scorer(url) as client:
        ready = check_judge(url, lambda: client(SEED_PROGRAM))
    assert ready.ready, ready
    assert token not in f"{missing} {ready}"


def run_verifier(tmp_path: Path, url: str, token: str | None) -> subprocess.CompletedProcess:
    solution = tmp_path / "workspace" / "solution.cpp"
    solution.parent.mkdir(parents=True, exist_ok=True)
    solution.write_text(SEED_PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env |= {
        "PYTHON": sys.executable,
        "FRONTIERCS_JUDGE_URL": url,
        "FRONTIERCS_PROBLEM_ID": "0",
        "VERIFIER_SOLUTION_PATH": str(solution),
        "VERIFIER_LOG_DIR": str(tmp_path / "logs"),
        "VERIFIER_POLL_INTERVAL_S": "0.05",
        "VERIFIER_RETRY_BACKOFF_S": "0.01",
        "VERIFIER_ATTEMPTS": "2",
    }
    if token is not None:
        env[TOKEN_ENV] = token
    return subprocess.run(
        ["bash", str(TASK_DIR / "tests" / "test.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_task_verifier_sends_the_token(guarded: tuple[str, str], tmp_path: Path) -> None:
    url, token = guarded
    judged = run_verifier(tmp_path / "with", url, token)
    assert judged.returncode == 0, judged.stderr
    assert json.loads((tmp_path / "with" / "logs" / "reward.json").read_text())["reward"] > 0
    refused = run_verifier(tmp_path / "without", url, None)
    assert refused.returncode == 1 and "VERIFIER FAILED" in refused.stderr
    assert not (tmp_path / "without" / "logs" / "reward.json").exists()
    reason = (tmp_path / "without" / "logs" / "reason.txt").read_text()
    assert f"401: the judge wants its token; {TOKEN_ENV} is not set" in reason
    assert token not in judged.stdout + judged.stderr + refused.stdout + refused.stderr
