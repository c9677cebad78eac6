"""Shared pieces of the CPU rehearsal, crash and Harbor tests of the full run loop.

What is real here: `reef serve` (record-only tttd recipe, `tests.reef_fixtures`), the local judge
(`python -m judges`), the run loop itself, the archive store and the run controller. What stands
in for what cannot run on CPU:

* the guidance model (SGLang behind Reef) is Reef's upstream `OpenAIFixture` answering with
  `GuidanceScript`, and the executor (GPT-OSS / GLM) an `OpenAIFixture` answering with
  `executor_reply` (both in `harness.rehearsal.stand_ins`, which `guidance-ttt rehearse` uses);
* Reef's training bridge is `tests.bridge_fake.FakeTrainingBridge`, fed with the rewards Reef
  actually stored (`ReefReports.step_rewards`), first report per slot, as Reef's grouping does.

Run as a module, this file is the crash-test driver: `python -m tests.rehearsal_support ...`
runs `harness.run.step_loop.run_steps` with those adapters and prints the result as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the driver runs as `python -m tests.rehearsal_support`
    sys.path.insert(0, str(REPO))

from harness.adapters.executor.client import ExecutionClient  # noqa: E402
from harness.adapters.judge.frontiercs import FrontierCSScorer  # noqa: E402
from harness.adapters.reef.channel import ReefChannel  # noqa: E402
from harness.adapters.reef.status import ReefStatusClient  # noqa: E402
from harness.observe.events import EventLog, EventSink, Fanout  # noqa: E402
from harness.rehearsal.stand_ins import (  # noqa: E402,F401  (re-exported for the tests)
    GUIDANCE_CYCLE,
    NO_SOLUTION,
    REFUSED,
    TASK_DIR,
    VARIANTS,
    GuidanceScript,
    executor_reply,
    seed_source,
    task_dir,
)
from harness.run.crash_hook import ENV_VAR, crash_point  # noqa: E402
from harness.run.gate import FrozenGate  # noqa: E402
from harness.run.services import RunServices, executor_backend  # noqa: E402
from harness.run.step import StepInterrupted  # noqa: E402
from harness.run.step_loop import RunResult, run_steps  # noqa: E402
from harness.settings.run_settings import RunSettings  # noqa: E402
from harness.storage.atomic import temp_path_for  # noqa: E402
from harness.storage.run_files import COMMITTED_LIBRARY, event_log_path  # noqa: E402
from harness.storage.store import HEAD  # noqa: E402
from tests.bridge_fake import BridgeFaults, FakeTrainingBridge  # noqa: E402

TOKEN = "reef-local"
POLL_S = 0.05
#: Seconds between polls for a judge verdict: the local judge answers a stand-in's program in a
#: fraction of a second, and the reference's 2 s would leave a rehearsal idle most of the time.
JUDGE_POLL_S = 0.1


# --- settings ------------------------------------------------------------------------------------


def write_serve_yaml(
    path: Path,
    *,
    state_dir: Path,
    reef_port: int,
    judge_url: str,
    groups: int,
    rollouts: int,
    steps: int,
    task: str = "polyomino_packing",
    executor_backend: str = "gpt_oss_120b",
    **harness: Any,
) -> RunSettings:
    """A serve.yaml for a test run (the repository's file with the grid, STEPS, ports and state
    moved; `harness` adds settings to its harness section), and the `RunSettings` the harness
    reads from it."""
    document = yaml.safe_load((REPO / "serve.yaml").read_text())
    document["reef"].update(host="127.0.0.1", port=reef_port, token=TOKEN)
    document["reef"]["run-dir"] = str(state_dir / "stack")
    document["recipe"]["config"].update({"groups-per-step": groups, "rollouts-per-group": rollouts})
    config = document["training"]["config"]
    config.update(
        steps=steps,
        task=task,
        state_dir=str(state_dir),
        checkpoint_dir=str(state_dir / "checkpoints"),
    )
    config["harness"] = {
        "executor_backend": executor_backend,
        "gpt_oss_reasoning_effort": "high",
        "judge_url": judge_url,
        "judge_problem_id": "",  # the task's own (its contract.json)
        **harness,
    }
    document["training"]["options"]["global-batch-size"] = groups * rollouts
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return RunSettings.load(path, environ={}, base_dir=path.parent)


# --- reading back what Reef stored -----------------------------------------------------------


@dataclass(frozen=True)
class StoredReport:
    """One report as Reef stored it."""

    record_id: str
    sequence: int
    references: tuple[str, ...]
    score: float
    feedback: str
    metadata: dict[str, Any]

    @property
    def slot(self) -> tuple[int, int, int]:
        return (self.metadata["step"], self.metadata["group"], self.metadata["rollout"])


class ReefReports:
    """Reads a scenario's records back from Reef (`GET /reef/scenarios/{s}/records[/{id}]`);
    stored records never change, so their details are cached."""

    def __init__(self, url: str, scenario: str, token: str = TOKEN) -> None:
        self.url, self.scenario = url.rstrip("/"), scenario
        self._headers = {"Authorization": f"Bearer {token}"}
        self._details: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _records(self, request_type: str) -> list[dict[str, Any]]:
        found, after = [], 0
        while after is not None:
            response = httpx.get(
                f"{self.url}/reef/scenarios/{self.scenario}/records",
                params={"request_type": request_type, "limit": 100, "after_sequence": after},
                headers=self._headers,
                timeout=30,
            )
            if response.status_code == 404:
                return []
            response.raise_for_status()
            page = response.json()
            found += page["records"]
            after = page["next_after_sequence"]
        return found

    def inferences(self) -> list[str]:
        """Receipts of every guidance call Reef recorded, in order."""
        return [r["agent_record_id"] for r in self._records("inference")]

    def reports(self) -> list[StoredReport]:
        """Every stored report, in Reef's sequence order, with its payload."""
        out = []
        for summary in self._records("report"):
            record_id = summary["agent_record_id"]
            with self._lock:
                detail = self._details.get(record_id)
            if detail is None:
                response = httpx.get(
                    f"{self.url}/reef/scenarios/{self.scenario}/records/{record_id}",
                    headers=self._headers,
                    timeout=30,
                )
                response.raise_for_status()
                detail = response.json()
                with self._lock:
                    self._details[record_id] = detail
            payload = detail["payload"]
            out.append(
                StoredReport(
                    record_id,
                    detail["sequence"],
                    tuple(detail["references"]),
                    float(payload["score"]),
                    payload["feedback"],
                    payload["metadata"],
                )
            )
        return out

    def step_rewards(self, step: int, groups: int, rollouts: int) -> list[list[float]] | None:
        """The step's G×R rewards once every slot has a report (first report per slot, as Reef's
        tttd grouping keeps it), else None."""
        first: dict[tuple[int, int], float] = {}
        for report in self.reports():
            if report.metadata["step"] == step:
                first.setdefault(
                    (report.metadata["group"], report.metadata["rollout"]), report.score
                )
        if len(first) < groups * rollouts:
            return None
        return [[first[(g, r)] for r in range(rollouts)] for g in range(groups)]


@dataclass(frozen=True)
class Journaled:
    """One journal line of a rollout, as the store wrote it."""

    step: int
    group: int
    rollout: int
    entry: dict[str, Any]


def journal(state_dir: Path) -> list[Journaled]:
    """Every rollout line of every step journal under `<state>/guidance-run/archive/`, in file
    order (committed and in-flight steps alike; the groups lines are skipped)."""
    found = []
    for path in sorted((state_dir / "guidance-run" / "archive").glob("step-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "entry" in record:
                found.append(
                    Journaled(record["step"], record["group"], record["rollout"], record["entry"])
                )
    return found


def fake_bridge(settings: RunSettings) -> FakeTrainingBridge:
    """The training-bridge factory the tests hand to the step loop and the Harbor agent: a fake
    slime-driver on the run's state directory that trains a step once Reef holds its grid."""
    reports = ReefReports(settings.reef_url, settings.scenario, settings.reef_token or TOKEN)
    return FakeTrainingBridge(
        settings.state_dir,
        groups_per_step=settings.groups_per_step,
        rollouts_per_group=settings.rollouts_per_group,
        lora_rank=settings.lora_rank,
        reports_source=lambda step: reports.step_rewards(
            step, settings.groups_per_step, settings.rollouts_per_group
        ),
    )


def failing_bridge(settings: RunSettings) -> FakeTrainingBridge:
    """Like `fake_bridge`, but Reef's training of every step fails (`training_failed`)."""
    bridge = fake_bridge(settings)
    bridge.faults = BridgeFaults(fail_in="training_failed")
    return bridge


def services(
    settings: RunSettings, executor_url: str, task: Path, observer: EventSink | None = None
) -> RunServices:
    """The run's adapters for a CPU rehearsal: real Reef, executor client, judge client; for a
    trained run the status page and the fake training bridge, for a frozen-guidance run (a
    serve-frozen.yaml) the frozen gate and no bridge at all. `observer`, when given, sees every
    event too."""
    executor = ExecutionClient(executor_backend(settings, executor_url))
    events = EventLog(event_log_path(settings.state_dir))
    adapters = RunServices(
        reef=ReefChannel(settings.reef_url, settings.scenario, token=settings.reef_token),
        executor=executor,
        scorer=FrontierCSScorer.for_task(
            task,
            settings.judge_url,
            settings.judge_problem_id or None,
            poll_interval_s=JUDGE_POLL_S,
        ),
        bridge=None,
        status=None,
        events=events if observer is None else Fanout(events, observer),
        closers=[executor.close, events.close],
        gate=FrozenGate() if settings.frozen else None,
    )
    if not settings.frozen:
        status = ReefStatusClient(settings.reef_url, token=settings.reef_token)
        adapters.bridge, adapters.status = fake_bridge(settings), status
        adapters.closers.append(status.close)
    return adapters


def run_cpu_steps(
    settings: RunSettings,
    executor_url: str,
    task: Path,
    *,
    workers: int | None = None,
    observer: EventSink | None = None,
) -> RunResult:
    """Run (or resume) the configured steps with the CPU rehearsal's adapters and a fast barrier
    poll, closing the adapters afterwards (`observer` sees every event as it happens)."""
    adapters = services(settings, executor_url, task, observer)
    try:
        return run_steps(
            settings,
            task,
            (task / "instruction.md").read_text(),
            adapters,
            workers=workers,
            controller_overrides={"poll_interval_s": POLL_S, "deadline_s": 120.0},
        )
    finally:
        adapters.close()


# --- the crash driver --------------------------------------------------------------------------


def install_write_crash_points() -> None:
    """Crash points inside the three commit writes, for the driver process only: the archive
    head (`archive_head_write`; the store's creation is write 1, step 0's commit write 2),
    `committed-library.json` (`library_export_write`) and `resume_state_write`. Each leaves a
    fully written temp file that was never renamed, exactly what a kill between fsync and rename
    leaves."""
    import harness.storage.library_json as library_json_module
    import harness.storage.resume_state as resume_state_module
    import harness.storage.store as store_module

    def cut_short(path: Path, data: bytes, point: str) -> None:
        if not os.environ.get(ENV_VAR, "").startswith(point):
            return
        temp = temp_path_for(Path(path))
        temp.write_bytes(data)
        crash_point(point)
        temp.unlink()

    write_bytes = store_module.atomic_write_bytes
    write_json = resume_state_module.atomic_write_json
    write_library = library_json_module.atomic_write_bytes

    def library_write(path: Path, data: bytes) -> None:
        if Path(path).name == COMMITTED_LIBRARY.name:
            cut_short(path, data, "library_export_write")
        write_library(path, data)

    def head_write(path: Path, data: bytes) -> None:
        if Path(path).name == HEAD:
            cut_short(path, data, "archive_head_write")
        write_bytes(path, data)

    def state_write(path: Path, value: Any) -> None:
        cut_short(path, json.dumps(value).encode(), "resume_state_write")
        write_json(path, value)

    store_module.atomic_write_bytes = head_write
    library_json_module.atomic_write_bytes = library_write
    resume_state_module.atomic_write_json = state_write


def main(argv: Sequence[str] | None = None) -> int:
    """Run the loop as a separate process (the crash tests kill it): prints the result as JSON,
    exits 3 when the step was interrupted, 1 on any other error."""
    parser = argparse.ArgumentParser(prog="python -m tests.rehearsal_support")
    parser.add_argument("--serve-yaml", type=Path, required=True)
    parser.add_argument("--task-dir", type=Path, required=True)
    parser.add_argument("--executor-url", required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    install_write_crash_points()
    settings = RunSettings.load(args.serve_yaml, environ={}, base_dir=args.serve_yaml.parent)
    try:
        result = run_cpu_steps(settings, args.executor_url, args.task_dir, workers=args.workers)
    except StepInterrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 3
    print(json.dumps(result.reef_metadata()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
