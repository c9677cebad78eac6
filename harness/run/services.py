"""The adapters of a run, and how the real ones are built from the run's settings.

`RunServices` is what `harness.run.step_loop.run_steps` runs against: Reef's channel, the
executor, the judge's scorer, and the step gate's adapters (Reef's training bridge and status
page for a trained run, `FrozenGate` for a frozen-guidance run), plus the run's event sink.
Tests build it from honest fakes; `production_services` builds the real ones, and `close`
releases what it opened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.adapters.executor.backends import ExecutionBackend
from harness.adapters.executor.client import ExecutionClient
from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.reef.channel import ReefChannel
from harness.adapters.reef.status import ReefStatusClient, StatusSource
from harness.adapters.reef.tinker_faults import TinkerReefChannel
from harness.adapters.reef.training_bridge import BridgeAddress, RayTrainingBridge, TrainingBridge
from harness.observe.events import EventSink, NullSink
from harness.run.gate import FrozenGate, StepGate
from harness.run.rollout import Executor
from harness.run.tinker_gate import TinkerGate, TinkerGateSettings
from harness.scorer import Scorer
from harness.settings.run_settings import RunSettings
from harness.settings.tinker import DEFAULT_API_KEY_ENV
from harness.storage.resume_state import RunIdentity


@dataclass
class RunServices:
    """The adapters of a run. `close` releases what `production_services` opened.

    A trained run has Reef's training `bridge` and `status` page (the controller builds its
    training barrier on them); a frozen-guidance run has `gate=FrozenGate()` and neither."""

    reef: ReefChannel | NoReef
    executor: Executor
    scorer: Scorer
    bridge: TrainingBridge | None
    status: StatusSource | None
    events: EventSink = field(default_factory=NullSink)
    closers: list[Callable[[], None]] = field(default_factory=list)
    gate: StepGate | None = None

    def close(self) -> None:
        for close in self.closers:
            close()


def production_services(
    settings: RunSettings,
    task_dir: Path,
    *,
    executor_url: str | None = None,
    bridge: TrainingBridge | None = None,
    events: EventSink | None = None,
    backend: ExecutionBackend | None = None,
    judge_poll_s: float | None = None,
) -> RunServices:
    """The real adapters: Reef at `settings.reef_url`, the configured executor backend (at
    `executor_url` when given), the FrontierCS judge at `settings.judge_url` with the task's case
    check (its verdicts polled every `judge_poll_s`, default the reference's 2 s), and the step
    gate of the run's mode: trained, Reef's Ray training bridge (address from
    `<run-dir>/slime-driver/runtime.yaml`) unless `bridge` is given, and Reef's status page;
    frozen, `FrozenGate` (no bridge: nothing is trained, no step waits); trained on Tinker,
    `TinkerGate` on Reef's status page (no bridge either). `backend` replaces the
    configured executor backend (the rehearsal's labelled stand-in)."""
    executor = ExecutionClient(backend or executor_backend(settings, executor_url))
    reef: ReefChannel | NoReef = (
        reef_channel(settings) if settings.arm_spec.guided else NoReef(settings.scenario)
    )
    polling = {} if judge_poll_s is None else {"poll_interval_s": judge_poll_s}
    scorer = FrontierCSScorer.for_task(
        task_dir, settings.judge_url, settings.judge_problem_id or None, **polling
    )
    status: ReefStatusClient | None = None
    gate: StepGate | None = None
    if settings.frozen:
        if bridge is not None:
            raise ValueError(
                f"{settings.config_path} describes a frozen-guidance run, which trains nothing "
                "and takes no training bridge; use serve.yaml for a trained run"
            )
        gate = FrozenGate()
    else:
        status = ReefStatusClient(settings.reef_url, token=settings.reef_token)
        if settings.training_backend == "tinker":
            gate = tinker_gate(settings, status, reef)
        elif bridge is None:
            address = BridgeAddress.read(settings.run_dir / "slime-driver" / "runtime.yaml")
            bridge = RayTrainingBridge(address)
    return RunServices(
        reef=reef,
        executor=executor,
        scorer=scorer,
        bridge=bridge,
        status=status,
        events=events or NullSink(),
        closers=[executor.close] + ([status.close] if status is not None else []),
        gate=gate,
    )


def reef_channel(settings: RunSettings) -> ReefChannel:
    """The run's Reef channel; on Tinker, one whose failed guidance calls name the Tinker fault
    read from Reef's log (`harness.adapters.reef.tinker_faults`)."""
    if settings.training_backend != "tinker":
        return ReefChannel(settings.reef_url, settings.scenario, token=settings.reef_token)
    return TinkerReefChannel(
        settings.reef_url,
        settings.scenario,
        token=settings.reef_token,
        reef_log=settings.run_dir / "reef" / "reef.log",
        key_env=(settings.tinker or {}).get("api_key_env") or DEFAULT_API_KEY_ENV,
    )


def tinker_gate(settings: RunSettings, status: StatusSource, reef: Any) -> TinkerGate:
    """The step gate of a trained run on Reef's Tinker backend (no training bridge: Reef's
    status page and the Tinker incumbent in `training.options.state-dir` prove a step); reading
    `reef`'s stored reports loads the scenario into a restarted Reef."""
    assert settings.checkpoint_dir is not None  # a Tinker run's manifest directory
    return TinkerGate(
        TinkerGateSettings(
            scenario=settings.scenario,
            manifest_dir=settings.checkpoint_dir,
            model=settings.model,
            lora_rank=settings.lora_rank,
        ),
        RunIdentity.from_dict(settings.identity()),
        status,
        load_scenario=reef.stored_reports,
    )


def executor_backend(settings: RunSettings, executor_url: str | None = None) -> ExecutionBackend:
    """The run's executor backend: the configured one (`harness.executor_backend` and
    `harness.executor`, docs/executors.md; at `executor_url` when given), with at most
    `executor_max_in_flight` requests in flight."""
    return settings.executor(executor_url)


class NoReef:
    """The Reef channel of an arm without a guidance model (`unguided`, `best-of-n`): there is
    no guidance call, so no receipt and nothing to report, and Reef need not run at all. It
    holds no reports; a guidance call or a report through it is a bug and raises."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.url = ""

    def guide(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        raise RuntimeError(f"{self.scenario}: this arm makes no guidance call (a bug)")

    def report(self, body: Mapping[str, Any], receipt: str) -> dict[str, Any]:
        raise RuntimeError(f"{self.scenario}: this arm reports nothing to Reef (a bug)")

    def reported_receipts(self) -> set[str]:
        return set()

    def stored_reports(self) -> list[Any]:
        return []

    def report_payload(self, record_id: str) -> dict[str, Any] | None:
        return None

    def runtime_load_id(self) -> str | None:
        return None
