"""A whole run with the OpenRouter backend never writes its API key anywhere.

Real: `reef serve`, the local judge, the run loop, the archive store and journal, the run
controller, the event log. The executor is an OpenAI-compatible test server standing in for
OpenRouter (reached through the `openrouter_glm_5_2` backend with its base URL moved to loopback);
the training bridge is the fake of tests/rehearsal_support. The key is a fresh random value, so
finding it anywhere means it leaked.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

import pytest
from judge_fakes import LocalJudge

from tests.openai_fixture import OpenAIFixture
from tests.reef_fixtures import running_reef
from tests.rehearsal_support import (
    GuidanceScript,
    executor_reply,
    run_cpu_steps,
    task_dir,
    write_serve_yaml,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_openrouter_key_is_in_no_file_log_or_report_of_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-or-v1-" + secrets.token_hex(24)
    monkeypatch.setenv("OPENROUTER_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    task = task_dir()
    with (
        LocalJudge(tmp_path / "judge", "--generated-cases", "2", "--seed", "5") as judge,
        OpenAIFixture(GuidanceScript(malformed=[])) as guidance,
        OpenAIFixture(executor_reply) as executor,
        running_reef(tmp_path / "reef", upstream=guidance) as reef,
    ):
        settings = write_serve_yaml(
            tmp_path / "serve.yaml",
            state_dir=tmp_path / "state",
            reef_port=reef.port,
            judge_url=judge.url,
            groups=2,
            rollouts=4,  # the grid tests/reef_fixtures.py configures Reef with
            steps=1,
            executor_backend="openrouter_glm_5_2",
        )
        result = run_cpu_steps(settings, executor.v1_url, task)
        reef_log = reef.log_text()

    # The scan proves something only if the key really travelled to the executor.
    calls = executor.completion_requests()
    assert calls and all(c.headers.get("authorization") == f"Bearer {key}" for c in calls)
    assert all(c.body["model"] == "z-ai/glm-5.2" for c in calls)
    assert result.next_step == 1

    # Nothing the run, Reef or the judge wrote holds the key: state dir (journal, archive head,
    # resume-state, events, library.json), Reef's records and the judge's results.
    assert files_containing(tmp_path, key.encode()) == []
    assert key not in reef_log
    logged = [r.getMessage() for r in caplog.records]
    assert logged, "expected the run to log"
    assert not [m for m in logged if key in m]
