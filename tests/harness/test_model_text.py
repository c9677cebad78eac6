"""Model text made valid UTF-8 at the boundary (harness.model_text): lone surrogates and NULs in
an answer are replaced and counted, never an exception later (the whole-step case is
tests/harness/test_agent.py::test_a_lone_surrogate_in_an_executor_answer_is_a_recorded_rollout_and_the_step_commits)."""

from __future__ import annotations

import json

from harness.adapters.executor.backends import backend_from_name
from harness.adapters.executor.client import ExecutionClient
from harness.model_text import REPLACEMENT, valid_data, valid_text
from tests.openai_fixture import OpenAIFixture, Reply

LONE_HIGH, LONE_LOW = chr(0xD800), chr(0xDFFF)


def test_lone_surrogates_and_nul_are_replaced_and_counted_and_pairs_kept() -> None:
    text = f"a{LONE_HIGH}b\x00c{LONE_LOW}d \U0001f600"
    repaired, count = valid_text(text)
    assert count == 3
    assert repaired == f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}d \U0001f600"
    repaired.encode("utf-8")
    # A JSON surrogate pair decodes to one code point and is left alone.
    assert valid_text(json.loads('"\\ud83d\\ude00"')) == ("\U0001f600", 0)
    data = valid_data({"k" + LONE_HIGH: [LONE_LOW, 1, None]})
    json.dumps(data, ensure_ascii=False).encode("utf-8")


def test_an_executor_answer_with_a_json_lone_surrogate_is_repaired_and_counted() -> None:
    content = f"<solution>x</solution>{LONE_HIGH}\x00"
    with OpenAIFixture(Reply(content=content, reasoning=f"think{LONE_LOW}"), model="m") as server:
        backend = backend_from_name("gpt_oss_120b", base_url=server.v1_url)
        with ExecutionClient(backend) as client:
            result = client.complete([{"role": "user", "content": "go"}])
    assert result.text == f"<solution>x</solution>{REPLACEMENT}{REPLACEMENT}"
    assert result.reasoning == f"think{REPLACEMENT}"
    assert result.repairs == {"execution_text": 2, "execution_thinking": 1}
