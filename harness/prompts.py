"""The two prompts of a rollout and the guidance request body (docs/design.md §3).

The guidance model sees the problem, the parent's canonical summary and its verdict, never its
code; the executor sees the problem, the parent's full source and the guidance. Wording is this
project's own; the block structure and order are the published method's. Pure functions: a
`TaskContract`, the problem text and library entries in, strings and dicts out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.contract import TaskContract
from harness.state import LibraryEntry

GUIDANCE_MAX_TOKENS = 8192
NO_PREVIOUS_SUMMARY = "No previous summary is attached to the selected candidate."

GUIDANCE_SYSTEM = (
    "You are the guidance model of an open-ended discovery process. You give evolutionary "
    "direction, not code: propose high-level shifts of strategy, conceptual mutations and new "
    "mechanisms that can carry the search past its current local optimum, and leave the "
    "implementation to the execution model."
)

EXECUTOR_SYSTEM = (
    "You are the execution model of an open-ended discovery process. You improve the supplied "
    "parent program by applying the guidance you are given, and you return one complete, "
    "runnable candidate together with its canonical summary."
)

SUMMARY_CONTRACT = (
    "Describe the whole candidate in natural language, not only the change: the algorithm it "
    "implements, what changed from the parent and what was kept, the search and refinement "
    "mechanisms it contains, and any part of the guidance you simplified or left out. Write no "
    "code, no code fences, no copied constants and no raw parameter values."
)


@dataclass(frozen=True)
class Prompt:
    """A system + user message pair."""

    system: str
    user: str

    def messages(self) -> list[dict[str, str]]:
        """The chat `messages` list of an OpenAI-compatible request."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ]

    def to_dict(self) -> dict[str, str]:
        """`{system, user}`, the form kept in entry metadata (`guidance_prompt`)."""
        return {"system": self.system, "user": self.user}


def score_block(entry: LibraryEntry, raw_score_label: str) -> str:
    """The four-line verdict of a candidate: status, raw score (under the task's label), reward,
    verifier message."""
    return (
        f"Verifier status: {entry.verifier_status}\n"
        f"{raw_score_label}: {entry.verifier_raw_score}\n"
        f"Reward: {entry.verifier_reward}\n"
        f"Verifier message: {entry.verifier_message}"
    )


def summary_for_guidance(entry: LibraryEntry) -> str:
    """The summary the guidance model sees for a candidate: the executor's raw summary
    (`metadata.raw_model_summary`) if non-empty, else the stored `summary`, else a fixed
    sentence. This is the only implementation context the guidance model ever gets."""
    raw = entry.metadata.get("raw_model_summary")
    if isinstance(raw, str) and raw.strip():
        return raw
    if entry.summary.strip():
        return entry.summary
    return NO_PREVIOUS_SUMMARY


def guidance_prompt(contract: TaskContract, problem: str, parent: LibraryEntry) -> Prompt:
    """The guidance model's prompt for expanding `parent`. It never contains the parent's code:
    only its summary (see `summary_for_guidance`) and its score block."""
    user = f"""<problem>
{problem.strip()}
</problem>

The next block is a summary-only view of the candidate selected for expansion. It is the only \
implementation context you get; the candidate's code is not shown.

<selected_summary>
{summary_for_guidance(parent)}

{score_block(parent, contract.raw_score_label)}
</selected_summary>

# Objective
{contract.objective}

# Evolutionary Guidelines
1. Use the summary to work out what has been tried, what worked, and which bottleneck the next \
attempt should attack.
2. Stay at the level of algorithmic strategy: no code, no low-level implementation details, no \
parameter schedules.
3. Propose only mechanisms the execution model can implement and run. \
{contract.mechanism_constraint}
4. Answer with exactly one non-empty <guidance>...</guidance> block at the end of your response, \
with nothing after it.

Required final-answer format:

<guidance>
The direction for the next attempt: the main algorithmic idea and why it should help, \
conceptual and actionable.
</guidance>"""
    return Prompt(GUIDANCE_SYSTEM, user)


def executor_prompt(
    contract: TaskContract, problem: str, parent: LibraryEntry, guidance: str
) -> Prompt:
    """The execution model's prompt: the problem, the parent's verdict and full source, the
    guidance, and the two-block answer contract (`<solution>` then `<summary>`)."""
    tag = contract.fence_tag
    user = f"""<problem>
{problem.strip()}
</problem>

<selected_parent>
{score_block(parent, contract.raw_score_label)}

<parent_code>
```{tag}
{parent.solution}
```
</parent_code>
</selected_parent>

<guidance>
{guidance}
</guidance>

The problem statement above is authoritative. The parent code is the runnable baseline: start \
from it, apply the guidance faithfully, and preserve the behaviour the guidance does not touch. \
Score direction: {contract.score_direction}.

Reason carefully about the problem, the parent and the guidance before you write the improved \
program: work out what the guidance asks for and how it fits the parent, then write the program.

{contract.solution_contract}

Reply with exactly two top-level blocks, in this order, and end your reply with </summary>:

<solution>
```{tag}
the complete program
```
</solution>

<summary>
{SUMMARY_CONTRACT}
</summary>"""
    return Prompt(EXECUTOR_SYSTEM, user)


def guidance_request_body(
    prompt: Prompt, *, model: str, max_tokens: int = GUIDANCE_MAX_TOKENS
) -> dict[str, Any]:
    """The chat-completions body of the guidance call. It never names an adapter (`lora_path`):
    Reef injects the adapter it serves."""
    return {
        "model": model,
        "messages": prompt.messages(),
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "max_completion_tokens": max_tokens,
        "chat_template_kwargs": {"enable_thinking": True},
        "stream": False,
    }
