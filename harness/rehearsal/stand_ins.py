"""Scripted stand-ins for the two models, for runs on a machine without GPUs or model access.

Used by `guidance-ttt rehearse` and the test suite's CPU rehearsal; neither generates anything:

* the guidance model (`GuidanceScript`, served as Reef's upstream): call n answers with a
  thinking line and one `<guidance>` block naming the variant `GUIDANCE_CYCLE[n % 8]`, or
  with two blocks (malformed, a scripted failure) when n is in `malformed`;
* the executor (`executor_reply`; `seed_edits` for any task): reads which variant the guidance
  names (without guidance, in the arms that call no guidance model, the request's sampling
  `seed` picks one) and answers with that edit of the parent program its prompt shows — the
  shelf packer's strip widths made finer or wider (never worse: best-so-far rises) or coarser
  (worse), the parent annotated, a compile error, or the scripted failures: an answer without a
  `<solution>`, an HTTP 400. Every program is compiled and judged for real.

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
from harness.settings.paths import FROZEN_TEMPLATE, REPO_ROOT


def _template_task() -> str:
    """The task the repository's serve-frozen.yaml selects (the rehearsal's template)."""
    document = yaml.safe_load(FROZEN_TEMPLATE.read_text(encoding="utf-8"))
    return str(document["recipe"]["config"]["guidance-ttt"]["task"])


#: The task directory the rehearsal runs (serve-frozen.yaml's task; the scripted executor's
#: variants edit that task's shelf-packer seed, so the template names the Polyomino task).
TASK_DIR = REPO_ROOT / "harbor" / _template_task()
#: The seed record the scripted variants edit: the task's shelf packer (its `harness.seed`).
SEED_RECORD = "solution/shelf/seed.json"
GUIDANCE_MODEL = "scripted-guidance-stand-in"
#: The rehearsal's third guidance call answers with two <guidance> blocks: the display and the
#: records show how a malformed answer is handled (reward 0, executor skipped, still reported).
MALFORMED_CALL = 2
EXECUTOR_MODEL = "scripted-executor-stand-in"


def task_dir() -> Path:
    """The rehearsal's task directory (the project's, with its judged seeds)."""
    return TASK_DIR


def seed_source() -> str:
    """The program of `SEED_RECORD`, which every executor variant edits; a run that uses the
    stand-ins starts from that seed (`harness.seed: solution/shelf/seed.json`)."""
    return (task_dir() / SEED_RECORD).with_name("solution.cpp").read_text()


# --- the executor: real variants of the parent ---------------------------------------------

#: The shelf packer's parameters: it tries strip widths `A + D * step` for step = 0..S.
_STEPS = re.compile(r"step <= (\d+)")
_FACTOR = re.compile(r"factor = ([0-9.]+) \+ ([0-9.eE-]+) \* step")
_FENCE = re.compile(r"```(?:cpp|c\+\+|cxx|python|py)\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def _widths(source: str) -> tuple[int, float, float] | None:
    """The shelf packer's (S, A, D), or None when the program is not of that family."""
    steps, factor = _STEPS.search(source), _FACTOR.search(source)
    if steps is None or factor is None:
        return None
    return int(steps[1]), float(factor[1]), float(factor[2])


def _with_widths(source: str, steps: int, start: float, delta: float) -> str:
    source = _STEPS.sub(f"step <= {steps}", source, count=1)
    return _FACTOR.sub(f"factor = {start:.10g} + {delta:.10g} * step", source, count=1)


def _finer(source: str) -> str:
    """Twice as many strip widths over the same range: a superset, never worse."""
    steps, start, delta = _widths(source) or (0, 0.0, 0.0)
    return _with_widths(source, 2 * steps, start, delta / 2)


def _wider(source: str) -> str:
    """Four more widths below the range (above when it would reach 0): a superset."""
    steps, start, delta = _widths(source) or (0, 0.0, 0.0)
    lower = start - 4 * delta
    return _with_widths(source, steps + 4, lower if lower > 0.05 else start, delta)


def _fewer(source: str) -> str:
    """Every fourth width only: a subset, usually worse."""
    steps, start, delta = _widths(source) or (0, 0.0, 0.0)
    return _with_widths(source, max(2, steps // 4), start, 4 * delta)


#: Each variant is a small, honest source edit of the parent; the judge scores it for real. The
#: three parameter edits change the shelf packer's strip widths (the parent's own algorithm);
#: on a program without those parameters they fall back to `annotated`.
PARAMETER_VARIANTS: dict[str, Callable[[str], str]] = {
    "finer_widths": _finer,
    "wider_range": _wider,
    "fewer_widths": _fewer,
}
VARIANTS: dict[str, Callable[[str], str]] = {
    **PARAMETER_VARIANTS,
    "annotated": lambda s: "// variant: the parent, annotated\n" + s,
    "broken": lambda s: s + "\n#error scripted compile error (the stand-in's broken variant)\n",
}
#: Executor answers that are not programs.
NO_SOLUTION, REFUSED = "no_solution", "refused"
#: What the stand-in guidance asks for, call by call: two improving edits, a worsening one, a
#: no-op, a compile error, an answer without a program, a refusal (8 answers per cycle).
GUIDANCE_CYCLE = (
    "finer_widths",
    "wider_range",
    "fewer_widths",
    "annotated",
    "finer_widths",
    "broken",
    NO_SOLUTION,
    REFUSED,
)
_VARIANT_IN_GUIDANCE = re.compile(r"<guidance>.*?variant (\w+)", re.DOTALL)


def parent_program(request: RecordedRequest, fallback: str) -> str:
    """The parent's program as the executor's prompt shows it (the first code fence, inside
    `<parent_code>` when the prompt has one; later fences are the answer format), else
    `fallback`."""
    user = request.body["messages"][-1]["content"]
    start = user.find("<parent_code>")
    fences = _FENCE.findall(user[start:] if start >= 0 else user)
    return fences[0].rstrip("\n") + "\n" if fences else fallback


def apply_variant(name: str, program: str, comment: str = "//") -> tuple[str, str]:
    """`program` edited by variant `name`, and the summary line of what changed. A parameter
    edit on a program without the parameters, and the compile error on one without its
    target, annotate the parent instead (and say so)."""
    if name in PARAMETER_VARIANTS and _widths(program) is not None:
        return PARAMETER_VARIANTS[name](program), f"applies {name.replace('_', ' ')}"
    if name == "broken":
        broken = (
            VARIANTS["broken"](program)
            if comment == "//"
            else program + "\nscripted syntax error (the stand-in's broken variant\n"
        )
        return broken, "adds a scripted compile error"
    note = f"{comment} variant {name}: the parent, annotated (nothing to change for the stand-in)"
    return f"{note}\n{program}", "keeps the parent unchanged, with one comment added"


def executor_reply(request: RecordedRequest) -> Reply:
    """The stand-in executor: reads which variant the guidance asks for and answers with that
    edit of the parent program in its prompt (the seed's program when none is shown)."""
    return _reply(request, parent_program(request, seed_source()), "cpp", "//")


def seed_edits(program: str, fence: str) -> Callable[[RecordedRequest], Reply]:
    """A stand-in executor for any task: the same scripted variants, applied to the parent in
    the prompt (else `program`, the task's seed), in the task's language (`fence`)."""
    comment = "//" if fence == "cpp" else "#"

    def reply(request: RecordedRequest) -> Reply:
        return _reply(request, parent_program(request, program), fence, comment)

    return reply


def _reply(request: RecordedRequest, parent: str, fence: str, comment: str) -> Reply:
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
        return Reply(status=400, error="scripted failure: the stand-in executor refuses this one")
    if name == NO_SOLUTION:
        summary = "Scripted failure: the stand-in executor answers without a program."
        return Reply(content=f"I could not write the program.\n<summary>\n{summary}\n</summary>")
    program, change = apply_variant(name, parent, comment)
    summary = (
        f"The candidate keeps the parent's approach and {change}; everything else is kept "
        "as it was."
    )
    return Reply(
        content=f"<solution>\n```{fence}\n{program}\n```\n</solution>\n\n"
        f"<summary>\n{summary}\n</summary>",
        reasoning=f"Apply {name} to the parent.",
        usage={"prompt_tokens": 900, "completion_tokens": 700, "total_tokens": 1600},
    )


class GuidanceScript:
    """The stand-in guidance model: call n answers with a thinking line and one guidance block
    naming `GUIDANCE_CYCLE[n % 8]`, or with two blocks (malformed) when n is in `malformed`."""

    def __init__(self, malformed: Sequence[int] = ()) -> None:
        self.malformed = set(malformed)
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            n = self.calls
            self.calls += 1
        if n in self.malformed:  # a scripted failure: two blocks
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
