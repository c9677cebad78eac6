"""The two prompts and the guidance request body (docs/design.md §3)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from archive_builders import make_seed

from harness.contract import TaskContract, load_task
from harness.prompts import (
    NO_PREVIOUS_SUMMARY,
    executor_prompt,
    guidance_prompt,
    guidance_request_body,
    score_block,
    summary_for_guidance,
)
from harness.state import LibraryEntry

CONTRACT = TaskContract(
    solution_language="cpp",
    solution_contract="SOLUTION-CONTRACT: one C++17 program.",
    mechanism_constraint="MECHANISM-CONSTRAINT: no hard-coded answers.",
    objective="OBJECTIVE: maximise density.",
    raw_score_label="Packing score",
    score_direction="max",
    judge_problem_id="0",
)
PROBLEM = "PROBLEM: pack the polyominoes into the smallest rectangle."
CODE = '#include <cstdio>\nint main() { puts("UNIQUE-PARENT-CODE-7f3a"); }'
SHIPPED_TASK = Path(__file__).parents[2] / "harbor" / "polyomino_packing"


def parent(**changes) -> LibraryEntry:
    base = replace(make_seed(score=61.5, solution=CODE), verifier_message="all 70 cases ok")
    return replace(base, **changes)


def test_score_block_has_four_lines_in_order():
    assert score_block(parent(), "Packing score") == (
        "Verifier status: valid\nPacking score: 61.5\nReward: 0.615\nVerifier message: accepted"
    )
    failed = parent(verifier_status="invalid", verifier_raw_score=None, verifier_reward=0.0)
    assert "Packing score: None\nReward: 0.0" in score_block(failed, "Packing score")
    # The judge's own message is candidate-controlled text: a prompt shows a fixed sentence.
    assert score_block(failed, "Packing score").endswith(
        "Verifier message: the judge rejected the candidate"
    )
    assert "all 70 cases ok" not in score_block(failed, "Packing score")


def test_guidance_prompt_never_contains_the_parent_code():
    prompt = guidance_prompt(CONTRACT, PROBLEM, parent())
    body = guidance_request_body(prompt, model="Qwen/Qwen3-8B")
    assert "UNIQUE-PARENT-CODE-7f3a" not in json.dumps(body)
    assert "int main" not in prompt.user and "```" not in prompt.user


def test_guidance_prompt_blocks_come_in_the_specified_order():
    user = guidance_prompt(CONTRACT, PROBLEM, parent()).user
    markers = [
        "<problem>\n" + PROBLEM + "\n</problem>",
        "summary-only view",
        "<selected_summary>\nA shelf packer",
        "Verifier status: valid\nPacking score: 61.5",
        "</selected_summary>",
        "# Objective\nOBJECTIVE: maximise density.",
        "# Evolutionary Guidelines",
        "MECHANISM-CONSTRAINT",
        "exactly one non-empty terminal <guidance>",
        "<guidance>\n",
    ]
    positions = [user.index(m) for m in markers]
    assert positions == sorted(positions)
    assert user.endswith("</guidance>")


def test_guidance_prompt_shows_the_raw_summary_before_the_stored_one():
    entry = parent(metadata={"raw_model_summary": "RAW: skyline with restarts"})
    assert "RAW: skyline with restarts" in guidance_prompt(CONTRACT, PROBLEM, entry).user
    assert summary_for_guidance(entry) == "RAW: skyline with restarts"
    assert summary_for_guidance(parent(metadata={"raw_model_summary": None})) == parent().summary
    assert summary_for_guidance(parent(metadata={"raw_model_summary": "  "})) == parent().summary
    assert summary_for_guidance(parent(summary="", metadata={})) == NO_PREVIOUS_SUMMARY


def test_executor_prompt_always_contains_the_parent_code_and_the_guidance():
    prompt = executor_prompt(CONTRACT, PROBLEM, parent(), "GUIDANCE: use a skyline")
    user = prompt.user
    assert "<parent_code>\n```cpp\n" + CODE + "\n```\n</parent_code>" in user
    markers = [
        "<problem>\n" + PROBLEM,
        "<selected_parent>\nVerifier status: valid",
        "<parent_code>",
        "</selected_parent>",
        "<guidance>\nGUIDANCE: use a skyline\n</guidance>",
        "Score direction: max.",
        "SOLUTION-CONTRACT",
        "Think carefully before you write the improved program.",
        "<solution>\n```cpp",
        "<summary>",
    ]
    positions = [user.index(m) for m in markers]
    assert positions == sorted(positions)
    assert user.endswith("</summary>")
    assert "execution model" in prompt.system and "C++17 candidate" in prompt.system


def test_executor_prompt_uses_a_python_fence_for_python_tasks_and_the_min_direction():
    # A prompt-level check: no judge compiles Python yet, so the contract is built unvalidated.
    contract = CONTRACT.model_copy(update={"solution_language": "python", "score_direction": "min"})
    user = executor_prompt(contract, PROBLEM, parent(solution="print(1)"), "g").user
    assert "```python\nprint(1)\n```" in user
    assert "Score direction: min." in user


def test_guidance_request_body_has_exactly_the_specified_keys_and_no_adapter():
    prompt = guidance_prompt(CONTRACT, PROBLEM, parent())
    body = guidance_request_body(prompt, model="Qwen/Qwen3-8B")
    assert body == {
        "model": "Qwen/Qwen3-8B",
        "messages": [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
        ],
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_completion_tokens": 8192,
        "chat_template_kwargs": {"enable_thinking": True},
        "stream": False,
    }
    assert "lora_path" not in json.dumps(body)
    assert guidance_request_body(prompt, model="m", max_tokens=512)["max_completion_tokens"] == 512


def test_no_policy_message_contains_the_shipped_seed_program():
    if not (SHIPPED_TASK / "solution" / "solution.cpp").exists():
        pytest.skip("harbor/polyomino_packing is not in this checkout")
    contract, problem = load_task(SHIPPED_TASK)
    program = (SHIPPED_TASK / "solution" / "solution.cpp").read_text()
    seed = parent(solution=program)
    body = json.dumps(guidance_request_body(guidance_prompt(contract, problem, seed), model="m"))
    lines = [line.strip() for line in program.splitlines() if len(line.strip()) > 25]
    assert lines and not any(json.dumps(line)[1:-1] in body for line in lines)
    assert program.strip() in executor_prompt(contract, problem, seed, "g").user
