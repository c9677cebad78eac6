"""Summary-only, enforced: a `<summary>` that carries code never reaches the guidance model.

The executor is asked for a code-free summary; these tests show what happens when it writes one
anyway (a code fence, the program repeated, re-indented, or a few quoted lines): the rollout is
scored as before, the summary is withheld and recorded, and the guidance prompt built from that
entry holds none of the program's lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.answers import NO_CANONICAL_SUMMARY, rollout_entry
from harness.archive.summary_filter import QUOTED_LINES, summary_code_problem
from harness.contract import load_task
from harness.library import Archive
from harness.prompts import guidance_prompt
from harness.state import ArchiveConfig, VerificationResult
from tests.archive_builders import make_seed

TASK = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
PROGRAM = "\n".join(
    [
        "#include <bits/stdc++.h>",
        "using namespace std;",
        "int main() {",
        "    int n; cin >> n;",
        "    vector<int> widths(n), heights(n);",
        "    for (int i = 0; i < n; ++i) cin >> widths[i] >> heights[i];",
        "    long long area = 0;",
        "    for (int i = 0; i < n; ++i) area += 1LL * widths[i] * heights[i];",
        "    int side = (int)ceil(sqrt((double)area));",
        "    cout << side << ' ' << side << '\\n';",
        "    return 0;",
        "}",
    ]
)
PROSE = (
    "A shelf packer: pieces are sorted by height and placed left to right in rows of a square "
    "bounding box sized from the total area; simplified: no rotations are tried."
)


def _entry(summary: str):
    archive = Archive.from_seed(ArchiveConfig(rollout_n=2, groups_per_batch=1), make_seed())
    parent = archive.select_parents(0)[0]
    verdict = VerificationResult(0.4, 40.0, True, "valid", "accepted")
    return rollout_entry(
        parent=parent,
        step=0,
        guidance="pack tighter",
        execution_thinking="",
        solution=PROGRAM,
        verification=verdict,
        raw_summary=summary,
        metadata={},
    )


CODE_SUMMARIES = {
    "the whole program": PROGRAM,
    "a fenced program": f"Here it is:\n```cpp\n{PROGRAM}\n```",
    "an unfenced re-indented copy": "\n".join("  " + line.strip() for line in PROGRAM.split("\n")),
    "three quoted lines in prose": (
        "It reads `vector<int> widths(n), heights(n);` then sums with "
        "`for (int i = 0; i < n; ++i) area += 1LL * widths[i] * heights[i];` and prints "
        "`cout << side << ' ' << side << '\\n';`."
    ),
    "a solution tag": "<solution>see above</solution> a shelf packer",
}


@pytest.mark.parametrize("name", sorted(CODE_SUMMARIES))
def test_a_summary_that_carries_code_is_withheld_from_the_guidance_model(name: str) -> None:
    summary = CODE_SUMMARIES[name]
    entry = _entry(summary)
    assert entry.metadata["summary_withheld"]
    assert entry.metadata["withheld_model_summary"] == summary  # kept for audit, not shown
    assert entry.metadata["raw_model_summary"] is None
    assert entry.summary == NO_CANONICAL_SUMMARY
    assert (entry.verifier_raw_score, entry.verifier_reward) == (40.0, 0.4)  # scored as before
    contract, problem = load_task(TASK)
    prompt = guidance_prompt(contract, problem, entry).messages()
    shown = "\n".join(str(m["content"]) for m in prompt)
    for line in PROGRAM.split("\n"):
        if len(line.strip()) >= 16:
            assert line.strip() not in shown, line
    assert NO_CANONICAL_SUMMARY in shown


def test_a_prose_summary_and_short_quotes_still_reach_the_guidance_model() -> None:
    for summary in (PROSE, PROSE + " It reads n, then `int main() {`."):
        entry = _entry(summary)
        assert "summary_withheld" not in entry.metadata
        assert entry.metadata["raw_model_summary"] == summary
        contract, problem = load_task(TASK)
        shown = "\n".join(
            str(m["content"]) for m in guidance_prompt(contract, problem, entry).messages()
        )
        assert summary in shown


def test_the_rule_counts_distinct_quoted_lines() -> None:
    lines = [line.strip() for line in PROGRAM.split("\n") if len(line.strip()) >= 30]
    quotes = [f"it does `{line}` there" for line in lines]
    almost = "; ".join(quotes[: QUOTED_LINES - 1])
    assert summary_code_problem(almost, PROGRAM) is None
    assert summary_code_problem(almost + "; " + quotes[QUOTED_LINES], PROGRAM)
    assert summary_code_problem(PROSE, None) is None
    assert summary_code_problem(None, PROGRAM) is None
