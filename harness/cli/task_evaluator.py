"""`guidance-ttt task new DIR --evaluator EVAL.py --program SEED.py` (or `--openevolve EXAMPLE`):
a task from a Python `evaluate(program_path) -> metrics` function.

The task's judge package (`judge/<id>/`, problem kind `evaluator`, `judges.problems.evaluator`)
holds the evaluator unchanged; the judge runs it on each candidate inside its sandbox with the
task's limits, and the metric named by `--metric` (default `combined_score`) is the raw score, in
the direction `--direction`; the other metrics are kept in the rollout's record
(`verification_artifacts.metrics`). The seed program is copied to `solution/solution.py`; then
`guidance-ttt task seed` records it through a judge and `guidance-ttt task check` checks
everything (docs/adding-a-task.md).

From an OpenEvolve example folder (`--openevolve`): `initial_program.py` is the seed,
`evaluator.py` the evaluator, and its `config.yaml` (or the first `config*.yaml`) gives the task
text (`prompt.system_message`, which the user then edits in `instruction.md`), the time limit
(`evaluator.timeout` per evaluation stage) and the cascade (`evaluator.cascade_evaluation`,
`evaluator.cascade_thresholds`: `evaluate_stage1/2/3` in order, stopping after the first stage
whose metrics fail the next threshold, as OpenEvolve does). A seed with `# EVOLVE-BLOCK-START` /
`# EVOLVE-BLOCK-END` keeps them, and the contract tells the executor to change only the block.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.cli.task_new import plain_line, toml_string, write_files

EVOLVE_START, EVOLVE_END = "# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"
DEFAULT_METRIC = "combined_score"
#: OpenEvolve's defaults (its `EvaluatorConfig`): seconds per stage, cascade on, thresholds.
OPENEVOLVE_TIMEOUT_S = 300
OPENEVOLVE_THRESHOLDS = (0.5, 0.75, 0.9)
DEFAULT_TIME_S = 60
DEFAULT_MEMORY = "2g"
SOURCE_LIMIT = 1 << 20
_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_METRIC = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,79}")


@dataclass(frozen=True)
class EvaluatorTask:
    """What a task from an evaluate() function is written from."""

    problem_id: str
    title: str
    statement: str
    evaluator: str  # the evaluator's source, copied unchanged
    program: str  # the seed program's source
    metric: str = DEFAULT_METRIC
    direction: str = "max"
    cascade: tuple[float, ...] | None = None
    time_s: int = DEFAULT_TIME_S
    memory: str = DEFAULT_MEMORY
    origin: str = "an evaluate() function"
    score_tolerance: float = 0.0  # task.toml's score_rel_tolerance (`guidance-ttt task check`)

    @property
    def evolve_block(self) -> bool:
        """Whether the seed marks the part the executor may change, as OpenEvolve's do."""
        return EVOLVE_START in self.program and EVOLVE_END in self.program


def problem_id_for(directory: Path) -> str:
    """The judge problem id of a new task: its folder's name as a plain name."""
    name = _ID_CHARS.sub("_", directory.resolve().name).strip("._-")[:64]
    return name or "evaluator_task"


def read_source(path: Path, what: str) -> str:
    """A Python source file the user named; ValueError naming the path and the flag otherwise."""
    if not path.is_file():
        raise ValueError(f"{what} {path} is not a file; name an existing Python file")
    data = path.read_bytes()
    if len(data) > SOURCE_LIMIT:
        raise ValueError(f"{what} {path} is over {SOURCE_LIMIT >> 20} MiB; name a Python source")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} {path} is not UTF-8 text; name a Python source") from None


def checked(task: EvaluatorTask) -> EvaluatorTask:
    """`task` once its metric, direction and sources are usable; ValueError naming the flag."""
    if not _METRIC.fullmatch(task.metric):
        raise ValueError(f"--metric {task.metric[:80]!r} is not a metric name, e.g. combined_score")
    if task.direction not in ("max", "min"):
        raise ValueError(f"--direction {task.direction!r}: use max or min")
    if not re.search(r"^def evaluate(_stage1)?\s*\(", task.evaluator, re.MULTILINE):
        raise ValueError(
            "the evaluator defines no evaluate(program_path) (nor OpenEvolve's evaluate_stage1); "
            "--evaluator names a Python file that does"
        )
    return task


def with_tolerance(task: EvaluatorTask, tolerance: float) -> EvaluatorTask:
    """`task` with `--score-tolerance`; ValueError naming the flag unless 0 <= it < 1."""
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"--score-tolerance {tolerance!r}: use a relative tolerance in [0, 1)")
    return replace(task, score_tolerance=tolerance)


def from_files(
    directory: Path,
    evaluator: Path,
    program: Path,
    metric: str = DEFAULT_METRIC,
    direction: str = "max",
    time_s: int | None = None,
) -> EvaluatorTask:
    """A task from `--evaluator` and `--program`: the task text is the user's to write."""
    name = problem_id_for(directory)
    return checked(
        EvaluatorTask(
            problem_id=name,
            title=name.replace("_", " ").capitalize(),
            statement="TODO: what the program computes and what the evaluator rewards, in your "
            "own words: the models see this text and the seed program, never the evaluator.",
            evaluator=read_source(evaluator, "--evaluator"),
            program=read_source(program, "--program"),
            metric=metric,
            direction=direction,
            time_s=time_s or DEFAULT_TIME_S,
            origin=f"the evaluator {evaluator.name}",
        )
    )


def from_openevolve(
    directory: Path,
    example: Path,
    metric: str = DEFAULT_METRIC,
    direction: str = "max",
    time_s: int | None = None,
) -> EvaluatorTask:
    """A task from an OpenEvolve example folder, its files read as they are."""
    from judges.api import load_yaml

    if not example.is_dir():
        raise ValueError(f"--openevolve {example} is not a folder; name an OpenEvolve example")
    configs = [example / "config.yaml", *sorted(example.glob("config*.yaml"))]
    config_path = next((path for path in configs if path.is_file()), None)
    config: Any = {}
    if config_path is not None:
        config = load_yaml(read_source(config_path, "--openevolve"), str(config_path))
    config = config if isinstance(config, dict) else {}
    prompt = config.get("prompt") if isinstance(config.get("prompt"), dict) else {}
    settings = config.get("evaluator") if isinstance(config.get("evaluator"), dict) else {}
    message = prompt.get("system_message")
    title = example.resolve().name.replace("_", " ").capitalize()
    statement = (
        message.strip()
        if isinstance(message, str) and message.strip()
        else f"TODO: what the program computes and what {example.name}'s evaluator rewards."
    )
    cascade = None
    if settings.get("cascade_evaluation", True):
        thresholds = settings.get("cascade_thresholds", OPENEVOLVE_THRESHOLDS)
        if not isinstance(thresholds, list | tuple) or not all(
            isinstance(t, int | float) and not isinstance(t, bool) for t in thresholds
        ):
            raise ValueError(f"{config_path}: evaluator.cascade_thresholds {thresholds!r}")
        cascade = tuple(float(t) for t in thresholds[:2])
    timeout = settings.get("timeout", OPENEVOLVE_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"{config_path}: evaluator.timeout {timeout!r} is not a number of seconds")
    stages = 1 + len(cascade) if cascade else 1
    return checked(
        EvaluatorTask(
            problem_id=problem_id_for(directory),
            title=f"{title} (OpenEvolve example)",
            statement=statement,
            evaluator=read_source(example / "evaluator.py", "--openevolve"),
            program=read_source(example / "initial_program.py", "--openevolve"),
            metric=metric,
            direction=direction,
            cascade=cascade,
            time_s=time_s or int(timeout) * stages,
            origin=f"OpenEvolve's example {example.resolve().name}",
        )
    )


def write_evaluator_task(directory: Path, task: EvaluatorTask) -> list[Path]:
    """Write every file of the task, its judge package and seed program included, into
    `directory` (which must not hold a task yet); returns the files written."""
    if (directory / "task.toml").exists() or (directory / "contract.json").exists():
        raise ValueError(f"{directory} already holds a task; choose a new directory")
    package = f"judge/{task.problem_id}"
    settings = {"metric": task.metric, "cascade": list(task.cascade) if task.cascade else None}
    files = {
        "task.toml": task_toml(directory, task),
        "instruction.md": instruction(task),
        "contract.json": json.dumps(contract(task), indent=2) + "\n",
        "environment/Dockerfile": DOCKERFILE,
        "environment/docker-compose.yaml": compose(task),
        "tests/task_facts.json": json.dumps(facts(task), indent=2) + "\n",
        "tests/score_check.py": SCORE_CHECK,
        "solution/solve.sh": SOLVE_SH,
        "solution/solution.py": task.program,
        f"{package}/config.yaml": package_config(task),
        f"{package}/evaluator.py": task.evaluator,
        f"{package}/testdata/1.in": json.dumps(settings) + "\n",
        "README.md": readme(directory, task),
    }
    return write_files(directory, files)


def limits(task: EvaluatorTask) -> str:
    return f"{task.time_s} s of CPU time and {task.memory[:-1]} GiB of memory"


def package_config(task: EvaluatorTask) -> str:
    return (
        f"# {plain_line(task.title)}: the judge runs evaluator.py's evaluate(program_path) on "
        "each\n# candidate in its sandbox (problem kind `evaluator`); testdata/1.in names the "
        "metric\n# that is the score and the cascade thresholds. Written by `guidance-ttt task "
        "new`.\n"
        f"type: evaluator\nevaluator: evaluator.py\nlanguage: python\ntime: {task.time_s}s\n"
        f"memory: {task.memory}\nn_cases: 1\n"
    )


def task_toml(directory: Path, task: EvaluatorTask) -> str:
    name = directory.resolve().name.replace("_", "-")
    judge_url = "${FRONTIERCS_JUDGE_URL:-http://host.docker.internal:8081}"
    tolerance = (
        f"\n# the evaluator samples: a re-judged seed may differ this much, relatively\n"
        f"score_rel_tolerance = {task.score_tolerance!r}"
        if task.score_tolerance
        else ""
    )
    return f"""# {plain_line(task.title)}, from {plain_line(task.origin)}; written by
# `guidance-ttt task new`. One trial owns a whole Guidance-TTT run; the container only receives
# the best program at /workspace/solution.py, which the verifier re-scores with the judge.
schema_version = "1.4"

[task]
name = {toml_string("guidance-ttt/" + name)}
description = {toml_string(plain_line(task.title))}
keywords = ["evaluator", "python"]

[metadata]
judge = "guidance-ttt-local-judge"
judge_problem_id = {toml_string(task.problem_id)}
solution_path = "/workspace/solution.py"{tolerance}

[agent]
timeout_sec = 604800.0

[verifier]
timeout_sec = 900.0

[verifier.env]
FRONTIERCS_JUDGE_URL = {toml_string(judge_url)}
GUIDANCE_TTT_JUDGE_TOKEN = "${{GUIDANCE_TTT_JUDGE_TOKEN:-}}"
FRONTIERCS_PROBLEM_ID = {toml_string("${FRONTIERCS_PROBLEM_ID:-" + task.problem_id + "}")}

[environment]
cpus = 1
memory_mb = 4096
build_timeout_sec = 600.0
network_mode = "allowlist"
allowed_hosts = ["host.docker.internal"]
"""


def _direction_words(task: EvaluatorTask) -> str:
    return "higher is better" if task.direction == "max" else "lower is better"


def instruction(task: EvaluatorTask) -> str:
    block = (
        f"\nOnly the code between the `{EVOLVE_START}` and `{EVOLVE_END}` lines is yours to "
        "change; everything outside the block stays exactly as it is.\n"
        if task.evolve_block
        else ""
    )
    return (
        f"# {task.title}\n\n{task.statement}\n\n## How a program is judged\n\n"
        "The solution is one Python module. The task's evaluator loads or runs it and returns "
        f"metrics; the metric `{task.metric}` is the score ({_direction_words(task)}). Every "
        f"evaluation runs in the judge's sandbox within {limits(task)}, with the standard "
        f"library and numpy.\n{block}"
    )


def contract(task: EvaluatorTask) -> dict[str, str]:
    block = (
        f" Change only the code between the `{EVOLVE_START}` and `{EVOLVE_END}` lines and keep "
        "every line outside that block exactly as in the parent program (the evaluator calls "
        "what the rest of the file defines)."
        if task.evolve_block
        else " Keep the functions and names the parent program defines: the evaluator calls them."
    )
    verb = "Maximise" if task.direction == "max" else "Minimise"
    return {
        "solution_language": "python",
        "solution_contract": "Return one complete Python 3 module in a single file; it may "
        "import numpy and the standard library only. The task's evaluator loads or runs it "
        f"within {limits(task)} in the judge's sandbox (no network, no files outside /tmp)."
        + block,
        "mechanism_constraint": "Every mechanism must be computed by the program within the "
        "limits, not pasted in as results copied from elsewhere; no reading files or the "
        "network, and no tampering with the evaluator or its measurements.",
        "objective": f"{verb} the metric {task.metric} that the task's evaluator reports "
        f"({_direction_words(task)}).",
        "raw_score_label": task.metric,
        "score_direction": task.direction,
        "judge_problem_id": task.problem_id,
        "verifier": "value",
    }


def facts(task: EvaluatorTask) -> dict[str, str]:
    return {
        "judge_problem_id": task.problem_id,
        "solution_language": "python",
        "solution_path": "/workspace/solution.py",
        "verifier": "value",
        "score_direction": task.direction,
    }


def compose(task: EvaluatorTask) -> str:
    return (
        "# Merged by Harbor over its base compose file: passes the judge's address into the "
        "container.\nservices:\n  main:\n    environment:\n"
        "      FRONTIERCS_JUDGE_URL: ${FRONTIERCS_JUDGE_URL:-http://host.docker.internal:8081}\n"
        f"      FRONTIERCS_PROBLEM_ID: ${{FRONTIERCS_PROBLEM_ID:-{task.problem_id}}}\n"
        '    extra_hosts:\n      - "host.docker.internal:host-gateway"\n'
    )


def readme(directory: Path, task: EvaluatorTask) -> str:
    return f"""# {task.title}

Written by `guidance-ttt task new` from {task.origin}. The judge package
`judge/{task.problem_id}/` holds the evaluator unchanged; the metric `{task.metric}` is the score
({_direction_words(task)}). What is left to do (docs/adding-a-task.md):

1. Read `instruction.md`, the only problem text the models see (they never see the evaluator),
   and put it in your own words.
2. Start a judge that serves the task (`guidance-ttt judge --task {directory} --port 8081 &`)
   and record the seed: `guidance-ttt task seed {directory} solution/solution.py --summary
   "what the seed does, without code"`.
3. `guidance-ttt task check {directory}` checks every file; `guidance-ttt rehearse --task
   {directory}` rehearses the task on this machine.
"""


DOCKERFILE = (
    "# The trial container: it only holds the final program (/workspace/solution.py) and runs "
    "the\n# verifier, which re-submits it to the judge (the judge runs the evaluator in its "
    'sandbox).\nFROM python:3.12-slim\n\nRUN pip install --no-cache-dir "httpx>=0.27,<1" \\\n'
    "    && mkdir -p /workspace /logs/verifier\n\nWORKDIR /workspace\n"
)

SOLVE_SH = (
    "#!/usr/bin/env bash\n# Harbor's oracle: install the seed program as the trial's answer\n"
    "# (SOLUTION_DEST overrides the destination, for tests outside a container).\n"
    'set -euo pipefail\nhere="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
    'dest="${SOLUTION_DEST:-/workspace/solution.py}"\nmkdir -p "$(dirname "$dest")"\n'
    'cp "$here/solution.py" "$dest"\n'
)

SCORE_CHECK = '''"""Is a case's certified value a real evaluator verdict? (a task from evaluate())

The judge runs the task's evaluator in its sandbox and certifies the case with the line

    ok Value: <metric>

(problem kind `evaluator`); the case then has ratio 1 and `value` = that metric. A case counts
as certified only when that line is its message and the recorded value is the printed one.
Standard library only: the harness loads this file by path and the in-container verifier
imports it. Written by `guidance-ttt task new`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_VERDICT = re.compile(r"ok Value: (?P<value>[0-9.eE+-]+)", re.ASCII)


def check_case(case: Mapping[str, Any]) -> str | None:
    """What is inconsistent about one judged case, or None. Never raises."""
    ratio = case.get("scoreRatio")
    if not isinstance(ratio, int | float) or isinstance(ratio, bool) or not ratio > 0:
        return None
    msg = case.get("msg")
    found = _VERDICT.fullmatch(msg.strip()) if isinstance(msg, str) else None
    if found is None:
        shown = msg[:120] if isinstance(msg, str) else msg
        return f"ratio {ratio!r} does not come from the evaluator's 'ok Value: ...' line: {shown!r}"
    try:
        printed = float(found["value"])
    except ValueError:
        return f"the evaluator's value {found['value']!r} is not a number"
    value = case.get("value")
    if not isinstance(value, float) or not math.isfinite(value) or value != printed:
        return f"recorded value {value!r} is not the evaluated metric {printed!r}"
    return None
'''
