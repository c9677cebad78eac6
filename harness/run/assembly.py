"""A run assembled in this process: its services, sinks and closers built around the step loop
(`harness.run.step_loop.run_steps`), which it runs, and closed whatever ends it.

Every way of starting a run ends here — the Harbor agent (`harness.run.harbor_agent`, i.e.
`./run.sh` and `guidance-ttt run`), the rehearsal (`harness.rehearsal.rehearse`) and the runs of
an experiment (`harness.cli.experiment`) — so every run gets the same things:

- the real adapters (`harness.run.services.production_services`: Reef, the executor, the
  judge, the gate of the run's mode),
- its sinks: the event log (`<state>/guidance-run/events.jsonl`), the live display, and W&B
  when `observability.wandb` is enabled in the run's settings file (`harness.run.watchers`);
  a failing display or W&B never reaches the run (`Fanout`),
- the spend limit, which `run_steps` checks at every step boundary,
- and the closers, run whatever ends the run: the events stop first (a rollout still in
  flight when a signal stops the step emits nothing more), then the sinks and services close.

Nothing else in `harness/` or `tttd/` builds a run's services (a test greps for it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.executor.backends import ExecutionBackend
from harness.adapters.reef.training_bridge import TrainingBridge
from harness.contract import load_contract
from harness.observe.cost import PriceTable, load_prices
from harness.observe.events import EventLog, Fanout
from harness.observe.progress import ProgressDisplay
from harness.run.services import production_services
from harness.run.step_loop import RunResult, run_steps
from harness.run.watchers import wandb_sink
from harness.settings.run_settings import RunSettings
from harness.storage.run_files import event_log_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AssemblyOptions:
    """How one run is assembled, beyond its settings: where the executor is (`executor_url`, or
    a whole `backend`, the rehearsal's labelled stand-in), Reef's training bridge for a trained
    run (default: Reef's Ray bridge from the run directory), the console of the live display
    (default: stderr), the most rollouts at once (default: the settings'), the controller's
    overrides (e.g. the training barrier's poll interval) and how often the judge's verdicts are
    polled (default: the reference's 2 s)."""

    executor_url: str | None = None
    backend: ExecutionBackend | None = None
    bridge: TrainingBridge | None = None
    console: Any = None  # a rich Console (run/ does not import rich itself)
    workers: int | None = None
    controller_overrides: Mapping[str, Any] | None = None
    judge_poll_s: float | None = None


def assemble_and_run(
    settings: RunSettings, task_dir: Path, problem: str, how: AssemblyOptions | None = None
) -> RunResult:
    """Run (or resume) the run of `settings` on the task in `task_dir`, with `problem` as the
    task text, and return its result; every service and sink is closed on the way out, whatever
    ends the run. Raises what `run_steps` raises."""
    how = how or AssemblyOptions()
    services = production_services(
        settings,
        task_dir,
        executor_url=how.executor_url,
        bridge=how.bridge,
        backend=how.backend,
        judge_poll_s=how.judge_poll_s,
    )
    try:
        prices = _prices(settings)
        models = (settings.model, services.executor.backend.model)
        log_file = EventLog(event_log_path(settings.state_dir))
        services.closers.append(log_file.close)
        display = ProgressDisplay(
            how.console,
            prices=prices,
            models=models,
            direction=load_contract(task_dir).score_direction,
        )
        services.closers.insert(0, display.close)
        watcher = wandb_sink(settings, prices=prices, models=models)  # None unless enabled
        if watcher is not None:
            services.closers.append(watcher.close)
        events = Fanout(log_file, display, *([watcher] if watcher else []))
        services.events = events
        services.closers.insert(0, events.close)  # no event reaches a sink once it closes
        return run_steps(
            settings,
            task_dir,
            problem,
            services,
            workers=how.workers,
            controller_overrides=how.controller_overrides,
        )
    finally:
        services.close()


def _prices(settings: RunSettings) -> PriceTable | None:
    """The price table for the live cost estimate; a broken one only costs the estimate (the
    spend limit loads its own and refuses a run it cannot price)."""
    try:
        return load_prices(settings_prices=settings.pricing)
    except (OSError, ValueError) as exc:
        log.warning("no cost estimate: %s", exc)
        return None
