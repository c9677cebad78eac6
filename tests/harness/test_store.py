"""The durable store: journal per rollout, one commit per step, exact resume after a crash."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from archive_builders import make_seed

from harness.library import Archive, ArchiveConfigMismatch
from harness.state import GUIDANCE_FORMAT_ERROR, VALID, ArchiveConfig, LibraryEntry
from harness.storage import atomic
from harness.storage.library_json import library_json_bytes, read_library_json
from harness.storage.resume_state import ResumeState, RunIdentity, StepOutcome
from harness.storage.state_dir import StateDirectory
from harness.storage.store import (
    HEAD,
    ArchiveStore,
    StoreError,
    journal_name,
    read_committed,
)

CONFIG = ArchiveConfig(rollout_n=3, groups_per_batch=2)
FIXTURE = Path(__file__).parents[1] / "fixtures" / "reference_library.json"


def rollout(archive: Archive, step: int, group: int, slot: int, payload: int = 64) -> LibraryEntry:
    """A deterministic rollout for a slot: same slot, same entry (so a resumed run can be compared
    with an uninterrupted one byte for byte)."""
    digest = hashlib.sha256(f"{step}/{group}/{slot}".encode()).hexdigest()
    parent = archive.groups[f"{step + 1}:{group}"].selected_node_id
    failed = int(digest[0], 16) < 4
    raw = None if failed else float(int(digest[1:5], 16) % 1000) / 10
    return LibraryEntry(
        id=f"entry-{step}-{group}-{slot}",
        parent_id=parent,
        problem_id="polyomino_packing",
        timestep=step + 1,
        guidance="" if failed else f"guidance {digest[:8]}",
        execution_thinking="t" * payload,
        solution="" if failed else f"// {digest[:12]}\nint main(){{}}",
        verifier_reward=0.0 if failed else raw / 100,
        verifier_raw_score=raw,
        verifier_status=GUIDANCE_FORMAT_ERROR if failed else VALID,
        verifier_message="m",
        summary="s",
        reusable_idea="s",
        failure_mode=GUIDANCE_FORMAT_ERROR if failed else None,
        metadata={"slot": [group, slot], "text": "é" * 3},
    )


def drive(root: Path, steps: int, payload: int = 64, stop_after: int | None = None) -> None:
    """Open the store, resume, and run until `steps` steps are committed (or `stop_after`
    rollouts were recorded in this call, to simulate a crash mid-step)."""
    done = 0
    with ArchiveStore.open(root, CONFIG) as store:
        restored = store.load()
        archive, step, slots = restored.archive, restored.next_step, restored.missing_slots()
        while step < steps:
            archive.select_parents(step)
            for group, slot in slots:
                if stop_after is not None and done == stop_after:
                    return
                store.record_rollout(
                    archive, step, group, slot, rollout(archive, step, group, slot, payload)
                )
                done += 1
            store.commit_step(archive, step)
            step += 1
            slots = [
                (g, r) for g in range(CONFIG.groups_per_batch) for r in range(CONFIG.rollout_n)
            ]


@pytest.fixture
def fresh(tmp_path) -> Path:
    root = tmp_path / "archive"
    ArchiveStore.create(root, Archive.from_seed(CONFIG, make_seed())).close()
    return root


def exported(root: Path) -> bytes:
    return library_json_bytes(read_committed(root)[0])


def test_committed_steps_load_back_identically_and_export_as_library_json(fresh, tmp_path):
    drive(fresh, steps=3)
    with ArchiveStore.open(fresh, CONFIG) as store:
        restored = store.load()
        assert restored.committed_step == 2 and restored.in_flight == ()
        store.export_library_json(tmp_path / "library.json")
    assert (tmp_path / "library.json").read_bytes() == library_json_bytes(restored.archive)
    assert read_library_json(tmp_path / "library.json").puct_T == 3 * 2 * 3
    assert sorted(p.name for p in fresh.glob("step-*")) == [journal_name(s) for s in range(3)]


def test_resume_mid_step_replays_the_journal_and_runs_only_missing_slots(fresh, tmp_path):
    reference = tmp_path / "reference"
    shutil.copytree(fresh, reference)
    drive(reference, steps=3)

    drive(fresh, steps=3, stop_after=2 * 6 + 4)  # two steps, then 4 rollouts of step 2
    with ArchiveStore.open(fresh, CONFIG) as store:
        restored = store.load()
    assert restored.committed_step == 1
    assert [(r.group, r.rollout) for r in restored.in_flight] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert restored.missing_slots() == [(1, 1), (1, 2)]
    assert restored.archive.puct_T == 2 * 6 + 4
    assert restored.archive.groups["3:0"].finalized

    drive(fresh, steps=3)
    assert exported(fresh) == exported(reference)


def test_a_superseded_in_flight_step_runs_again_from_the_commit_and_is_kept(fresh, tmp_path):
    reference = tmp_path / "reference"
    shutil.copytree(fresh, reference)
    drive(reference, steps=3)

    drive(fresh, steps=3, stop_after=6 + 4)  # step 0, then 4 rollouts of step 1
    with ArchiveStore.open(fresh, CONFIG) as store:
        store.load()
        restored = store.supersede_in_flight()
        assert restored.committed_step == 0 and restored.in_flight == ()
        assert restored.missing_slots() == [(g, r) for g in range(2) for r in range(3)]
        assert restored.archive.puct_T == 6
        assert store.superseded_receipts() == frozenset()  # these entries carry no receipt
    (kept,) = fresh.glob("superseded-step-000001-*.jsonl")
    assert len(kept.read_text().splitlines()) == 4
    drive(fresh, steps=3)  # step 1 from its first slot, then step 2
    assert exported(fresh) == exported(reference)
    with ArchiveStore.open(fresh, CONFIG) as store:
        assert store.load().committed_step == 2


def test_a_torn_final_journal_line_is_ignored_and_cut_before_appending(fresh, tmp_path):
    reference = tmp_path / "reference"
    shutil.copytree(fresh, reference)
    drive(reference, steps=2)

    drive(fresh, steps=2, stop_after=2)
    journal = fresh / journal_name(0)
    with open(journal, "ab") as handle:  # what a crash in the middle of an append leaves
        handle.write(b'{"step":0,"group":0,"rollout":2,"entry":{"id":"half')
    with ArchiveStore.open(fresh, CONFIG) as store:
        restored = store.load()
        assert [(r.group, r.rollout) for r in restored.in_flight] == [(0, 0), (0, 1)]
        assert journal.read_bytes().endswith(b"\n")  # the torn tail is gone
    drive(fresh, steps=2)
    assert exported(fresh) == exported(reference)


def test_crash_after_sealing_a_step_but_before_the_head_keeps_the_previous_commit(
    fresh, monkeypatch
):
    drive(fresh, steps=1)
    before = exported(fresh)
    with ArchiveStore.open(fresh, CONFIG) as store:
        restored = store.load()
        archive = restored.archive
        archive.select_parents(1)
        for g, r in restored.missing_slots():
            store.record_rollout(archive, 1, g, r, rollout(archive, 1, g, r))

        def crash(*_args, **_kwargs):
            raise OSError("simulated crash before the head is replaced")

        monkeypatch.setattr("harness.storage.store.atomic_write_bytes", crash)
        with pytest.raises(OSError, match="simulated crash"):
            store.commit_step(archive, 1)
        monkeypatch.undo()
    assert exported(fresh) == before  # readers still see step 0
    with ArchiveStore.open(fresh, CONFIG) as store:
        restored = store.load()
        assert restored.committed_step == 0 and len(restored.in_flight) == 6
        assert restored.missing_slots() == []
        store.commit_step(restored.archive, 1)
    assert read_committed(fresh)[1] == 1


def test_crash_between_temp_write_and_rename_leaves_the_old_head(fresh, monkeypatch):
    drive(fresh, steps=1, stop_after=5)
    head_before = (fresh / HEAD).read_bytes()

    def crash(*_args, **_kwargs):
        raise OSError("simulated crash at rename")

    with ArchiveStore.open(fresh, CONFIG) as store:
        restored = store.load()
        ((g, r),) = restored.missing_slots()
        store.record_rollout(restored.archive, 0, g, r, rollout(restored.archive, 0, g, r))
        monkeypatch.setattr(atomic.os, "replace", crash)
        with pytest.raises(OSError, match="at rename"):
            store.commit_step(restored.archive, 0)
        monkeypatch.undo()
    assert (fresh / HEAD).read_bytes() == head_before
    # simulate the temp file a killed process would have left behind
    (fresh / f".{HEAD}.deadbeef.tmp").write_bytes(b'{"half": ')
    assert read_committed(fresh)[1] == -1
    with ArchiveStore.open(fresh, CONFIG) as store:
        assert not list(fresh.glob("*.tmp"))
        restored = store.load()
        assert len(restored.in_flight) == 6
        store.commit_step(restored.archive, 0)
    assert read_committed(fresh)[1] == 0


def test_each_rollout_writes_only_its_own_journal_line(fresh):
    drive(fresh, steps=6)
    with ArchiveStore.open(fresh, CONFIG) as store:
        restored = store.load()
        archive = restored.archive
        archive.select_parents(6)
        entry = rollout(archive, 6, 0, 0, payload=5000)
        atomic.METER.reset()
        store.record_rollout(archive, 6, 0, 0, entry)
        line_bytes = (fresh / journal_name(6)).stat().st_size
        assert atomic.METER.bytes_written == line_bytes  # nothing else is rewritten
        assert line_bytes < len(entry.execution_thinking) + 1000


def test_a_second_writer_is_refused(fresh):
    with ArchiveStore.open(fresh, CONFIG), pytest.raises(StoreError, match="another writer"):
        ArchiveStore.open(fresh, CONFIG)
    ArchiveStore.open(fresh, CONFIG).close()  # released on close


def test_a_store_made_with_other_settings_refuses_to_open(fresh):
    other = ArchiveConfig(rollout_n=4, groups_per_batch=2)
    with pytest.raises(ArchiveConfigMismatch, match="rollout_n: stored 3, requested 4") as err:
        ArchiveStore.open(fresh, other)
    assert "use a new output directory" in str(err.value)
    ArchiveStore.open(fresh, CONFIG).close()  # the lock was released after the refusal


def test_create_refuses_an_existing_store_and_an_archive_with_an_open_step(fresh, tmp_path):
    with pytest.raises(StoreError, match="already holds an archive"):
        ArchiveStore.create(fresh, Archive.from_seed(CONFIG, make_seed()))
    with pytest.raises(StoreError, match="unfinished groups"):
        ArchiveStore.create(tmp_path / "imported", read_library_json(FIXTURE))
    with pytest.raises(StoreError, match="holds no archive"):
        ArchiveStore.open(tmp_path / "nothing")


def test_store_refuses_out_of_order_use(fresh):
    with ArchiveStore.open(fresh, CONFIG) as store:
        archive = Archive.from_seed(CONFIG, make_seed())
        with pytest.raises(StoreError, match="call load"):
            store.commit_step(archive, 0)
        archive = store.load().archive
        archive.select_parents(0)
        with pytest.raises(StoreError, match="not the in-flight step 0"):
            store.record_rollout(archive, 1, 0, 0, rollout(archive, 0, 0, 0))
        store.record_rollout(archive, 0, 0, 0, rollout(archive, 0, 0, 0))
        with pytest.raises(StoreError, match="already done"):
            store.record_rollout(archive, 0, 0, 0, rollout(archive, 0, 0, 1))
        with pytest.raises(StoreError, match=r"outside 0\.\.2"):
            store.record_rollout(archive, 0, 0, 3, rollout(archive, 0, 0, 3))
        with pytest.raises(StoreError, match="batch is not complete"):
            store.commit_step(archive, 0)
        stranger = Archive.from_seed(CONFIG, make_seed())
        stranger.select_parents(0)
        with pytest.raises(StoreError, match="pass the archive returned by load"):
            store.record_rollout(stranger, 0, 0, 1, rollout(stranger, 0, 0, 1))


def test_a_truncated_committed_segment_is_reported(fresh):
    drive(fresh, steps=2)
    segment = fresh / journal_name(0)
    segment.write_bytes(segment.read_bytes()[:-10])
    with pytest.raises(StoreError, match="shorter than its committed"):
        read_committed(fresh)


def test_imported_library_json_seeds_a_store_and_exports_unchanged(tmp_path):
    run = tmp_path / "run"
    ArchiveStore.create(run, Archive.from_seed(CONFIG, make_seed())).close()
    drive(run, steps=2)
    exported_once = tmp_path / "library.json"
    with ArchiveStore.open(run) as store:
        store.export_library_json(exported_once)
    imported = tmp_path / "imported"
    ArchiveStore.create(imported, read_library_json(exported_once)).close()
    assert exported(imported) == exported_once.read_bytes()
    drive(imported, steps=3)
    assert read_committed(imported)[1] == 2


CHILD = """
import sys
sys.path[:0] = [{here!r}, {tests!r}]  # this test module's folder, then the shared helpers'
from pathlib import Path
from test_store import drive
drive(Path({root!r}), steps={steps}, payload=20000)
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_at_random_moments_never_loses_or_tears_committed_state(fresh, tmp_path):
    """A real writer process is killed with SIGKILL at random moments (mid-append, mid-commit,
    mid-rename) and restarted. After every kill the directory loads, holds the last commit plus a
    prefix of the in-flight slots, and the finished run equals an uninterrupted one byte for byte.
    """
    steps = 300
    reference = tmp_path / "reference"
    shutil.copytree(fresh, reference)
    code = CHILD.format(
        here=str(Path(__file__).parent),
        tests=str(Path(__file__).parents[1]),
        root=str(fresh),
        steps=steps,
    )
    delays = [0.45, 0.6, 0.35, 0.7, 0.5, 0.4, 0.65, 0.55]  # child start-up takes ~0.3 s
    last_committed = -1
    kills = 0
    for delay in delays:
        child = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(delay)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            kills += 1
        child.wait(timeout=30)
        _, committed = read_committed(fresh)
        assert committed >= last_committed
        last_committed = committed
        with ArchiveStore.open(fresh, CONFIG) as store:
            restored = store.load()
        slots = [(r.group, r.rollout) for r in restored.in_flight]
        assert slots == [(g, r) for g in range(2) for r in range(3)][: len(slots)]
        assert restored.archive.puct_T == (committed + 1) * 6 + len(slots)
    assert kills >= 3
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    drive(reference, steps=steps, payload=20000)
    assert read_committed(fresh)[1] == steps - 1
    assert exported(fresh) == exported(reference)


# --- the state directory: opening and the ordered commit (harness.storage.state_dir) ---------

IDENTITY_FIELDS = {
    "model": "Qwen/Qwen3-8B",
    "executor": "openai/gpt-oss-120b",
    "gpt_oss_reasoning_effort": "low",
    "groups_per_step": CONFIG.groups_per_batch,
    "rollouts_per_group": CONFIG.rollout_n,
    "guidance_max_tokens": 8192,
    "sequence_length": 12288,
    "lora_rank": 32,
    "inference_tensor_parallel_size": 1,
    "megatron_tensor_parallel_size": 2,
}


def _record(step: int) -> ResumeState:
    rewards = ((0.0, 0.5, 0.7), (0.2, 0.2, 0.9))
    summaries = tuple(
        StepOutcome(s, 1.0, rewards, 5, 6, 0.9).summary(CONFIG.rollout_n, {}, False)
        for s in range(step + 1)
    )
    return ResumeState(
        RunIdentity(**IDENTITY_FIELDS), {"name": "local"}, "summary_only", step + 1, summaries
    )


def _run_step(state: StateDirectory, step: int) -> None:
    state.archive.select_parents(step)
    for group in range(CONFIG.groups_per_batch):
        for slot in range(CONFIG.rollout_n):
            entry = rollout(state.archive, step, group, slot)
            state.store.record_rollout(state.archive, step, group, slot, entry)


def test_the_state_directory_commits_store_then_library_then_resume_state(tmp_path):
    root = tmp_path / "state"
    (root / "guidance-run").mkdir(parents=True)
    stale = atomic.temp_path_for(root / "guidance-run" / "resume-state.json")
    stale.write_text("cut short")
    order: list[str] = []
    seeds: list[int] = []

    def seed() -> Archive:
        seeds.append(1)
        return Archive.from_seed(CONFIG, make_seed())

    def crash(point: str) -> None:
        order.append(point)
        if point == "after_archive_commit":  # the store holds the step, nothing else does yet
            assert read_committed(root / "guidance-run" / "archive")[1] == 0
            assert not (root / "guidance-run" / "committed-library.json").exists()

    assert StateDirectory.is_new(root)
    with StateDirectory.open(root, CONFIG, seed, crash=crash) as state:
        assert not stale.exists()
        assert (state.committed_step, state.next_step, state.resume_state()) == (None, 0, None)
        _run_step(state, 0)
        saved = state.commit(0, _record(0))
        assert order == ["before_archive_commit", "after_archive_commit"]
        library = (root / "guidance-run" / "committed-library.json").read_bytes()
        assert saved.committed_library_sha256 == hashlib.sha256(library).hexdigest()
        assert state.resume_state() == saved and state.committed_step == 0
        # idempotent: a commit made again (after a crash before resume-state) skips the store
        assert state.commit(0, _record(0)) == saved
        assert order == ["before_archive_commit", "after_archive_commit"]
    assert seeds == [1] and not StateDirectory.is_new(root)
    with StateDirectory.open(root, CONFIG, seed) as state:
        assert seeds == [1] and (state.committed_step, state.next_step) == (0, 1)
        assert state.check_committed_library() is None


def test_the_state_directory_rebuilds_a_committed_library_that_differs(tmp_path):
    root = tmp_path / "state"
    with StateDirectory.open(root, CONFIG, lambda: Archive.from_seed(CONFIG, make_seed())) as state:
        _run_step(state, 0)
        saved = state.commit(0, _record(0))
    library = root / "guidance-run" / "committed-library.json"
    library.write_text("{}")
    with StateDirectory.open(root, CONFIG, lambda: pytest.fail("not a new run")) as state:
        rebuilt = state.check_committed_library()
    assert rebuilt is not None and rebuilt.step == 0 and rebuilt.matches_record
    assert "differs from the hash the last commit recorded" in rebuilt.message()
    assert hashlib.sha256(library.read_bytes()).hexdigest() == saved.committed_library_sha256


def test_the_state_directory_refuses_other_settings_and_releases_its_lock(tmp_path):
    root = tmp_path / "state"
    StateDirectory.open(root, CONFIG, lambda: Archive.from_seed(CONFIG, make_seed())).close()
    other = ArchiveConfig(rollout_n=CONFIG.rollout_n + 1, groups_per_batch=2)
    with pytest.raises(ArchiveConfigMismatch):
        StateDirectory.open(root, other, lambda: pytest.fail("not a new run"))
    StateDirectory.open(root, CONFIG, lambda: pytest.fail("not a new run")).close()


def test_a_resume_redoes_the_open_step_only_when_reef_serves_another_load(tmp_path):
    """`serving-load.json` notes the load a step's calls were served under; on resume the open
    step runs again (its journal set aside, said in an event) only when Reef now serves under
    another load (a restarted Reef: its incarnation is new), never on the same load or when no
    load was noted or Reef names none. A real Reef restarted: test_rehearse_on_tinker.py."""
    from harness.observe.events import EventLog, read_events
    from harness.run.recovery import redo_in_flight_step, serving_load_changed
    from harness.storage.run_files import SERVING_LOAD, read_serving_load, write_serving_load

    root = tmp_path / "state"
    with StateDirectory.open(root, CONFIG, lambda: Archive.from_seed(CONFIG, make_seed())) as state:
        _run_step(state, 0)
        state.commit(0, _record(0))
        state.archive.select_parents(1)
        state.store.record_rollout(state.archive, 1, 0, 0, rollout(state.archive, 1, 0, 0))
    before, after = "3f2a9c:1", "b71e05:0"  # Reef's `<incarnation>:<sequence>`
    with StateDirectory.open(root, CONFIG, lambda: pytest.fail("not a new run")) as state:
        asked: list[int] = []

        def serving(load: str | None):
            return lambda: asked.append(1) or load

        assert serving_load_changed(state, 1, serving(after)) is None  # nothing noted
        write_serving_load(root, 0, before)
        assert serving_load_changed(state, 1, serving(after)) is None  # noted for another step
        assert asked == []  # Reef is not asked when no load was noted for the open step
        write_serving_load(root, 1, before)
        assert read_serving_load(root) == (1, before)
        assert serving_load_changed(state, 1, serving(before)) is None
        assert serving_load_changed(state, 1, serving(None)) is None  # record-only Reef
        changed = serving_load_changed(state, 1, serving(after))
        assert changed == (before, after)
        events = EventLog(tmp_path / "events.jsonl")
        assert len(state.in_flight) == 1
        assert redo_in_flight_step(state, 1, events, changed)
        events.close()
        assert state.in_flight == ()
    kept = list((root / "guidance-run" / "archive").glob("superseded-step-000001-*.jsonl"))
    assert len(kept) == 1  # the journal is kept aside, never replayed
    with StateDirectory.open(root, CONFIG, lambda: pytest.fail("not a new run")) as state:
        assert state.in_flight == () and state.next_step == 1
    found = read_events(tmp_path / "events.jsonl")
    (event,) = [e for e in found if e["event"] == "in_flight_superseded"]
    assert (event["step"], event["slots"]) == (1, [[0, 0]])
    assert (event["served_under"], event["now_serving"]) == (before, after)
    (root / SERVING_LOAD).write_text('{"step": "one"}')
    with pytest.raises(ValueError, match=r"serving-load\.json is not a serving-load record"):
        read_serving_load(root)
