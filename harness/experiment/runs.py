"""`guidance-ttt experiment PLAN.yaml`: arms × seeds of one task, run as a whole.

The plan's file is described in `harness.experiment.plan` and docs/experiments.md.

Without `stand_ins`, `settings:` names the settings file every run starts from (a
serve-frozen.yaml for the frozen `guidance-ttt` arm and the arms without a guidance model, a
serve.yaml for the trained arm); each run gets a copy with its arm, seed, grid, STEPS and state
directory filled in. The frozen and model-free runs run here (a `reef serve` is started per run
that calls the guidance model); a trained run is handed to `./run.sh` with that copy as
`GUIDANCE_TTT_SERVE_YAML`, so a GPU host runs the trained arm of the same plan.

Every run has its own state directory `<experiment>/<arm>-s<seed>` and resumes when the
command is run again (a finished run is skipped); `experiment.json` lists the runs and their
state, and `guidance-ttt status <experiment>` shows every run. The stand-in judge and executor
are shared by all runs of an experiment.
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.experiment.index import write_index
from harness.experiment.plan import Plan, PlannedRun
from harness.observe.wandb_sink import RunNames, name_wandb_runs
from harness.run.controller import ResumeRefused
from harness.run.spend import SpendLimitReached
from harness.settings.paths import REPO_ROOT, RUN_SH
from harness.settings.run_copy import (
    RunValues,
    fill_run,
    is_frozen,
    load_document,
    with_upstream,
    write_copy,
)
from harness.settings.run_settings import scenario_name
from harness.storage.command_lock import EXPERIMENT_LOCK, holding
from harness.storage.resume_state import RESUME_STATE, ResumeState


def _finished(state: Path, steps: int) -> bool:
    """Whether the run in `state` has committed all `steps` (its resume state says so)."""
    try:
        stored = ResumeState.load(state / RESUME_STATE)
    except Exception:  # damaged: the run itself names what is wrong
        return False
    return stored is not None and stored.next_step >= steps


def _best_of(state: Path) -> str:
    """`, best 23.8932 after 3 steps` from the run's resume state ("" when it has none)."""
    try:
        stored = ResumeState.load(state / RESUME_STATE)
    except Exception:  # damaged: the run itself names what is wrong
        return ""
    if stored is None or not stored.step_summaries:
        return ""
    best = stored.step_summaries[-1].get("best_raw_score")
    shown = "--" if best is None else f"{float(best):.4f}"
    return f" (best {shown} after {stored.next_step} steps)"


def run_experiment(plan: Plan, directory: Path, console: Console) -> dict[str, str]:
    """Run every run of `plan` under `directory` (`plan.parallel` at once), keeping
    `experiment.json` current and printing a line as each run ends; returns each run's outcome
    by its directory (`finished`, or why not). The directory's lock is taken first
    (`harness.storage.command_lock`): a second experiment there starts nothing."""
    directory.mkdir(parents=True, exist_ok=True)
    with holding(directory, "guidance-ttt experiment", EXPERIMENT_LOCK):
        return _run_all(plan, directory, console)


def _run_all(plan: Plan, directory: Path, console: Console) -> dict[str, str]:
    planned = plan.runs()
    status: dict[str, str] = {}
    write_index(directory, plan, status)
    runner = _StandInRunner(plan, directory, console) if plan.stand_ins else None
    try:
        if runner is not None:
            runner.start()

        number = {item.directory: k for k, item in enumerate(planned, 1)}

        def label(item: PlannedRun) -> str:
            return f"run {number[item.directory]}/{len(planned)} {item.directory}"

        def one(item: PlannedRun) -> str:
            state = directory / item.directory
            try:
                if _finished(state, plan.steps):  # known at once: nothing is started for it
                    return "finished"
                console.print(f"{label(item)}: starting", markup=False, soft_wrap=True)
                if runner is not None:
                    runner.run(item, state)
                else:
                    _settings_run(plan, item, state, console)
            except ResumeRefused as exc:
                if "already finished" not in str(exc):
                    return f"refused: {exc}"
                return "finished"
            except SpendLimitReached as exc:
                return f"stopped: {exc}"
            except Exception as exc:  # one run's failure must not stop the others
                return f"failed: {type(exc).__name__}: {exc}"
            return "finished"

        pool = ThreadPoolExecutor(plan.parallel)
        try:
            for item, outcome in zip(planned, pool.map(one, planned), strict=True):
                status[item.directory] = outcome
                write_index(directory, plan, status)
                shown = outcome + _best_of(directory / item.directory)
                console.print(f"{label(item)}: {shown}", markup=False, soft_wrap=True)
        except BaseException:  # a signal: the runs in flight are not waited for
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    finally:
        if runner is not None:
            runner.stop()
    return status


class _StandInRunner:
    """The rehearsal's stand-ins, started once and shared by every run of the experiment."""

    def __init__(self, plan: Plan, directory: Path, console: Console) -> None:
        self.plan, self.directory, self.console = plan, directory, console
        self._context: Any = None
        self._stack: Any = None

    def start(self) -> None:
        from harness.rehearsal.rehearse import stand_in_stack

        self._context = stand_in_stack(
            self.directory, self.plan.judge_cases, self.plan.judge_seed, self.console
        )
        self._stack = self._context.__enter__()

    def stop(self) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)

    def run(self, item: PlannedRun, state: Path) -> None:
        from harness.rehearsal.rehearse import RehearsalOptions, rehearse_run

        options = RehearsalOptions(
            steps=self.plan.steps,
            groups=self.plan.groups,
            rollouts=self.plan.rollouts,
            cases=self.plan.judge_cases,
            judge_seed=self.plan.judge_seed,
            arm=item.arm.name,
            parent_selection=item.arm.parent_selection,
            run_seed=item.arm.run_seed,
            max_tokens=self.plan.max_tokens,
            max_cost_usd=self.plan.max_cost_usd,
        )
        quiet = self.plan.parallel > 1  # interleaved live displays help no one
        console = Console(file=io.StringIO()) if quiet else self.console
        rehearse_run(self._stack, state, options, console, "guidance-ttt experiment")


def run_settings_document(plan: Plan, item: PlannedRun, state: Path) -> dict[str, Any]:
    """The plan's settings file with this run's arm, seed, grid, STEPS and state directory."""
    assert plan.settings is not None
    document = load_document(plan.settings)
    values = RunValues(
        state_dir=state,
        steps=plan.steps,
        groups=plan.groups,
        rollouts=plan.rollouts,
        arm=item.arm.name,
        parent_selection=item.arm.parent_selection,
        run_seed=item.arm.run_seed,
        max_cost_usd=plan.max_cost_usd,
        max_tokens=plan.max_tokens,
    )
    run = fill_run(document, values)
    run["harness"]["experiment"]["name"] = plan.name
    # One W&B group for the experiment, each run named by arm and seed, ids from the run's id:
    # for the harness and for Reef's tracker, which reads this copy.
    observability = document.setdefault("observability", {}) or {}
    document["observability"] = observability
    block = observability.setdefault("wandb", {}) or {}
    observability["wandb"] = block
    names = RunNames(plan.name, item.arm.name, item.arm.run_seed)
    name_wandb_runs(block, scenario_name(run["task"]), state, names)
    if is_frozen(document):  # runs here, maybe several at once: each its own Reef port
        from harness.adapters.reef.process import free_port

        document["reef"]["port"] = free_port()
        if not item.arm.guided:  # no guidance endpoint is called: name none
            document["inference"].update(
                {"upstream-url": "http://127.0.0.1:9", "upstream-model": "none (no guidance model)"}
            )
    return document


def _settings_run(plan: Plan, item: PlannedRun, state: Path, console: Console) -> None:
    """A run from the plan's settings file: here for frozen and model-free arms, `./run.sh`
    for a trained one."""
    from harness.settings.run_settings import RunSettings

    state.mkdir(parents=True, exist_ok=True)
    document = run_settings_document(plan, item, state)
    frozen = is_frozen(document)
    if frozen:  # this process runs it: its lock first (./run.sh takes its own)
        with holding(state, "guidance-ttt experiment"):
            path = write_copy(document, state / "serve-frozen.yaml")
            _frozen_run(RunSettings.load(path, base_dir=REPO_ROOT), path, console)
        return
    path = write_copy(document, state / "serve.yaml")
    from harness.adapters.child_process import start_tied

    # Tied to this command (a session of its own, SIGTERM if the experiment dies): a stop
    # of the experiment stops the trained run's whole stack with it.
    trained = start_tied([str(RUN_SH)], env={**os.environ, "GUIDANCE_TTT_SERVE_YAML": str(path)})
    try:
        returncode = trained.wait()
    except BaseException:
        trained.terminate()
        raise
    if returncode != 0:
        raise RuntimeError(f"./run.sh exited with {returncode} for {path}")


def _frozen_run(settings: Any, path: Path, console: Console) -> None:
    """A frozen or model-free run in this process, as `./run.sh` runs one: a `reef serve -c`
    of the run's copy when the arm calls the guidance model (behind the loopback key forwarder
    when `GUIDANCE_TTT_GUIDANCE_API_KEY` is set, docs/frozen.md), the executor at
    `GUIDANCE_TTT_EXECUTOR_URL` when set, through the one run assembly (`harness.run.assembly`:
    the event log, the console's live display, W&B when the settings enable it)."""
    from contextlib import ExitStack

    from harness.adapters.reef.process import running_reef
    from harness.run.assembly import AssemblyOptions, assemble_and_run
    from harness.settings.task_dirs import bundled_task_dir

    task = bundled_task_dir(settings.task)
    with ExitStack() as stack:
        if settings.arm_spec.guided:
            path = _behind_key_forwarder(settings, path, stack)
            stack.enter_context(
                running_reef(
                    settings.state_dir / "reef",
                    config=path,
                    port=settings.reef_port,
                    token=settings.reef_token,
                )
            )
        assemble_and_run(
            settings,
            task,
            (task / "instruction.md").read_text(encoding="utf-8"),
            AssemblyOptions(
                executor_url=os.environ.get("GUIDANCE_TTT_EXECUTOR_URL") or None, console=console
            ),
        )


def _behind_key_forwarder(settings: Any, path: Path, stack: Any) -> Path:
    """With `GUIDANCE_TTT_GUIDANCE_API_KEY` set, start the key forwarder
    (`harness.adapters.guidance_proxy`, the key in its environment only) and return a copy of
    the settings file whose upstream is the forwarder; else `path` unchanged."""
    from harness.adapters.guidance_proxy import KEY_VARIABLE
    from harness.adapters.guidance_proxy.process import running_forwarder
    from harness.adapters.reef.process import free_port

    if not os.environ.get(KEY_VARIABLE, "").strip():
        return path
    log = settings.state_dir / "guidance-proxy.log"
    url = stack.enter_context(
        running_forwarder(str(settings.guidance_upstream_url), free_port(), log)
    )
    return with_upstream(path, url)


# --- status over an experiment ---------------------------------------------------------------
