"""The seed archives of the Polyomino task (the default single-row layout, comparable to the
reference's seed, and the shelf packer as an alternative): their records, their code-free
summaries, and their programs, judged by the real local judge on the 70 public cases and on the
generated suite."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from judge_fakes import LocalJudge, public_problems

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.contract import load_contract
from harness.state import LibraryEntry, LibraryNode
from harness.storage.run_files import load_seed

TASK_DIR = Path(__file__).resolve().parents[2] / "harbor" / "polyomino_packing"
#: The reference run's seed score on the 70 public cases (its published trajectory starts here).
REFERENCE_SEED_SCORE = 27.8105
SEED_DIRS = {"default": TASK_DIR / "solution", "shelf": TASK_DIR / "solution" / "shelf"}


def _seed(name: str) -> tuple[dict, str]:
    folder = SEED_DIRS[name]
    return json.loads((folder / "seed.json").read_text()), (folder / "solution.cpp").read_text()


both_seeds = pytest.mark.parametrize("name", sorted(SEED_DIRS))


@both_seeds
def test_seed_archive_holds_one_root_node_and_its_entry(name: str) -> None:
    seed, program = _seed(name)
    assert set(seed) == {"entry", "node", "measured"}
    entry, node = LibraryEntry.from_dict(seed["entry"]), LibraryNode.from_dict(seed["node"])
    assert entry.parent_id is None and entry.timestep == 0
    assert entry.verifier_status == "valid" and entry.failure_mode is None
    assert entry.solution == program
    assert node.entry_id == entry.id and node.parent_id is None and node.children == ()
    assert node.problem_id == entry.problem_id and node.timestep == 0
    assert node.metadata == {"kind": "root", "archive_candidate": True, "verifier_status": "valid"}
    # score direction is max, so the PUCT value is the raw score itself
    assert load_contract(TASK_DIR).score_direction == "max"
    assert node.value == node.raw_score == entry.verifier_raw_score == entry.verifier_reward
    source = SEED_DIRS[name] / "solution.cpp"
    assert entry.metadata["source"] == source.relative_to(TASK_DIR.parents[1]).as_posix()


@both_seeds
def test_seed_score_is_the_measured_public_score_with_its_named_suite(name: str) -> None:
    seed, _ = _seed(name)
    measured = seed["measured"]
    public, generated = measured["public_cases"], measured["generated_suite"]
    assert public["suite"] == "public"
    assert generated["suite"] == f"generated:{generated['seed']}:{generated['cases']}"
    assert public["cases"] == 70 and public["valid_cases"] == 70
    assert seed["node"]["raw_score"] == public["score"]
    assert generated["valid_cases"] == generated["cases"]
    for suite in (public, generated):
        assert suite["command"] and suite["date"] and suite["suite_description"]


def test_default_seed_is_comparable_to_the_reference_seed() -> None:
    """The default seed is of the reference seed's family (one row of pieces) and scores within
    ±3 of its 27.8105 on the public cases; the shelf packer is the stronger alternative."""
    default, shelf = _seed("default")[0], _seed("shelf")[0]
    score = default["measured"]["public_cases"]["score"]
    assert abs(score - REFERENCE_SEED_SCORE) <= 3.0
    assert shelf["measured"]["public_cases"]["score"] > score + 10


def test_load_seed_reads_the_record_the_run_settings_name() -> None:
    assert load_seed(TASK_DIR).solution == _seed("default")[1]
    assert load_seed(TASK_DIR, "solution/shelf/seed.json").solution == _seed("shelf")[1]


@both_seeds
def test_seed_summary_is_code_free_and_canonical(name: str) -> None:
    seed, program = _seed(name)
    entry = seed["entry"]
    summary = entry["summary"]
    assert summary == entry["reusable_idea"] == entry["metadata"]["raw_model_summary"]
    assert len(summary.split()) >= 40
    code_like = r"[{}`#<>=\[\]]|::|->|\w\(|;\S|\d|\b(int|long|void|return|std|printf|scanf)\b"
    assert not re.search(code_like, summary), "the seed summary must hold no code or constants"
    assert not any(
        line.strip() in summary for line in program.splitlines() if len(line.strip()) > 12
    )


def _judge(judge: LocalJudge, program: str) -> tuple[float, list[float]]:
    scorer = FrontierCSScorer.for_task(
        TASK_DIR, judge.url, "0", deadline_s=600.0, poll_interval_s=0.2
    )
    verdict = scorer(program)
    assert verdict.valid, verdict.message
    return verdict.reward, verdict.artifacts["case_ratios"]


class Judges:
    """The local judges of this module, one per suite, each started when a test first asks for
    its suite and shared by both seeds (each seed's program is judged on its own)."""

    def __init__(self, root: Path, stack: ExitStack) -> None:
        self.root, self.stack = root, stack
        self.started: dict[tuple[str, ...], LocalJudge] = {}

    def serving(self, *flags: str) -> LocalJudge:
        if flags not in self.started:
            state = self.root / f"judge-{len(self.started)}"
            self.started[flags] = self.stack.enter_context(LocalJudge(state, *flags))
        return self.started[flags]

    def public_cases(self) -> LocalJudge:
        problems = self.root / "problems"
        if not problems.is_dir():
            public_problems(problems)  # skips the test when ../shared is absent
        return self.serving("--problems", str(problems))


@pytest.fixture(scope="module")
def judges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judges]:
    with ExitStack() as stack:
        yield Judges(tmp_path_factory.mktemp("seed-judges"), stack)


@pytest.mark.slow
@both_seeds
def test_seed_is_valid_on_all_70_public_cases(judges: Judges, name: str) -> None:
    seed, program = _seed(name)
    score, ratios = _judge(judges.public_cases(), program)
    assert len(ratios) == 70
    assert min(ratios) > 0.0, "every public case must be a valid packing"
    assert score == pytest.approx(seed["measured"]["public_cases"]["score"], abs=1e-6)


@pytest.mark.slow
@both_seeds
def test_seed_is_valid_on_the_generated_suite(judges: Judges, name: str) -> None:
    seed, program = _seed(name)
    generated = seed["measured"]["generated_suite"]
    options = ["--generated-cases", str(generated["cases"]), "--seed", str(generated["seed"])]
    score, ratios = _judge(judges.serving(*options), program)
    assert len(ratios) == generated["cases"]
    assert min(ratios) > 0.0, "every generated case must be a valid packing"
    assert score == pytest.approx(generated["score"], abs=1e-6)
