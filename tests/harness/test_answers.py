"""Strict guidance parsing, summary and solution extraction, and the rollout entry
(docs/design.md §3)."""

from __future__ import annotations

import pytest

from harness.answers import (
    GUIDANCE_EMPTY,
    GUIDANCE_NOT_ONE_BLOCK,
    GUIDANCE_NOT_TERMINAL,
    NO_CANONICAL_SUMMARY,
    GuidanceFormatError,
    canonical_summary,
    extract_solution,
    extract_summary,
    parse_guidance,
    rollout_entry,
)
from harness.state import (
    EXECUTION_ERROR,
    GUIDANCE_FORMAT_ERROR,
    LibraryNode,
    VerificationResult,
)


def test_the_three_error_messages_are_exact():
    assert GUIDANCE_NOT_ONE_BLOCK == "expected exactly one complete <guidance> block"
    assert GUIDANCE_NOT_TERMINAL == "the <guidance> block must be terminal"
    assert GUIDANCE_EMPTY == "the <guidance> block is empty"


@pytest.mark.parametrize(
    ("text", "guidance"),
    [
        ("<guidance>Use a skyline.</guidance>", "Use a skyline."),
        ("  \n<guidance>\n  Use a skyline.\n</guidance>\n\n", "Use a skyline."),
        ("I considered shelves first.\n<guidance>Use a skyline.</guidance>", "Use a skyline."),
        ("<think>weigh options</think>\n<guidance>Beam search.</guidance>  ", "Beam search."),
    ],
)
def test_guidance_is_accepted_with_leading_text_and_surrounding_whitespace(text, guidance):
    assert parse_guidance(text) == guidance


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", GUIDANCE_NOT_ONE_BLOCK),
        ("Use a skyline.", GUIDANCE_NOT_ONE_BLOCK),
        ("<guidance>Use a skyline.", GUIDANCE_NOT_ONE_BLOCK),  # unclosed
        ("Use a skyline.</guidance>", GUIDANCE_NOT_ONE_BLOCK),
        ("</guidance>x<guidance>", GUIDANCE_NOT_TERMINAL),  # closed before opened (reference)
        ("<guidance>a</guidance>\n<guidance>b</guidance>", GUIDANCE_NOT_ONE_BLOCK),  # two blocks
        ("<guidance>a<guidance>b</guidance>", GUIDANCE_NOT_ONE_BLOCK),  # nested open
        ("<guidance>a</guidance> Hope this helps!", GUIDANCE_NOT_TERMINAL),  # trailing text
        ("<guidance>a</guidance>\n```", GUIDANCE_NOT_TERMINAL),
        ("<guidance></guidance>", GUIDANCE_EMPTY),
        ("<guidance>  \n\t </guidance>", GUIDANCE_EMPTY),
    ],
)
def test_malformed_guidance_is_rejected_with_the_exact_message(text, message):
    with pytest.raises(GuidanceFormatError) as err:
        parse_guidance(text)
    assert str(err.value) == message


def test_a_thinking_trace_quoting_the_tag_makes_the_answer_malformed():
    text = "I must answer with a <guidance> block.\n<guidance>Try annealing.</guidance>"
    with pytest.raises(GuidanceFormatError, match="exactly one complete"):
        parse_guidance(text)


def test_tags_are_case_sensitive():
    with pytest.raises(GuidanceFormatError, match="exactly one complete"):
        parse_guidance("<Guidance>Try annealing.</Guidance>")


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        ("<solution>x</solution>\n<summary>\nSkyline packer.\n</summary>\n", "Skyline packer."),
        ("<summary>draft</summary> text <summary>final</summary>", "final"),
        ("<summary>ok</summary> trailing", None),  # must end with </summary>
        ("<summary>   </summary>", None),
        ("no summary at all", None),
        ("only a close </summary>", None),
    ],
)
def test_summary_extraction(text, summary):
    assert extract_summary(text) == summary


CPP_ANSWER = """Here is my plan.
```cpp
int draft() {}
```
<solution>
```text
not code
```
```C++
#include <cstdio>
int main() { return 0; }
```
</solution>
<summary>s</summary>"""


def test_solution_is_the_last_matching_fence_inside_the_solution_block():
    assert extract_solution(CPP_ANSWER, "cpp") == "#include <cstdio>\nint main() { return 0; }"


def test_a_solution_block_without_a_fence_yields_none_even_if_code_is_outside():
    text = "```cpp\nint main(){}\n```\n<solution>int main(){}</solution>"
    assert extract_solution(text, "cpp") is None


def test_without_a_solution_block_the_whole_text_is_searched():
    text = "```cxx\nint a;\n```\nthen\n```cpp\nint b;\n```\n```python\nprint()\n```"
    assert extract_solution(text, "c++") == "int b;"
    assert extract_solution(text, "python") == "print()"
    assert extract_solution("```PY\nx = 1\n```", "python") == "x = 1"
    assert extract_solution("```python\nx = 1\n```", "cpp") is None
    assert extract_solution("no code", "cpp") is None


def test_canonical_summary_falls_back_to_the_references_sentence():
    """Reference harness/agent.py: `model_summary or "<the sentence>"`; the guidance model reads
    it where a parent has no summary, so its wording is the reference's."""
    assert NO_CANONICAL_SUMMARY == "The execution model did not emit a usable canonical summary."
    assert canonical_summary("  Skyline.  ") == "Skyline."
    assert canonical_summary(None) == NO_CANONICAL_SUMMARY
    assert canonical_summary(" \n") == NO_CANONICAL_SUMMARY


PARENT = LibraryNode("node-1", "polyomino_packing", 2, "entry-1", 40.0, 40.0, 1, None)


def test_rollout_entry_of_a_valid_candidate():
    entry = rollout_entry(
        parent=PARENT,
        step=4,
        guidance="Use a skyline.",
        execution_thinking="thinking",
        solution="int main(){}",
        verification=VerificationResult(0.5, 50.0, True, "valid", "ok"),
        raw_summary="Skyline packer.",
        metadata={"group_uid": "5:0"},
        entry_id="fixed",
    )
    assert entry.id == "fixed" and entry.parent_id == "node-1" and entry.timestep == 5
    assert entry.summary == entry.reusable_idea == "Skyline packer."
    assert entry.failure_mode is None and entry.verifier_raw_score == 50.0
    assert entry.metadata == {"group_uid": "5:0", "raw_model_summary": "Skyline packer."}


def test_rollout_entry_of_malformed_guidance_keeps_the_failure_and_the_fallback_summary():
    entry = rollout_entry(
        parent=PARENT,
        step=0,
        guidance=None,
        execution_thinking="",
        solution=None,
        verification=VerificationResult.failure(GUIDANCE_FORMAT_ERROR, GUIDANCE_EMPTY),
        raw_summary=None,
        metadata={},
    )
    assert entry.guidance == "" and entry.solution == ""
    assert entry.verifier_reward == 0.0 and entry.failure_mode == GUIDANCE_FORMAT_ERROR
    assert entry.summary == NO_CANONICAL_SUMMARY
    assert entry.metadata["raw_model_summary"] is None
    assert not entry.is_valid


def test_rollout_entry_of_an_executor_failure_is_not_valid():
    entry = rollout_entry(
        parent=PARENT,
        step=0,
        guidance="g",
        execution_thinking="",
        solution=None,
        verification=VerificationResult.failure(EXECUTION_ERROR, "TimeoutError: slow"),
        raw_summary=None,
        metadata={},
    )
    assert entry.verifier_status == EXECUTION_ERROR and entry.failure_mode == EXECUTION_ERROR


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```cpp int main() {} ```", "int main() {}"),  # a one-line fence counts
        ("```cpp17\nint main() {}\n```", "17\nint main() {}"),  # the tag's tail is body
        ("```cpp title=a.cpp\nint x;\n```", "title=a.cpp\nint x;"),  # so is an info string
        ("  ```cpp\n    int x;\n  ```", "int x;"),  # the body is stripped, indentation too
        ("```CXX\nint y;\n```", "int y;"),
        ("```cpp\n\n```", None),  # an empty body is no program
    ],
)
def test_code_fence_edge_cases_read_as_the_reference_reads_them(text: str, code: str | None):
    assert extract_solution(f"<solution>\n{text}\n</solution>", "cpp") == code
