"""A synthetic run of any size, built through the real `Archive` (PUCT selection, submit, the
archive filter) and written as a real `committed-library.json`: what `guidance-ttt browse` reads
for a 30 × 128 run without running one. Only the rollouts' texts and scores are made up:
each child's program is its parent's with a few lines changed (so diffs are real diffs), its
score a noisy step from its parent's; about a fifth of the rollouts fail, spread over the
failure statuses. Deterministic for a given seed.
"""

from __future__ import annotations

import random
from pathlib import Path

from harness.library import Archive
from harness.state import (
    EXECUTION_ERROR,
    GUIDANCE_FORMAT_ERROR,
    INVALID,
    PARSE_ERROR,
    VALID,
    ArchiveConfig,
    LibraryEntry,
)
from harness.storage.library_json import write_library_json
from harness.storage.run_files import ARCHIVE_DIR
from harness.storage.store import ArchiveStore

FAILURES = (INVALID, INVALID, EXECUTION_ERROR, PARSE_ERROR, GUIDANCE_FORMAT_ERROR)
IDEAS = (
    "skyline placement",
    "sort pieces by area",
    "rotate to the widest side",
    "bottom-left fill",
    "a second pass that closes gaps",
    "binary search on the strip width",
    "merge shelves that share a height",
)


def seed_program(lines: int = 160) -> str:
    body = [f"    int v{i} = pieces[{i % 13}] * {i % 7 + 1};  // step {i}" for i in range(lines)]
    return "#include <bits/stdc++.h>\nint main() {\n" + "\n".join(body) + "\n}\n"


def edit(program: str, rng: random.Random, changes: int = 4) -> str:
    lines = program.split("\n")
    for _ in range(changes):
        at = rng.randrange(2, max(3, len(lines) - 2))
        if rng.random() < 0.5:
            lines[at] = f"    int w{rng.randrange(10_000)} = place(pieces, {rng.randrange(99)});"
        else:
            lines.insert(at, f"    // {rng.choice(IDEAS)}")
    return "\n".join(lines)


def synthetic_archive(
    steps: int = 30, groups: int = 8, rollouts: int = 16, seed: int = 7
) -> Archive:
    """The archive of a synthetic run of `steps` steps of `groups` × `rollouts`."""
    archive = seed_archive(groups, rollouts)
    rng = random.Random(seed)
    for step in range(steps):
        for group, _, entry in step_rollouts(archive, step, rng):
            archive.submit(step, group, entry)
    return archive


def seed_archive(groups: int, rollouts: int) -> Archive:
    """A new archive holding only the synthetic seed (27.81, as the reference's)."""
    config = ArchiveConfig(rollout_n=rollouts, groups_per_batch=groups, score_direction="max")
    seed_entry = LibraryEntry(
        id="seed",
        parent_id=None,
        problem_id="polyomino_packing",
        timestep=0,
        guidance="",
        execution_thinking="",
        solution=seed_program(),
        verifier_reward=27.81,
        verifier_raw_score=27.81,
        verifier_status=VALID,
        verifier_message="score 27.810000 over 2 cases",
        summary="A single-row packer: every piece in one row, left to right.",
        reusable_idea="A single-row packer.",
        failure_mode=None,
        metadata={"suite": "public", "verification_artifacts": {"case_ratios": [0.27, 0.29]}},
    )
    return Archive.from_seed(config, seed_entry)


def step_rollouts(
    archive: Archive, step: int, rng: random.Random
) -> list[tuple[int, int, LibraryEntry]]:
    """(group, rollout, entry) of every rollout of `step`, its parents selected by PUCT."""
    out = []
    for group, parent in enumerate(archive.select_parents(step)):
        parent_entry = archive.entry_of(parent.id)
        for rollout in range(archive.config.rollout_n):
            out.append((group, rollout, _child(rng, step, group, rollout, parent.id, parent_entry)))
    return out


def _child(
    rng: random.Random, step: int, group: int, rollout: int, parent_id: str, parent: LibraryEntry
) -> LibraryEntry:
    status = VALID if rng.random() < 0.8 else rng.choice(FAILURES)
    base = parent.verifier_raw_score or 27.81
    score = round(min(99.0, max(1.0, base + rng.gauss(-1.0, 1.3))), 4) if status == VALID else None
    idea = rng.choice(IDEAS)
    guidance = (
        f"Thinking: the parent scores {base:.2f}.\n<guidance>Try {idea}, keeping what works; "
        f"variant {rng.randrange(1000)}.</guidance>"
    )
    program = "" if status in (GUIDANCE_FORMAT_ERROR, PARSE_ERROR) else edit(parent.solution, rng)
    ratios = [round(score / 100 + rng.uniform(-0.02, 0.02), 4) for _ in range(2)] if score else None
    return LibraryEntry(
        id=f"s{step:02d}-g{group:02d}-r{rollout:02d}",
        parent_id=parent_id,
        problem_id="polyomino_packing",
        timestep=step + 1,
        guidance=guidance if status != GUIDANCE_FORMAT_ERROR else "",
        execution_thinking="",
        solution=program,
        verifier_reward=score or 0.0,
        verifier_raw_score=score,
        verifier_status=status,
        verifier_message=f"score {score:.6f} over 2 cases" if score else f"{status}: case 1",
        summary=f"The parent's packer with {idea}.",
        reusable_idea=idea,
        failure_mode=None if status == VALID else status,
        metadata={
            "step": step,
            "group": group,
            "rollout": rollout,
            "selected_parent_entry_id": parent.id,
            "raw_guidance_text": guidance,
            # What the executor answered, kept for the failures it explains (a parse_error's
            # answer has no <solution>).
            **(
                {"execution_text": f"I would try {idea}, but here is only my plan."}
                if status in (PARSE_ERROR, EXECUTION_ERROR, INVALID)
                else {}
            ),
            "agent_record_id": f"{rng.getrandbits(128):032x}",
            "guidance_format_ok": status != GUIDANCE_FORMAT_ERROR,
            "verification_artifacts": {"case_ratios": ratios} if ratios else {},
            "guidance_response_usage": {
                "prompt_tokens": 900 + rng.randrange(400),
                "completion_tokens": 300 + rng.randrange(700),
            },
            "execution_response_usage": None
            if status == GUIDANCE_FORMAT_ERROR
            else {
                "prompt_tokens": 6000 + rng.randrange(3000),
                "completion_tokens": 2500 + rng.randrange(6000),
            },
        },
    )


def synthetic_state_dir(
    state_dir: Path, steps: int, groups: int, rollouts: int, seed: int = 7
) -> Archive:
    """A state directory whose archive store holds `steps` committed synthetic steps, written
    through the real `ArchiveStore` (journal lines, commits), as a run leaves it."""
    archive = seed_archive(groups, rollouts)
    rng = random.Random(seed)
    with ArchiveStore.create(state_dir / ARCHIVE_DIR, archive) as store:
        for step in range(steps):
            for group, rollout, entry in step_rollouts(archive, step, rng):
                store.record_rollout(archive, step, group, rollout, entry)
            store.commit_step(archive, step)
    return archive


def write_synthetic_run(directory: Path, **sizes: int) -> Path:
    """A directory holding the synthetic archive as `library.json`; returns that file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "library.json"
    write_library_json(synthetic_archive(**sizes), path)
    return path
