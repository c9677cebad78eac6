"""`guidance-ttt task new --evaluator/--openevolve`: a task from a Python evaluate() function.

One scenario on an evaluator written here (no download): `task new --evaluator --program` →
the real local judge serving the task's own package → `task seed` → `task check`; the same judge
then gives a clear invalid verdict for an evaluation that returns NaN, raises, hangs past the
task's limit or prints 100 MB, and still serves a good program afterwards; `rehearse --task`;
and a frozen `guidance-ttt run` on the repository's serve-frozen.yaml with only the task (and
the Reef port) changed and no `--set`: its own judge serves the new task and its preflight
judges the seed as that task, against strict OpenAI stand-ins for both models.

OpenEvolve's published examples, read as they are from `.upstream/openevolve/examples` (an
ignored folder; skipped with the fetch command when absent): `task new --openevolve`, `task
seed`, `task check`, `rehearse --task` and the same frozen run on three of different kinds.
Real: the CLI, the judge and its sandbox, `reef serve`, the run loop. Stand-ins: the models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from judge_fakes import LocalJudge

from harness import results
from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.rehearsal.openai_server import OpenAIFixture
from harness.rehearsal.reef_process import free_port
from harness.rehearsal.stand_ins import GUIDANCE_MODEL, GuidanceScript, seed_edits
from harness.storage.store import read_committed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
OPENEVOLVE = REPO / ".upstream" / "openevolve" / "examples"
FETCH = (
    "git clone --depth 1 https://github.com/codelion/openevolve .upstream/openevolve "
    "(in the repository root)"
)
SUMMARY = "Returns a fixed guess; the evaluator rewards guesses near 3."

EVALUATOR = '''"""Scores solve(): the closer to 3, the better; some answers test the judge."""
import importlib.util
import sys


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("program", program_path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    answer = program.solve()
    if answer == "nan":
        return {"combined_score": float("nan")}
    if answer == "print":
        for _ in range(100):
            sys.stdout.write("x" * (1 << 20))
    return {"combined_score": 1.0 / (1.0 + (answer - 3.0) ** 2), "answer": answer}
'''
SEED = "def solve():\n    return 1.0\n"
#: Programs the judge must refuse clearly (the verdict's detail names why), and keep serving.
REFUSED = {
    "nan": ("def solve():\n    return 'nan'\n", "'combined_score' is nan, not a finite number"),
    "raises": ("def solve():\n    raise ValueError('no answer')\n", "ValueError: no answer"),
    "hangs": ("def solve():\n    while True:\n        pass\n", "Time Limit Exceeded"),
    "prints": ("def solve():\n    return 'print'\n", "printed"),
}


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def passed(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout


def frozen_run(task: Path, root: Path) -> tuple[Path, str]:
    """`guidance-ttt run` on the user's copy of serve-frozen.yaml, in which only the task and a
    free Reef port are changed (no `--set`), one step of 1×2 rollouts against strict OpenAI
    stand-ins for both models, with the run's own judge; its state directory and output."""
    document = yaml.safe_load((REPO / "serve-frozen.yaml").read_text())
    document["recipe"]["config"]["guidance-ttt"]["task"] = str(task)
    document["reef"]["port"] = free_port()
    config = root / "serve-frozen.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS_"))
    }
    env.update(GUIDANCE_TTT_EXECUTOR="openai_compatible", GUIDANCE_TTT_GUIDANCE_DIALECT="openai")
    seed = (task / "solution" / "solution.py").read_text()
    with (
        OpenAIFixture(GuidanceScript(), model=GUIDANCE_MODEL, mode="strict") as guidance,
        OpenAIFixture(seed_edits(seed, "python"), model="executor", mode="strict") as executor,
    ):
        state = root / "frozen"
        done = cli(
            "run", "--config", str(config), "--state-dir", str(state),
            "--guidance-url", guidance.base_url, "--guidance-model", GUIDANCE_MODEL,
            "--executor-url", executor.v1_url, "--executor-model", "executor",
            "--steps", "1", "--groups", "1", "--rollouts", "2", cwd=root, env=env,
        )  # fmt: skip
        out = passed(done)
        assert guidance.refused == [] and executor.refused == []
    return state, out


@dataclass
class EvaluatorTask:
    root: Path
    task: Path
    judge: LocalJudge


@pytest.fixture(scope="module")
def evaluator_task(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvaluatorTask]:
    root = tmp_path_factory.mktemp("evaluator")
    (root / "evaluate_guess.py").write_text(EVALUATOR)
    (root / "seed.py").write_text(SEED)
    task = root / "tasks" / "guess_three"
    passed(
        cli(
            "task", "new", str(task), "--evaluator", "evaluate_guess.py",
            "--program", "seed.py", "--time", "2", cwd=root,
        )
    )  # fmt: skip
    with LocalJudge(root / "judge", "--task", str(task)) as judge:
        yield EvaluatorTask(root, task, judge)


def test_task_new_writes_a_task_whose_package_holds_the_evaluator(
    evaluator_task: EvaluatorTask,
) -> None:
    task = evaluator_task.task
    package = task / "judge" / "guess_three"
    assert (package / "evaluator.py").read_text() == EVALUATOR
    assert (task / "solution" / "solution.py").read_text() == SEED
    assert json.loads((package / "testdata" / "1.in").read_text()) == {
        "metric": "combined_score",
        "cascade": None,
    }
    contract = json.loads((task / "contract.json").read_text())
    assert contract["judge_problem_id"] == "guess_three" and contract["verifier"] == "value"
    assert "combined_score" in (task / "instruction.md").read_text()


def test_seed_check_and_the_judge_s_refusals(evaluator_task: EvaluatorTask) -> None:
    task, judge, root = evaluator_task.task, evaluator_task.judge, evaluator_task.root
    out = passed(
        cli("task", "seed", str(task), "solution/solution.py", "--summary", SUMMARY,
            "--judge-url", judge.url, cwd=root)
    )  # fmt: skip
    assert "0.2 on 'public'" in out  # 1 / (1 + (1 - 3)^2)
    out = passed(cli("task", "check", str(task), "--judge-url", judge.url, cwd=root))
    assert "seed reproduced: 0.2" in out
    with FrontierCSScorer.for_task(task, judge.url, poll_interval_s=0.2) as scorer:
        for name, (program, reason) in REFUSED.items():
            verdict = scorer(program)
            assert not verdict.valid and verdict.status == "invalid", name
            assert reason in verdict.artifacts.get("case_detail", ""), (name, verdict.artifacts)
        good = scorer("def solve():\n    return 2.5\n")  # the judge still serves
    assert good.valid and good.raw_score == pytest.approx(0.8)
    assert good.artifacts["metrics"] == {"combined_score": 0.8, "answer": 2.5}


def test_rehearse_then_a_frozen_run_judge_the_new_task_without_set(
    evaluator_task: EvaluatorTask,
) -> None:
    task, root = evaluator_task.task, evaluator_task.root
    if not (task / "solution" / "seed.json").is_file():
        passed(
            cli("task", "seed", str(task), "solution/solution.py", "--summary", SUMMARY,
                "--judge-url", evaluator_task.judge.url, cwd=root)
        )  # fmt: skip
    passed(cli("rehearse", "--task", str(task), "--steps", "1", "--groups", "1",
               "--rollouts", "2", cwd=root))  # fmt: skip
    archive, committed = read_committed(
        root / "work" / "rehearsal-guess_three" / "guidance-run" / "archive"
    )
    assert committed == 0 and all(e.is_valid for e in archive.entries.values())

    state, out = frozen_run(task, root)
    assert "problem guess_three" in out, out[-3000:]
    archive, committed = read_committed(state / "guidance-run" / "archive")
    assert committed == 0
    assert results.seed_entry(archive).verifier_raw_score == pytest.approx(0.2)
    assert all(e.is_valid for e in archive.entries.values())
    # The evaluator's other metrics are in the rollout's record, and `show` prints them.
    rollout = next(e for e in archive.entries.values() if e.timestep == 1)
    shown = passed(cli("show", str(state), rollout.id, cwd=root))
    assert "metrics: answer 1  combined_score 0.2" in shown


#: Three OpenEvolve examples of different kinds: a numeric optimiser with a one-threshold
#: cascade and OpenEvolve's EvaluationResult, a geometric construction its evaluator runs in a
#: subprocess with a two-threshold cascade, and a combinatorial search in plain Python.
EXAMPLES = {
    "function_minimization": ("--score-tolerance", "0.5"),  # its search samples
    "circle_packing": (),
    "k_module_problem": (),
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_an_openevolve_example_as_it_is(example: str, tmp_path: Path) -> None:
    folder = OPENEVOLVE / example
    if not (folder / "evaluator.py").is_file():
        pytest.skip(f"OpenEvolve's examples are absent from {OPENEVOLVE}; fetch them: {FETCH}")
    task = tmp_path / example
    passed(cli("task", "new", str(task), "--openevolve", str(folder), *EXAMPLES[example],
               cwd=tmp_path))  # fmt: skip
    seed = (task / "solution" / "solution.py").read_text()
    assert seed == (folder / "initial_program.py").read_text()
    assert (
        "EVOLVE-BLOCK-START"
        in json.loads((task / "contract.json").read_text())["solution_contract"]
    )
    with LocalJudge(tmp_path / "judge", "--task", str(task)) as judge:
        passed(
            cli("task", "seed", str(task), "solution/solution.py", "--summary",
                "OpenEvolve's initial program.", "--judge-url", judge.url, cwd=tmp_path)
        )  # fmt: skip
        passed(cli("task", "check", str(task), "--judge-url", judge.url, cwd=tmp_path))
        passed(
            cli("rehearse", "--task", str(task), "--judge-url", judge.url, "--steps", "1",
                "--groups", "1", "--rollouts", "2", cwd=tmp_path)
        )  # fmt: skip
    rehearsal = tmp_path / "work" / f"rehearsal-{example}"
    for state in (rehearsal, frozen_run(task, tmp_path)[0]):
        archive, _ = read_committed(state / "guidance-run" / "archive")
        rollouts = [e for e in archive.entries.values() if e.timestep == 1]
        assert len(rollouts) == 2 and all(e.is_valid for e in rollouts), state
        metrics = [e.metadata["verification_artifacts"]["metrics"] for e in rollouts]
        assert all("combined_score" in found for found in metrics)
