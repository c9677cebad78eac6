"""No path from a candidate's output to a model prompt (docs/design.md §3).

Every field of an archive entry, and every metadata key a rollout records, is filled with a
marker of its own; then both prompts are built from that entry as the parent. The guidance
prompt may show only the executor's summary of the parent; the executor prompt only that
summary and the parent's program (which the executor must read). Nothing the judge, the
checker or the candidate's own run printed (verifier message, per-case output, stderr,
thinking, raw answers) reaches either prompt, whatever the status.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from harness.contract import load_task
from harness.prompts import executor_prompt, guidance_prompt
from harness.state import LibraryEntry
from tests.archive_builders import make_seed

TASK = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
STATUSES = ("valid", "invalid", "execution_error", "parse_error", "guidance_format_error")
#: Fields whose value is a fixed vocabulary or a number, shown as such (not free text).
NOT_TEXT = {"verifier_status", "verifier_reward", "verifier_raw_score", "timestep", "metadata"}
METADATA_KEYS = (
    "raw_model_summary",
    "withheld_model_summary",
    "raw_guidance_text",
    "execution_response_metadata",
    "verification_artifacts",
    "case_results",
    "stderr",
    "checker_message",
    "execution_thinking",
    "guidance_prompt",
    "selected_parent_entry_id",
)


def _marked(status: str) -> LibraryEntry:
    base = make_seed(score=40.0, solution="int main() { return 0; }")
    values = {
        f.name: f"MARK-{f.name}"
        for f in fields(LibraryEntry)
        if f.name not in NOT_TEXT and isinstance(getattr(base, f.name), str)
    }
    metadata = {key: f"MARK-meta-{key}" for key in METADATA_KEYS}
    return replace(base, **values, verifier_status=status, metadata=metadata)


@pytest.mark.parametrize("status", STATUSES)
def test_only_the_summary_and_the_parents_program_reach_a_prompt(status: str) -> None:
    contract, problem = load_task(TASK)
    parent = _marked(status)

    def shown(prompt) -> set[str]:
        text = "\n".join(str(m["content"]) for m in prompt.messages())
        return {word for word in text.replace("\n", " ").split() if "MARK-" in word}

    guidance = shown(guidance_prompt(contract, problem, parent))
    executor = shown(executor_prompt(contract, problem, parent, "the guidance"))
    summary = "MARK-meta-raw_model_summary"
    assert {w.strip("`.,") for w in guidance} == {summary}
    assert {w.strip("`.,") for w in executor} <= {summary, "MARK-solution"}
    assert "MARK-solution" in {w.strip("`.,") for w in executor}
