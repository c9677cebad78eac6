"""Every arm through the same harness code on CPU: the rehearsal's stand-ins, the real judge.

Real: the local judge on a generated suite, the run loop, archive store, journal and run
controller; for the guided arm also `reef serve` in record-only mode. Stand-ins (labelled in
every record): the scripted guidance model and executor (`harness.rehearsal.stand_ins`). The
runs share one judge and one stand-in executor, so each run's executor requests are the slice
of the executor's log recorded while it ran.

What each test shows is what differs between arms, and that nothing else does: no guidance
call for `unguided` (the executor gets the fixed instruction where guidance would be), every
parent is a seed root for `best-of-n`, `greedy` always expands the best node; the executor
prompts of the guided and the unguided run differ only in the guidance text; two runs with the
same seed build the same archive (and a run with another seed does not).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from rich.console import Console

from harness.arms import UNGUIDED_INSTRUCTION
from harness.library import Archive
from harness.rehearsal.openai_server import RecordedRequest
from harness.rehearsal.rehearse import RehearsalOptions, rehearse_run, stand_in_stack
from harness.rehearsal.stand_ins import task_dir
from harness.storage.store import read_committed
from tests.rehearsal_support import JUDGE_POLL_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

G, R, STEPS = 2, 2, 2


@dataclass
class ArmRun:
    state_dir: Path
    archive: Archive
    executor_requests: list[RecordedRequest]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ArmRun]]:
    root = tmp_path_factory.mktemp("arms")
    if not (task_dir() / "solution" / "shelf" / "seed.json").is_file():
        pytest.skip("the task's shelf seed record is missing")
    console = Console(file=io.StringIO())
    # "unguided" runs with one worker, so that it is also the other-seed run (seed 0) the
    # same-seed pair (seed 1) is compared with: the runs then differ in their seed alone.
    plans = {
        "guided": RehearsalOptions(steps=STEPS, groups=G, rollouts=R, cases=2),
        "unguided": RehearsalOptions(
            steps=STEPS, groups=G, rollouts=R, arm="unguided", run_seed=0, workers=1
        ),
        "best": RehearsalOptions(steps=STEPS, groups=G, rollouts=R, arm="best-of-n"),
        "greedy": RehearsalOptions(
            steps=STEPS, groups=G, rollouts=R, arm="unguided", parent_selection="greedy"
        ),
        "seed1": RehearsalOptions(
            steps=STEPS, groups=G, rollouts=R, arm="unguided", run_seed=1, workers=1
        ),
        "seed1_again": RehearsalOptions(
            steps=STEPS, groups=G, rollouts=R, arm="unguided", run_seed=1, workers=1
        ),
    }
    found: dict[str, ArmRun] = {}
    with stand_in_stack(root, 2, 11, console) as stack:
        for name, options in plans.items():
            before = len(stack.executor.completion_requests())
            fast = replace(options, judge_poll_s=JUDGE_POLL_S)
            result = rehearse_run(stack, root / name, fast, console)
            assert result.next_step == STEPS
            archive, _ = read_committed(root / name / "guidance-run" / "archive")
            found[name] = ArmRun(
                root / name, archive, stack.executor.completion_requests()[before:]
            )
    yield found


def rollouts(run: ArmRun) -> list:
    return sorted(
        (e for e in run.archive.entries.values() if e.timestep >= 1),
        key=lambda e: (e.timestep, e.metadata["group"], e.metadata["rollout"]),
    )


def test_unguided_makes_no_guidance_call_and_gives_the_executor_the_fixed_instruction(
    runs: dict[str, ArmRun],
) -> None:
    run = runs["unguided"]
    entries = rollouts(run)
    assert len(entries) == STEPS * G * R
    for entry in entries:
        meta = entry.metadata
        assert meta["arm"] == "unguided" and meta["agent_record_id"] is None
        assert meta["guidance_prompt"] is None and meta["raw_guidance_text"] == ""
        assert entry.guidance == UNGUIDED_INSTRUCTION
    assert not (run.state_dir / "reef").exists(), "no Reef is started for an unguided run"
    assert len(run.executor_requests) == STEPS * G * R
    for request in run.executor_requests:
        assert UNGUIDED_INSTRUCTION in request.body["messages"][-1]["content"]
        assert isinstance(request.body["seed"], int)
    guided = rollouts(runs["guided"])
    assert all(isinstance(e.metadata["agent_record_id"], str) for e in guided)
    assert (runs["guided"].state_dir / "reef").is_dir()


def test_the_executor_prompt_differs_between_arms_only_in_the_guidance(
    runs: dict[str, ArmRun],
) -> None:
    guided, unguided = rollouts(runs["guided"]), rollouts(runs["unguided"])
    by_seed = {r.body["seed"]: r for r in runs["unguided"].executor_requests}
    compared = 0
    for request in runs["guided"].executor_requests:
        twin = by_seed.get(request.body["seed"])  # the same slot of the unguided run
        entry = next(
            (
                e
                for e in guided
                if e.guidance and e.guidance in request.body["messages"][-1]["content"]
            ),
            None,
        )
        if twin is None or entry is None or entry.timestep != 1:
            continue  # step 0 only: both runs expand the same seed roots there
        mine = [dict(m) for m in request.body["messages"]]
        mine[-1]["content"] = mine[-1]["content"].replace(entry.guidance, "<GUIDANCE>")
        theirs = [dict(m) for m in twin.body["messages"]]
        theirs[-1]["content"] = theirs[-1]["content"].replace(UNGUIDED_INSTRUCTION, "<GUIDANCE>")
        assert mine == theirs
        assert {k: v for k, v in request.body.items() if k != "messages"} == {
            k: v for k, v in twin.body.items() if k != "messages"
        }
        compared += 1
    assert compared >= G, "the check must compare step-0 executor requests"
    keys = {frozenset(e.metadata) for e in guided + unguided}
    assert len(keys) == 1, "every arm records the same audit metadata"


def test_best_of_n_expands_only_the_seed_and_adds_nothing_to_the_tree(
    runs: dict[str, ArmRun],
) -> None:
    archive = runs["best"].archive
    roots = {n.id for n in archive.nodes.values() if n.is_root}
    assert set(archive.nodes) == roots, "no candidate became a node"
    assert len(archive.groups) == STEPS * G
    assert {g.selected_node_id for g in archive.groups.values()} == roots
    valid = [e for e in rollouts(runs["best"]) if e.is_valid]
    assert valid, "best-of-n still judges its samples (its best so far comes from them)"


def test_greedy_always_expands_the_best_node(runs: dict[str, ArmRun]) -> None:
    archive = runs["greedy"].archive
    for step in range(STEPS):
        chosen = {g.selected_node_id for g in archive.step_groups(step).values()}
        assert len(chosen) == 1, f"step {step}: every group expands the same, best, node"
        (node_id,) = chosen
        visible = [n for n in archive.nodes.values() if n.is_root or n.timestep < step + 1]
        best = max(visible, key=lambda n: (n.value, n.id))
        assert archive.nodes[node_id].value == best.value
    puct = runs["unguided"].archive
    assert len({g.selected_node_id for g in puct.step_groups(0).values()}) == G, (
        "PUCT spreads the groups of a step over lineages; greedy does not"
    )


def projection(archive: Archive) -> dict:
    """The archive without wall-clock timings: every entry, node and group."""
    return {
        "entries": sorted(
            (
                e.id,
                e.parent_id,
                e.timestep,
                e.solution,
                e.verifier_status,
                e.verifier_raw_score,
                e.guidance,
            )
            for e in archive.entries.values()
        ),
        "nodes": sorted((n.id, n.parent_id, n.value) for n in archive.nodes.values()),
        "groups": sorted((uid, g.selected_node_id) for uid, g in archive.groups.items()),
        "best": archive.best_node_id,
    }


def test_two_runs_with_the_same_seed_build_the_same_archive(runs: dict[str, ArmRun]) -> None:
    one, again = runs["seed1"].archive, runs["seed1_again"].archive
    assert projection(one) == projection(again)
    other = runs["unguided"]  # the same options but the run seed (0)
    assert projection(one) != projection(other.archive)
