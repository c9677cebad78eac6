"""The guidance-key forwarder (`python -m harness.adapters.guidance_proxy`) as a real process in
front of
the scripted OpenAI server: requests pass through unchanged with the key added from the
environment, streamed answers stay streamed, and it refuses to start without a key."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.openai_fixture import OpenAIFixture, Reply
from tests.reef_fixtures import free_port

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-guidance-key"


@pytest.fixture
def forwarded() -> Iterator[tuple[OpenAIFixture, str]]:
    with OpenAIFixture(Reply(content="<guidance>spiral</guidance>"), model="m") as upstream:
        port = free_port()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.adapters.guidance_proxy",
                "--upstream",
                upstream.base_url,
                "--port",
                str(port),
            ],
            cwd=REPO,
            env={**os.environ, "GUIDANCE_TTT_GUIDANCE_API_KEY": KEY},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    httpx.get(url + "/v1/models", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            yield upstream, url
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_requests_pass_through_with_the_key_added(forwarded: tuple[OpenAIFixture, str]) -> None:
    upstream, url = forwarded
    body = {"model": "m", "messages": [{"role": "user", "content": "guide"}]}
    answer = httpx.post(
        url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer caller-token", "x-reef-scenario": "s"},
        timeout=30,
    )
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "<guidance>spiral</guidance>"
    (seen,) = [r for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert seen.headers["authorization"] == f"Bearer {KEY}"  # the caller's token is replaced
    assert seen.headers["x-reef-scenario"] == "s" and seen.body == body


def test_streamed_answers_stay_streamed(forwarded: tuple[OpenAIFixture, str]) -> None:
    _, url = forwarded
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "guide"}]}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        events = [line for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "<guidance>spiral</guidance>"


def test_without_a_key_it_refuses_to_start() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GUIDANCE_TTT_GUIDANCE_API_KEY"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.adapters.guidance_proxy",
            "--upstream",
            "http://127.0.0.1:1",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert re.search(r"GUIDANCE_TTT_GUIDANCE_API_KEY is not set", done.stderr)
