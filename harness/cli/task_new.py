"""`guidance-ttt task new DIR [--frontiercs CHECKOUT PROBLEM]`: every file a task needs.

From a FrontierCS problem (its `config.yaml` and `statement.txt`) the files are filled in: the
problem id, the limits, the kind (a `default` problem's cases carry the program's output; an
`interactive` one's do not, so its `score_check.py` asks for none), the statement as
`instruction.md`. Without `--frontiercs` a skeleton with the same files is written, its texts
marked `TODO`. Either way the statement is the user's to edit (the models see nothing else of
the problem), and the seed program, `solution/solution.<ext>`, is the user's to write; then
`guidance-ttt task seed` records it and `guidance-ttt task check` checks everything
(docs/adding-a-task.md). The verifier files (`tests/test.sh`, `tests/verify.py`) are copied
unchanged from a shipped task, as every task carries the same ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.settings.task_dirs import TASK_ROOTS

VERIFIER_FILES = ("tests/test.sh", "tests/verify.py")
TEMPLATES = Path(__file__).with_name("task_templates")
TODO = "TODO"


@dataclass(frozen=True)
class Problem:
    """What a new task is filled from: a FrontierCS problem, or a skeleton's placeholders."""

    problem_id: str
    title: str
    kind: str  # default | interactive
    time: str
    memory: str
    cases: int | None
    statement: str

    @property
    def interactive(self) -> bool:
        return self.kind == "interactive"


def frontiercs_problem(checkout: Path, problem_id: str) -> Problem:
    """Problem `problem_id` of a FrontierCS checkout (its `algorithmic/problems`, its
    `algorithmic/` folder, or a folder of problems). ValueError in one line naming the path
    when absent, or when the folder breaks the judge's rules for problem folders
    (`judges.api`: no link out of the folder, `checker:`/`interactor:` inside it,
    a statement of at most 1 MiB, config.yaml's aliases bounded)."""
    from judges.api import member, read_config, read_statement

    plain_id(problem_id)
    roots = (checkout / "algorithmic" / "problems", checkout / "problems", checkout)
    folder = next((root / problem_id for root in roots if (root / problem_id).is_dir()), None)
    if folder is None or not (folder / "config.yaml").is_file():
        looked = ", ".join(str(root / problem_id) for root in roots)
        raise ValueError(f"no FrontierCS problem {problem_id!r} (looked in {looked})")
    config, config_path = read_config(folder)
    for key in ("checker", "interactor"):
        if config.get(key):
            member(folder, config[key], key, str(config_path))
    statement = read_statement(folder) or ""
    first = next((line for line in statement.splitlines() if line.strip()), "")
    title = re.sub(r"^\s*Problem\s*\w*\s*[:.]\s*", "", first).strip()
    title = plain_line(title) or f"Problem {problem_id}"
    kind = str(config.get("type", "default")).strip()
    if kind not in ("default", "interactive"):
        raise ValueError(
            f"{config_path}: type {kind[:40]!r}; task new handles default and interactive "
            "FrontierCS problems"
        )
    return Problem(
        problem_id=problem_id,
        title=title,
        kind=kind,
        time=_limit(config, "time", "1s", config_path),
        memory=_limit(config, "memory", "256m", config_path),
        cases=_case_count(config.get("subtasks")),
        statement=statement.strip(),
    )


#: A problem id is a plain name: it names a folder of the checkout and is written into the
#: task's TOML, JSON, YAML and Python files.
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TITLE_CHARS = 200


def plain_id(problem_id: str) -> str:
    """`problem_id` when it is a plain name (letters, digits, `_`, `.`, `-`; no path);
    ValueError naming it otherwise."""
    if not _PLAIN_ID.fullmatch(problem_id) or problem_id in (".", ".."):
        raise ValueError(
            f"problem id {problem_id[:80]!r} is not a plain name (letters, digits, '_', '.', "
            "'-'; at most 64 characters), e.g. 5"
        )
    return problem_id


def plain_line(text: str) -> str:
    """`text` as one line of at most 200 printable characters (control characters become
    spaces), fit for a title in a comment, a docstring or a heading."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return line if len(line) <= _TITLE_CHARS else line[: _TITLE_CHARS - 1] + "…"


def _limit(config: dict, key: str, default: str, where: Path) -> str:
    value = config.get(key, default)
    text = plain_line(str(value))
    if isinstance(value, bool) or not isinstance(value, str | int | float) or len(text) > 16:
        raise ValueError(f"{where}: {key} {text[:40]!r} is not a limit like {default!r}")
    return text


def _case_count(subtasks: object) -> int | None:
    if not isinstance(subtasks, list):
        return None
    counts = (s.get("n_cases") for s in subtasks if isinstance(s, dict))
    return (
        sum(n for n in counts if isinstance(n, int) and not isinstance(n, bool) and n > 0) or None
    )


def toml_string(text: str) -> str:
    """`text` as a TOML basic string, quotes included: backslashes, quotes and control
    characters escaped (a LaTeX `\\alpha` stays `\\alpha` once read)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def skeleton_problem(problem_id: str, interactive: bool = False) -> Problem:
    """A skeleton's placeholders: every text the user must write says TODO. ValueError when
    `problem_id` is not a plain name (`plain_id`)."""
    return Problem(
        problem_id=plain_id(problem_id),
        title=f"{TODO}: the problem's name",
        kind="interactive" if interactive else "default",
        time="1s",
        memory="256m",
        cases=None,
        statement=f"{TODO}: the complete problem statement in your own words: input, output, "
        "validity rules, scoring, limits, an example.",
    )


def write_task(directory: Path, problem: Problem) -> list[Path]:
    """Write every file of a task into `directory` (which must not hold a task yet); returns
    the files written. The seed program is not written: it is the user's."""
    if (directory / "task.toml").exists() or (directory / "contract.json").exists():
        raise ValueError(f"{directory} already holds a task; choose a new directory")
    name = directory.resolve().name
    files = {
        "task.toml": task_toml(name, problem),
        "instruction.md": instruction(problem),
        "contract.json": json.dumps(contract(problem), indent=2) + "\n",
        "environment/Dockerfile": dockerfile(),
        "environment/docker-compose.yaml": compose(problem),
        "tests/task_facts.json": json.dumps(facts(problem), indent=2) + "\n",
        "tests/score_check.py": score_check(problem),
        "solution/solve.sh": solve_sh(),
        "README.md": readme(directory, problem),
    }
    return write_files(directory, files)


def write_files(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write a task's `files` (relative path → text) and the shared verifier files into
    `directory`, shell scripts executable; returns the files written."""
    source = verifier_source()
    every = {
        **files,
        **{name: (source / name).read_text(encoding="utf-8") for name in VERIFIER_FILES},
    }
    written = []
    for relative, text in every.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if relative.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


def verifier_source() -> Path:
    """A shipped task, whose verifier files every task carries unchanged."""
    for root in TASK_ROOTS:
        for task in sorted(root.glob("*")) if root.is_dir() else ():
            if all((task / name).is_file() for name in VERIFIER_FILES):
                return task
    raise ValueError("no shipped task to copy tests/test.sh and tests/verify.py from")


def task_toml(name: str, problem: Problem) -> str:
    """task.toml; every value from the problem or the directory is a TOML string
    (`toml_string`), and the title in its comment is one plain line (`plain_line`)."""
    pid = problem.problem_id
    judge_url = "${FRONTIERCS_JUDGE_URL:-http://host.docker.internal:8081}"
    heading = f"{plain_line(problem.title)} (FrontierCS problem {pid})"
    return f"""# {heading}, written by `guidance-ttt task new`.
# One trial owns a whole Guidance-TTT run; the container only receives the best program and
# the verifier (tests/test.sh) re-scores it against the judge.
schema_version = "1.4"

[task]
name = {toml_string("guidance-ttt/" + name.replace("_", "-"))}
description = {toml_string(plain_line(problem.title))}
keywords = ["frontier-cs", "algorithmic", "c++"]

[metadata]
judge = "frontiercs-algorithmic"
judge_problem_id = {toml_string(pid)}
solution_path = "/workspace/solution.cpp"

[agent]
timeout_sec = 604800.0

[verifier]
timeout_sec = 900.0

[verifier.env]
FRONTIERCS_JUDGE_URL = {toml_string(judge_url)}
FRONTIERCS_PROBLEM_ID = {toml_string("${FRONTIERCS_PROBLEM_ID:-" + pid + "}")}

[environment]
cpus = 1
memory_mb = 4096
build_timeout_sec = 600.0
network_mode = "allowlist"
allowed_hosts = ["host.docker.internal"]
"""


def instruction(problem: Problem) -> str:
    judged = (
        "an interactive program: it talks to the judge's interactor through standard input and "
        "output, and must flush after every line it writes"
        if problem.interactive
        else "a program that reads one test case from standard input and writes its answer to "
        "standard output"
    )
    cases = f" on {problem.cases} test cases" if problem.cases else ""
    return (
        f"# {problem.title}\n\n{problem.statement}\n\n## How a program is judged\n\n"
        f"The solution is {judged}. It is compiled as C++17 and run{cases} with a time limit of "
        f"{problem.time} and a memory limit of {problem.memory} per case. Each case gets a ratio "
        "in [0, 1]; the score is 100 × the mean ratio.\n"
    )


def contract(problem: Problem) -> dict[str, str]:
    limits = f"within {problem.time} and {problem.memory} per case"
    if problem.interactive:
        io = (
            "talks to the judge's interactor: read its messages from standard input, write "
            "queries and answers to standard output exactly as the interaction protocol says, "
            "and flush after every line (fflush(stdout) or std::endl)"
        )
    else:
        io = "reads one test case from standard input and writes its answer to standard output"
    return {
        "solution_language": "cpp",
        "solution_contract": f"One complete C++17 program (compiled by the judge with g++ -O2) "
        f"that {io}, {limits}. No files, no network.",
        "mechanism_constraint": "The mechanism must be an algorithm the program carries out "
        "within the limits on every input; no answers hard-coded for particular test files.",
        "objective": f"Maximise the score of {problem.title}: the judge gives each case a "
        "ratio in [0, 1] as the statement's scoring section says, and the score is 100 × the "
        "mean ratio over the cases.",
        "raw_score_label": "Score",
        "score_direction": "max",
        "judge_problem_id": problem.problem_id,
        "verifier": "frontiercs",
    }


def facts(problem: Problem) -> dict[str, str]:
    return {
        "judge_problem_id": problem.problem_id,
        "solution_language": "cpp",
        "solution_path": "/workspace/solution.cpp",
        "verifier": "frontiercs",
        "score_direction": "max",
    }


def score_check(problem: Problem) -> str:
    template = (TEMPLATES / "score_check.py.tmpl").read_text(encoding="utf-8")
    output_rule = (
        ""
        if problem.interactive
        else " A default problem's case also carries the program's output (a crashed run has none)."
    )
    return template.format(
        title=_docstring_safe(plain_line(problem.title)),
        problem_id=problem.problem_id,
        kind=problem.kind,
        verdict_source="interactor" if problem.interactive else "checker",
        output_rule=output_rule,
        has_output=not problem.interactive,
    )


def dockerfile() -> str:
    return (
        "# The trial container: it only holds the final program (/workspace/solution.cpp) and "
        "runs the\n# verifier, which re-submits it to the judge (the judge compiles and runs "
        'it).\nFROM python:3.12-slim\n\nRUN pip install --no-cache-dir "httpx>=0.27,<1" \\\n'
        "    && mkdir -p /workspace /logs/verifier\n\nWORKDIR /workspace\n"
    )


def compose(problem: Problem) -> str:
    return (
        "# Merged by Harbor over its base compose file: passes the judge's address into the "
        "container.\nservices:\n  main:\n    environment:\n"
        "      FRONTIERCS_JUDGE_URL: ${FRONTIERCS_JUDGE_URL:-http://host.docker.internal:8081}\n"
        f"      FRONTIERCS_PROBLEM_ID: ${{FRONTIERCS_PROBLEM_ID:-{problem.problem_id}}}\n"
        '    extra_hosts:\n      - "host.docker.internal:host-gateway"\n'
    )


def solve_sh() -> str:
    return (
        "#!/usr/bin/env bash\n# Harbor's oracle: install the seed program as the trial's answer\n"
        "# (SOLUTION_DEST overrides the destination, for tests outside a container).\n"
        'set -euo pipefail\nhere="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
        'dest="${SOLUTION_DEST:-/workspace/solution.cpp}"\nmkdir -p "$(dirname "$dest")"\n'
        'cp "$here/solution.cpp" "$dest"\n'
    )


def readme(directory: Path, problem: Problem) -> str:
    return f"""# {problem.title}

Written by `guidance-ttt task new` (FrontierCS problem {problem.problem_id}, {problem.kind}).
What is left to do (docs/adding-a-task.md):

1. Read `instruction.md`, the only problem text the models see, and put it in your own words
   (it starts as the FrontierCS statement).
2. Write the seed program `solution/solution.cpp`: simple, valid on every case, deterministic.
3. Start a judge that serves problem {problem.problem_id}
   (`guidance-ttt judge --frontiercs <checkout> --port 8081 &`) and record the seed:
   `guidance-ttt task seed {directory} solution/solution.cpp --summary-file SUMMARY`.
4. `guidance-ttt task check {directory}` checks every file; `guidance-ttt rehearse --task
   {directory} STATE` rehearses the task on this machine.
"""
