"""Scripted stand-ins for the two models, for runs on a machine without GPUs or model access.

Used by `guidance-ttt rehearse` and the test suite's CPU rehearsal; neither generates anything:

* the guidance model (`GuidanceScript`, served as Reef's upstream): call n answers with a
  thinking line and one `<guidance>` block naming the seed variant `GUIDANCE_CYCLE[n % 6]`, or
  with two blocks (malformed) when n is in `malformed`;
* the executor (`executor_reply`): reads which variant the guidance names (without guidance, the
  arms that call no guidance model, the request's sampling `seed` picks one) and answers with it —
  a real C++ variant of the task's seed program (small source edits, each compiled and judged
  for real), a compile error, an answer without a `<solution>`, or an HTTP 400.

The model names they answer under (`GUIDANCE_MODEL`, `EXECUTOR_MODEL`) say what they are, so
every record of a rehearsal is labelled as such.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from harness.rehearsal.openai_server import RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[2]


def _template_task() -> str:
    """The task the repository's serve-frozen.yaml selects (the rehearsal's template)."""
    document = yaml.safe_load((REPO / "serve-frozen.yaml").read_text(encoding="utf-8"))
    return str(document["recipe"]["config"]["guidance-ttt"]["task"])


#: The task directory the rehearsal runs (serve-frozen.yaml's task; the scripted executor's
#: variants edit that task's shelf-packer seed, so the template names the Polyomino task).
TASK_DIR = REPO / "harbor" / _template_task()
#: The seed record the scripted variants edit: the task's shelf packer (its `harness.seed`).
SEED_RECORD = "solution/shelf/seed.json"
GUIDANCE_MODEL = "scripted-guidance-stand-in"
EXECUTOR_MODEL = "scripted-executor-stand-in"


def task_dir() -> Path:
    """The rehearsal's task directory (the project's, with its judged seeds)."""
    return TASK_DIR


def seed_source() -> str:
    """The program of `SEED_RECORD`, which every executor variant edits; a run that uses the
    stand-ins starts from that seed (`harness.seed: solution/shelf/seed.json`)."""
    return (task_dir() / SEED_RECORD).with_name("solution.cpp").read_text()


# --- the executor: real C++ variants of the seed -----------------------------------------------


def _edit(source: str, old: str, new: str) -> str:
    if old not in source:
        raise ValueError(f"the seed program no longer contains {old!r}; update the variant")
    return source.replace(old, new, 1)


#: Each variant is a small, honest source edit of the seed; the judge scores it for real.
VARIANTS: dict[str, Callable[[str], str]] = {
    "fewer_widths": lambda s: _edit(s, "step <= 16", "step <= 3"),
    "wider_range": lambda s: _edit(s, "0.8 + 0.05 * step", "0.6 + 0.1 * step"),
    "annotated": lambda s: "// variant: the parent, annotated\n" + s,
    "broken": lambda s: _edit(s, "return best;", "return best"),  # a compile error
}
#: Executor answers that are not programs.
NO_SOLUTION, REFUSED = "no_solution", "refused"
GUIDANCE_CYCLE = ("fewer_widths", "wider_range", "annotated", "broken", NO_SOLUTION, REFUSED)
_VARIANT_IN_GUIDANCE = re.compile(r"<guidance>.*?variant (\w+)", re.DOTALL)


def executor_reply(request: RecordedRequest) -> Reply:
    """The stand-in executor: reads which variant the guidance asks for and answers with it."""
    user = request.body["messages"][-1]["content"]
    found = _VARIANT_IN_GUIDANCE.search(user)
    seed = request.body.get("seed")
    if found:
        name = found[1]
    elif isinstance(seed, int):  # no guidance names one (the unguided arms): the sampling seed
        name = GUIDANCE_CYCLE[seed % len(GUIDANCE_CYCLE)]
    else:
        name = "annotated"
    if name == REFUSED:
        return Reply(status=400, error="the test executor refuses this request")
    summary = (
        "The candidate keeps the parent's shelf packing of oriented bounding boxes and applies "
        f"the requested change ({name.replace('_', ' ')}); everything else is kept as it was."
    )
    if name == NO_SOLUTION:
        return Reply(content=f"I could not write the program.\n<summary>\n{summary}\n</summary>")
    program = VARIANTS[name](seed_source())
    return Reply(
        content=f"<solution>\n```cpp\n{program}\n```\n</solution>\n\n<summary>\n{summary}\n</summary>",
        reasoning=f"Apply {name} to the parent.",
        usage={"prompt_tokens": 900, "completion_tokens": 700, "total_tokens": 1600},
    )


class GuidanceScript:
    """The stand-in guidance model: call n answers with a thinking line and one guidance block
    naming `GUIDANCE_CYCLE[n % 6]`, or with two blocks (malformed) when n is in `malformed`."""

    def __init__(self, malformed: Sequence[int] = ()) -> None:
        self.malformed = set(malformed)
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            n = self.calls
            self.calls += 1
        if n in self.malformed:
            return Reply(content="<guidance>spiral</guidance>\n<guidance>or rows</guidance>")
        variant = GUIDANCE_CYCLE[n % len(GUIDANCE_CYCLE)]
        return Reply(
            content=(
                "Thinking: the summary says boxes go on shelves.\n"
                f"<guidance>Direction {n}: try the variant {variant} of the shelf strategy, "
                "keeping the orientation rule.</guidance>"
            ),
            usage={"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500},
        )
