"""End-to-end rehearsal on CPU: two steps of 2×4 through the real run loop.

Real: `reef serve` (record-level, tttd report contract), the local judge on a small generated
suite, the archive store and journal, the run controller. Stand-ins (see tests/rehearsal_support):
the guidance model (Reef's upstream fixture, one malformed answer), the executor (C++ variants of
the seed), and the training bridge fake fed with the rewards Reef stored.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from judge_fakes import LocalJudge

from harness.run.controller import ResumeRefused
from harness.run.services import executor_backend
from harness.run.step_loop import RunResult, run_steps
from harness.settings.run_settings import RunSettings
from harness.storage.library_json import library_json_bytes, read_library_json
from harness.storage.run_files import COMMITTED_LIBRARY
from harness.storage.store import read_committed
from tests.openai_fixture import OpenAIFixture
from tests.reef_fixtures import running_reef
from tests.rehearsal_support import (
    GuidanceScript,
    Journaled,
    ReefReports,
    StoredReport,
    executor_reply,
    journal,
    run_cpu_steps,
    services,
    task_dir,
    write_serve_yaml,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

G, R, STEPS = 2, 4, 2
MALFORMED_CALL = 2  # the third guidance call answers with two <guidance> blocks


@dataclass
class Rehearsal:
    settings: RunSettings
    result: RunResult
    guidance: OpenAIFixture
    executor: OpenAIFixture
    reef: ReefReports
    journal: list[Journaled]
    reports: list[StoredReport]
    task: Path
    exports: dict[int, LibraryAtCommit]


@dataclass(frozen=True)
class LibraryAtCommit:
    """What the state directory held the moment a step's commit finished."""

    library: bytes
    committed: bytes  # the committed archive of the store, in library.json bytes
    recorded_sha256: str


class CommitWatcher:
    """An event observer that snapshots committed-library.json at every `step_committed`."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.seen: dict[int, LibraryAtCommit] = {}

    def emit(self, kind: str, **fields: object) -> None:
        if kind != "step_committed":
            return
        run_dir = self.state_dir / "guidance-run"
        state = json.loads((run_dir / "resume-state.json").read_text())
        self.seen[int(fields["step"])] = LibraryAtCommit(
            (self.state_dir / COMMITTED_LIBRARY).read_bytes(),
            library_json_bytes(read_committed(run_dir / "archive")[0]),
            state["committed_library_sha256"],
        )


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rehearsal]:
    root = tmp_path_factory.mktemp("rehearsal")
    task = task_dir()
    if not (task / "solution" / "seed.json").is_file():
        pytest.skip(f"{task}/solution/seed.json (the task's seed archive) is missing")
    with (
        LocalJudge(root / "judge", "--generated-cases", "2", "--seed", "11") as judge,
        OpenAIFixture(GuidanceScript(malformed=[MALFORMED_CALL])) as guidance,
        OpenAIFixture(executor_reply) as executor,
        running_reef(root / "reef", upstream=guidance) as reef,
    ):
        settings = write_serve_yaml(
            root / "serve.yaml",
            state_dir=root / "state",
            reef_port=reef.port,
            judge_url=judge.url,
            groups=G,
            rollouts=R,
            steps=STEPS,
        )
        watcher = CommitWatcher(settings.state_dir)
        result = run_cpu_steps(settings, executor.v1_url, task, observer=watcher)
        stored = ReefReports(reef.url, settings.scenario)
        yield Rehearsal(
            settings,
            result,
            guidance,
            executor,
            stored,
            journal(settings.state_dir),
            stored.reports(),
            task,
            watcher.seen,
        )


def test_two_steps_of_two_by_four_are_committed(rehearsal: Rehearsal) -> None:
    result = rehearsal.result
    assert (result.start_step, result.next_step) == (0, STEPS)
    assert [s["step"] for s in result.step_summaries] == [0, 1]
    assert all(s["sampled_rollouts"] == G * R for s in result.step_summaries)
    state = json.loads(
        (rehearsal.settings.state_dir / "guidance-run/resume-state.json").read_text()
    )
    assert state["next_step"] == STEPS
    archive, committed_step = read_committed(rehearsal.settings.state_dir / "guidance-run/archive")
    assert committed_step == STEPS - 1 and archive.puct_T == STEPS * G * R
    exported = read_library_json(rehearsal.settings.state_dir / COMMITTED_LIBRARY)
    assert set(exported.entries) == set(archive.entries)


def test_committed_library_json_is_the_committed_archive_after_every_step(
    rehearsal: Rehearsal,
) -> None:
    assert sorted(rehearsal.exports) == list(range(STEPS))
    for step, seen in rehearsal.exports.items():
        assert seen.library == seen.committed, f"step {step}: export differs from the store"
        assert hashlib.sha256(seen.library).hexdigest() == seen.recorded_sha256
        archive = library_from_bytes(seen.library)
        assert archive.last_step() == step and archive.puct_T == (step + 1) * G * R
    final = rehearsal.settings.state_dir / COMMITTED_LIBRARY
    assert read_library_json(final).puct_T == STEPS * G * R


def library_from_bytes(data: bytes):  # the project's reader, through a real file
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "library.json"
        path.write_bytes(data)
        return read_library_json(path)


def test_every_report_references_exactly_its_own_receipt(rehearsal: Rehearsal) -> None:
    receipts = rehearsal.reef.inferences()
    assert len(receipts) == STEPS * G * R, "exactly one guidance sample per rollout"
    assert len(rehearsal.reports) == STEPS * G * R
    by_entry = {j.entry["id"]: j for j in rehearsal.journal}
    for report in rehearsal.reports:
        journaled = by_entry[report.metadata["library_entry_id"]]
        assert report.references == (journaled.entry["metadata"]["agent_record_id"],)
    assert sorted(r.references[0] for r in rehearsal.reports) == sorted(receipts)


def test_malformed_guidance_skips_executor_and_reports_zero(rehearsal: Rehearsal) -> None:
    malformed = [
        j for j in rehearsal.journal if j.entry["verifier_status"] == "guidance_format_error"
    ]
    assert len(malformed) == 1
    entry = malformed[0].entry
    assert entry["verifier_reward"] == 0.0 and entry["guidance"] == ""
    assert entry["metadata"]["guidance_format_ok"] is False
    assert entry["metadata"]["execution_text"] == "" and entry["solution"] == ""
    assert entry["verifier_message"] == "expected exactly one complete <guidance> block"
    # The executor was called once per well-formed rollout, never with the malformed answer.
    well_formed = [j for j in rehearsal.journal if j.entry["metadata"]["guidance_format_ok"]]
    calls = rehearsal.executor.completion_requests()
    assert len(calls) == len(well_formed) == STEPS * G * R - 1
    assert not any("or rows" in json.dumps(c.body) for c in calls)
    report = next(r for r in rehearsal.reports if r.metadata["library_entry_id"] == entry["id"])
    assert report.score == 0.0
    assert report.feedback == f"guidance_format_error: {entry['verifier_message']}"
    assert report.references == (entry["metadata"]["agent_record_id"],)


def test_no_policy_message_contains_code(rehearsal: Rehearsal) -> None:
    archive, _ = read_committed(rehearsal.settings.state_dir / "guidance-run/archive")
    code_lines = {
        line.strip()
        for entry in archive.entries.values()
        for line in entry.solution.splitlines()
        if len(line.strip()) > 25 and any(mark in line for mark in ";{}()")
    }
    assert len(code_lines) > 20, "the check must have code to look for"
    requests = rehearsal.guidance.completion_requests()
    assert len(requests) == STEPS * G * R
    seed = next(e for e in archive.entries.values() if e.timestep == 0)
    shown = "".join(m["content"] for m in requests[0].body["messages"])
    assert seed.summary in shown, "the parent's summary must reach the policy (non-vacuous check)"
    for request in requests:
        text = "\n".join(m["content"] for m in request.body["messages"])
        leaked = [line for line in code_lines if line in text]
        assert not leaked, f"policy message contains code: {leaked[:3]}"
        assert "lora_path" not in request.body


def test_archive_journal_and_reef_reports_agree_slot_by_slot(rehearsal: Rehearsal) -> None:
    archive, _ = read_committed(rehearsal.settings.state_dir / "guidance-run/archive")
    journaled = {(j.step, j.group, j.rollout): j.entry for j in rehearsal.journal}
    reported = Counter(r.slot for r in rehearsal.reports)
    grid = {(s, g, r) for s in range(STEPS) for g in range(G) for r in range(R)}
    assert set(journaled) == grid and len(rehearsal.journal) == len(grid)
    assert set(reported) == grid and set(reported.values()) == {1}, "one report per slot"
    for report in rehearsal.reports:
        entry = journaled[report.slot]
        meta = report.metadata
        assert archive.entries[entry["id"]].to_dict() == entry
        assert meta["library_entry_id"] == entry["id"]
        assert report.score == entry["verifier_reward"]
        assert report.feedback == f"{entry['verifier_status']}: {entry['verifier_message']}"
        assert meta["comparison_set"] == f"tttd-step-{meta['step']}-group-{meta['group']}"
        assert meta["parent_id"] == entry["parent_id"]
        assert meta["archive_timestep"] == entry["timestep"] == meta["step"] + 1
        assert (meta["groups_per_step"], meta["rollouts_per_group"]) == (G, R)
        assert meta["algorithm"] == "ttt-discover" and meta["guidance_ttt"] is True
        assert meta["prompt_mode"] == "summary_only"
        group = archive.groups[entry["metadata"]["group_uid"]]
        assert entry["id"] in group.entry_ids and group.selected_node_id == entry["parent_id"]


def test_search_value_is_the_childs_raw_score_in_reefs_records(rehearsal: Rehearsal) -> None:
    by_entry = {j.entry["id"]: j.entry for j in rehearsal.journal}
    differs_from_parent = 0
    for report in rehearsal.reports:
        child = by_entry[report.metadata["library_entry_id"]]
        assert report.metadata["search_value"] == child["verifier_raw_score"]
        parent = by_entry.get(child["metadata"]["selected_parent_entry_id"])
        parent_score = (
            parent["verifier_raw_score"] if parent is not None else rehearsal_seed_score(rehearsal)
        )
        differs_from_parent += report.metadata["search_value"] != parent_score
    valid = [r for r in rehearsal.reports if r.feedback.startswith("valid:")]
    assert valid and all(isinstance(r.metadata["search_value"], float) for r in valid)
    failed = [r for r in rehearsal.reports if not r.feedback.startswith("valid:")]
    assert failed and all(r.metadata["search_value"] is None for r in failed)
    assert differs_from_parent > 0, "the check must see a child whose score is not its parent's"


def rehearsal_seed_score(rehearsal: Rehearsal) -> float:
    archive, _ = read_committed(rehearsal.settings.state_dir / "guidance-run/archive")
    (seed,) = {e.verifier_raw_score for e in archive.entries.values() if e.timestep == 0}
    return seed


def test_entries_carry_the_audit_metadata(rehearsal: Rehearsal) -> None:
    statuses = Counter(j.entry["verifier_status"] for j in rehearsal.journal)
    assert statuses["valid"] > 0 and statuses["invalid"] > 0
    assert statuses["parse_error"] > 0 and statuses["execution_error"] > 0
    backend = executor_backend(rehearsal.settings, rehearsal.executor.v1_url).safe_dict()
    assert backend["concurrency"] == 8  # serve.yaml's executor_max_in_flight, the reference's
    for j in rehearsal.journal:
        meta = j.entry["metadata"]
        assert meta["guidance_generation_attempts"] == 1
        assert meta["prompt_mode"] == "summary_only"
        assert meta["summary_semantics"] == "canonical_full_candidate"
        assert set(meta["guidance_prompt"]) == {"system", "user"}
        assert meta["execution_backend"] == backend
        if j.entry["verifier_status"] == "execution_error":
            assert j.entry["verifier_message"].startswith("ExecutionHTTPError: ")
        if j.entry["verifier_status"] == "valid":
            assert meta["execution_response_metadata"]["api_attempts"] == 1
            assert meta["verification_artifacts"]["case_count"] == 2


def test_result_lists_receipts_of_well_formed_rollouts(rehearsal: Rehearsal) -> None:
    reef = rehearsal.result.reef_metadata()
    well_formed = [j for j in rehearsal.journal if j.entry["metadata"]["guidance_format_ok"]]
    assert sorted(reef["agent_record_ids"]) == sorted(
        j.entry["metadata"]["agent_record_id"] for j in well_formed
    )
    assert set(reef) == {
        "agent_record_ids",
        "all_agent_record_ids",
        "start_step",
        "next_step",
        "runtime_load_id",
        "step_summaries",
    }


def test_a_finished_run_refuses_to_start_again(rehearsal: Rehearsal) -> None:
    adapters = services(rehearsal.settings, rehearsal.executor.v1_url, rehearsal.task)
    try:
        with pytest.raises(ResumeRefused, match="run already finished"):
            run_steps(rehearsal.settings, rehearsal.task, "problem", adapters)
    finally:
        adapters.close()


@pytest.mark.parametrize(
    ("edit", "refusal"),
    [
        (
            lambda d: d["inference"].update({"tensor-parallel-size": 2}),
            "inference_tensor_parallel_size stored 1, requested 2",
        ),
        (
            lambda d: d["training"]["options"].update({"tensor-model-parallel-size": 1}),
            "megatron_tensor_parallel_size stored 2, requested 1",
        ),
    ],
)
def test_a_resume_with_a_changed_tp_size_refuses_naming_the_key(
    rehearsal: Rehearsal, tmp_path: Path, edit, refusal: str
) -> None:
    document = yaml.safe_load(rehearsal.settings.config_path.read_text())
    edit(document)
    changed = tmp_path / "serve.yaml"
    changed.write_text(yaml.safe_dump(document, sort_keys=False))
    settings = RunSettings.load(changed, environ={}, base_dir=tmp_path)
    assert settings.state_dir == rehearsal.settings.state_dir
    before = (settings.state_dir / "guidance-run/resume-state.json").read_bytes()
    adapters = services(settings, rehearsal.executor.v1_url, rehearsal.task)
    try:
        with pytest.raises(ResumeRefused, match=refusal):
            run_steps(settings, rehearsal.task, "problem", adapters)
    finally:
        adapters.close()
    assert (settings.state_dir / "guidance-run/resume-state.json").read_bytes() == before


#: The reference's entry metadata keys (its harness/agent.py `LibraryEntry(metadata=...)`).
REFERENCE_ENTRY_METADATA = {
    "group_uid",
    "selected_node_id",
    "selected_parent_entry_id",
    "selected_parent_solution_sha256",
    "guidance_format_ok",
    "guidance_generation_attempts",
    "raw_guidance_text",
    "guidance_prompt",
    "execution_text",
    "raw_model_summary",
    "prompt_mode",
    "summary_semantics",
    "execution_backend",
    "execution_response_metadata",
    "execution_response_usage",
    "verification_artifacts",
}
#: Ours beside them (docs/differences.md, row 68); `adds_to_tree` only in the arms without a
#: tree, `withheld_model_summary`/`summary_withheld` only for a summary that carried code.
OUR_ENTRY_METADATA = {
    "step",
    "group",
    "rollout",
    "agent_record_id",
    "guidance_response_usage",
    "arm",
    "parent_selection",
    "run_seed",
}
#: The reference's `execution_response_metadata` keys for an answer whose body names its model
#: but no provider, as the stand-in executor's does (its harness/execution.py).
REFERENCE_EXECUTION_METADATA = {
    "provider",
    "backend",
    "api_attempts",
    "api_elapsed_s",
    "purpose",
    "api_response_model",
    "finish_reason",
}
#: The reference's `verification_artifacts` keys of a judged `done` answer (harness/scorer.py).
REFERENCE_DONE_ARTIFACTS = {
    "code",
    "problem_id",
    "submission_id",
    "judge_status",
    "score_unbounded",
}


def test_a_valid_rollouts_records_have_the_references_shapes(rehearsal: Rehearsal) -> None:
    """Reference harness/agent.py and harness/scorer.py: a valid candidate's `verifier_message`
    is `accepted` and its report's feedback `valid: accepted`; the entry's sub-records carry the
    reference's keys; where no executor answer came, metadata and usage are `{}` (not null), and
    a rollout the judge never saw has `verification_artifacts` `{}`. Read back from Reef's stored
    reports and the committed-library.json the run wrote."""
    exported = json.loads((rehearsal.settings.state_dir / COMMITTED_LIBRARY).read_text())
    entries = [e for e in exported["entries"].values() if e["timestep"] >= 1]
    reports = {r.metadata["library_entry_id"]: r for r in rehearsal.reports}
    assert len(entries) == STEPS * G * R
    seen = Counter()
    for entry in entries:
        meta, status = entry["metadata"], entry["verifier_status"]
        seen[status] += 1
        assert set(meta) - {"adds_to_tree"} == REFERENCE_ENTRY_METADATA | OUR_ENTRY_METADATA
        feedback = reports[entry["id"]].feedback
        assert feedback == f"{status}: {entry['verifier_message']}"
        executed = status not in ("guidance_format_error", "execution_error")
        if executed:
            assert set(meta["execution_response_metadata"]) == REFERENCE_EXECUTION_METADATA
            assert meta["execution_response_metadata"]["purpose"] == "execution"
            assert isinstance(meta["execution_response_usage"], dict)
        else:
            assert meta["execution_response_metadata"] == {}
            assert meta["execution_response_usage"] == {}
        if status in ("guidance_format_error", "execution_error", "parse_error"):
            assert meta["verification_artifacts"] == {}
        if status == "parse_error":  # the reference's message, for the contract's language
            assert entry["verifier_message"] == "no cpp code block found in <solution>"
        if status == "valid":
            assert entry["verifier_message"] == "accepted" and feedback == "valid: accepted"
            artifacts = meta["verification_artifacts"]
            assert set(artifacts) >= REFERENCE_DONE_ARTIFACTS
            assert artifacts["judge_status"] == "done" and artifacts["code"] == entry["solution"]
            assert entry["failure_mode"] is None
    assert seen["valid"] and seen["guidance_format_error"] and seen["execution_error"]
