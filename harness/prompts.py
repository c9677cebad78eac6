"""The two prompts of a rollout and the guidance request body (docs/design.md §3).

The guidance model sees the problem, the parent's canonical summary and its verdict, never its
code; the executor sees the problem, the parent's full source and the guidance. Wording is this
project's own; the elements (the blocks, facts and instructions) and their order are the published
method's, pinned by tests/harness/test_prompt_elements.py. Pure functions: a
`TaskContract`, the problem text and library entries in, strings and dicts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness.contract import TaskContract
from harness.state import LibraryEntry

GUIDANCE_MAX_TOKENS = 8192
NO_PREVIOUS_SUMMARY = "No previous summary is attached to the selected candidate."

GUIDANCE_SYSTEM = (
    "You are the guidance model, the strategic navigator of an open-ended scientific discovery "
    "process. You give evolutionary guidance, not final code and not low-level implementation "
    "details."
)

#: The language a candidate is written in, as the executor's system prompt names it.
LANGUAGE_NAMES = {"cpp": "C++17", "python": "Python"}
#: What the answer template's solution fence holds, by fence tag.
SOLUTION_PLACEHOLDERS = {
    "cpp": "// the complete executable program the problem asks for",
    "python": "# the complete executable program the problem asks for",
}

SUMMARY_CONTRACT = """A concise natural-language summary of the complete candidate that explains:
1. the algorithmic idea it implements;
2. what changed from the parent in answer to the guidance, and what was kept;
3. the search, refinement or optimisation mechanisms it really contains.

Give enough for a later model to understand the overall algorithm from this summary alone. Say \
so where you simplified, approximated or left out a part of the guidance. Write no source code, \
no code fences, no copied constants, no raw candidate parameters, no benchmark profiles and \
none of these output instructions."""

#: The `Verifier message` line the prompts show (docs/differences.md, row 37): a valid candidate
#: shows `accepted`, as FrontierCS results carry no message; a failed one a fixed sentence for
#: its status. The judge's own text (a compile log, a failed case's stderr or checker output) is
#: text a candidate program controls, so it reaches neither a model's prompt nor Reef: it stays
#: in the entry's `verification_artifacts` (`judge_logs`, `case_detail`, `score_check`), and the
#: entry's `verifier_message` and the report's feedback carry the verdict's own sentence.
ACCEPTED_MESSAGE = "accepted"
FAILURE_MESSAGES = {
    "invalid": "the judge rejected the candidate",
    "parse_error": "the execution model's answer held no program",
    "execution_error": "the execution model's call failed",
    "guidance_format_error": "the guidance was malformed, so nothing was executed",
    "environment_error": "the verifier was unavailable",
}
OTHER_FAILURE_MESSAGE = "the candidate failed verification"


#: The tags this module's prompts are built of. Model-written text placed into a prompt (a
#: summary, a guidance) has them escaped, so that it cannot close its block and open its own.
PROMPT_TAGS = (
    "problem",
    "selected_summary",
    "selected_parent",
    "parent_code",
    "guidance",
    "solution",
    "summary",
)
_LT, _GT = "<\uff1c\ufe64\u2039\u3008", ">\uff1e\ufe65\u203a\u3009"
_GAP = "\\s*"
_PROMPT_TAG = re.compile(
    f"[{_LT}]{_GAP}/?{_GAP}(?:{'|'.join(PROMPT_TAGS)})\\b[^{_LT}{_GT}\\n]{{0,80}}[{_GT}]",
    re.IGNORECASE,
)
_HEADING = re.compile("^([ \\t]{0,3})(?=[#\uff03])", re.MULTILINE)
#: Zero-width characters, joiners and bidi controls: invisible, so nothing a reader misses.
_FORMAT_CHARACTERS = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


def _escaped_tag(match: re.Match[str]) -> str:
    return "&lt;" + match.group(0)[1:-1] + "&gt;"


def escape_model_text(text: str) -> str:
    """Model-written `text` as a prompt shows it: zero-width and bidi control characters
    dropped, the prompt's own tags (`PROMPT_TAGS`, in any case, spaced, or with look-alike
    angle brackets) written as `&lt;tag&gt;`, and a line that starts a Markdown heading
    (`# Objective`) escaped as `\\# Objective`, so that it can neither close its block nor
    add a section of the prompt. Ordinary text, holding none of these, is unchanged."""
    visible = _FORMAT_CHARACTERS.sub("", text)
    return _HEADING.sub(r"\1\\", _PROMPT_TAG.sub(_escaped_tag, visible))


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


def prompt_message(entry: LibraryEntry) -> str:
    """The verifier message a prompt shows for `entry` (see `FAILURE_MESSAGES`)."""
    if entry.verifier_status == "valid":
        return ACCEPTED_MESSAGE
    return FAILURE_MESSAGES.get(entry.verifier_status, OTHER_FAILURE_MESSAGE)


def _number(value: float | None) -> str:
    return "None" if value is None else repr(float(value))


def score_block(entry: LibraryEntry, raw_score_label: str) -> str:
    """The four-line verdict of a candidate: status, raw score (under the task's label), reward,
    verifier message (`prompt_message`)."""
    return (
        f"Verifier status: {entry.verifier_status}\n"
        f"{raw_score_label}: {_number(entry.verifier_raw_score)}\n"
        f"Reward: {_number(entry.verifier_reward)}\n"
        f"Verifier message: {prompt_message(entry)}"
    )


def summary_for_guidance(entry: LibraryEntry) -> str:
    """The summary the guidance model sees for a candidate: the executor's raw summary
    (`metadata.raw_model_summary`) if non-empty, else the stored `summary`, else a fixed
    sentence (stripped), with the prompt's tags and headings escaped (`escape_model_text`).
    This is the only implementation context the guidance model ever gets."""
    raw = entry.metadata.get("raw_model_summary")
    if isinstance(raw, str) and raw.strip():
        return escape_model_text(raw.strip())
    if entry.summary.strip():
        return escape_model_text(entry.summary.strip())
    return NO_PREVIOUS_SUMMARY


def guidance_prompt(contract: TaskContract, problem: str, parent: LibraryEntry) -> Prompt:
    """The guidance model's prompt for expanding `parent`. It never contains the parent's code:
    only its summary (see `summary_for_guidance`) and its score block."""
    user = f"""<problem>
{problem.strip()}
</problem>

The next block is the summary-only view of the selected candidate: the only run-local \
implementation context the guidance model gets.

<selected_summary>
{summary_for_guidance(parent)}

{score_block(parent, contract.raw_score_label)}
</selected_summary>

# Objective
{contract.objective}

# Evolutionary Guidelines
1. Use <selected_summary> to find what has been tried, what worked, and which bottleneck the \
next attempt should address.
2. Stay at the level of algorithmic strategy: propose high-level algorithmic directions or \
changes to important components, not code, low-level implementation details or parameter \
schedules.
3. Propose only executable mechanisms. {contract.mechanism_constraint}
4. Return exactly one non-empty terminal <guidance>...</guidance> block, with no other custom \
XML block, commentary, code or markdown after it.

Required final-answer format:

<guidance>
One conceptual, actionable evolutionary direction for the next execution attempt.
</guidance>"""
    return Prompt(GUIDANCE_SYSTEM, user)


def executor_system(contract: TaskContract) -> str:
    """The execution model's system prompt; it names the candidate's language."""
    language = LANGUAGE_NAMES[contract.fence_tag]
    return (
        f"You are the execution model. Improve the supplied parent {language} candidate by "
        "applying the guidance, then return one complete runnable candidate and its canonical "
        "summary."
    )


def executor_prompt(
    contract: TaskContract, problem: str, parent: LibraryEntry, guidance: str
) -> Prompt:
    """The execution model's prompt: the problem, the parent's verdict and full source, the
    guidance (escaped, `escape_model_text`), the solution contract and the two-block answer
    contract (`<solution>` then `<summary>`). The parent's source is shown as written: it is
    the program to improve, and it sits in a fence it cannot close (a program is a fence's
    body, which holds no fence)."""
    tag = contract.fence_tag
    user = f"""<problem>
{problem.strip()}
</problem>

<selected_parent>
{score_block(parent, contract.raw_score_label)}

<parent_code>
```{tag}
{parent.solution.strip()}
```
</parent_code>
</selected_parent>

<guidance>
{escape_model_text(guidance.strip())}
</guidance>

The problem statement is authoritative. Take the selected parent code as the runnable baseline, \
apply the guidance faithfully and keep the working behaviour it does not touch. Score \
direction: {contract.score_direction}.

{contract.solution_contract}

Think carefully before you write the improved program. Your final answer must hold exactly two \
top-level XML blocks and end with </summary>:

<solution>
```{tag}
{SOLUTION_PLACEHOLDERS[tag]}
```
</solution>

<summary>
{SUMMARY_CONTRACT}
</summary>"""
    return Prompt(executor_system(contract), user)


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
