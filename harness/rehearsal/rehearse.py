"""`guidance-ttt rehearse STATE_DIR`: frozen-guidance mode end to end on a CPU machine.

What runs for real: `reef serve -c STATE_DIR/serve-frozen.yaml` (Reef's record-only service with
the tttd report contract: a receipt for every guidance call, a validated report for every
score), the local judge (`python -m judges`, bubblewrap sandbox, a small generated Polyomino
suite), the run loop, archive store, journal, run controller (frozen gate: nothing is trained)
and the live G×R display. What stands in for the two models, clearly labelled in every record
(`harness.rehearsal.stand_ins`): a scripted guidance model behind Reef (model name
`scripted-guidance-stand-in`) and a scripted executor (`scripted-executor-stand-in`) that
answers with real C++ edits of the seed, each compiled and judged.

The settings file written into STATE_DIR is the repository's `serve-frozen.yaml` with the stand-
ins' addresses, free loopback ports, the grid and STEPS filled in; the harness and Reef read that
same file. With `--backend tinker` it is `serve-tinker.yaml` instead, and the guidance model is
trained: Reef's Tinker backend (its trainer, its sampler, the tttd recipe and loss) runs against
a stand-in for Tinker's service whose sampler answers with the scripted guidance
(`harness.rehearsal.tinker_stack`), and every step passes the Tinker gate
(`harness.run.tinker_gate`: Reef's commit, its publication, the durable Tinker manifest).
Re-running the command on the same directory resumes the rehearsal (raise `--steps`
to continue a finished one). Every process it starts is stopped when it returns.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from harness.adapters.executor.backends import backend_from_name
from harness.adapters.judge.process import LocalJudge
from harness.contract import load_contract
from harness.observe.progress import counted
from harness.observe.wandb_sink import name_wandb_runs
from harness.rehearsal.openai_server import OpenAIFixture
from harness.rehearsal.reef_process import free_port, running_reef
from harness.rehearsal.stand_ins import (
    EXECUTOR_MODEL,
    GUIDANCE_MODEL,
    MALFORMED_CALL,
    SEED_RECORD,
    GuidanceScript,
    executor_reply,
    seed_edits,
    task_dir,
)
from harness.run.assembly import AssemblyOptions, assemble_and_run
from harness.run.controller import ResumeRefused
from harness.run.step_loop import RunResult
from harness.settings.paths import CHECK_RESULTS, FROZEN_TEMPLATE
from harness.settings.run_copy import RunValues, fill_run, load_document, write_copy
from harness.settings.run_settings import RunSettings, scenario_name
from harness.storage.command_lock import holding
from harness.storage.resume_state import RESUME_STATE, ResumeState

SETTINGS_FILE = "serve-frozen.yaml"
#: What `--backend` takes: the frozen rehearsal, or the trained one on the Tinker stand-in.
BACKENDS = ("frozen", "tinker")
COMMAND = "guidance-ttt rehearse"
TOKEN = "reef-local"


@dataclass(frozen=True)
class RehearsalOptions:
    """What `guidance-ttt rehearse` may change; the defaults run in about a minute per step on a
    2-core machine."""

    steps: int = 2
    groups: int = 2
    rollouts: int = 4
    cases: int = 2
    judge_seed: int = 11
    workers: int | None = None
    #: Keys of `observability.wandb` to set in the written settings file (e.g. enabled, mode).
    wandb: tuple[tuple[str, object], ...] = ()
    #: The experiment arm, parent selection and run seed (`harness.arms`); the arms without a
    #: guidance model start neither the guidance stand-in's Reef nor call it.
    arm: str = "guidance-ttt"
    parent_selection: str = "puct"
    run_seed: int = 0
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    #: Rehearse this task (any directory) instead of the template's, with a generic stand-in
    #: executor that edits the task's own seed; its judge is `judge_url`, else a local judge
    #: serving `frontiercs` (a FrontierCS checkout), else the task's own judge packages.
    task: Path | None = None
    judge_url: str | None = None
    frontiercs: Path | None = None
    #: The seed record inside the task (default: the template's shelf packer; a task's own
    #: solution/seed.json with --task).
    seed: str | None = None
    #: `harness.guidance.request.dialect` in the written settings (None: the template's).
    guidance_dialect: str | None = None
    #: `frozen` (serve-frozen.yaml: Reef record-only, nothing trained) or `tinker`
    #: (serve-tinker.yaml: Reef's Tinker backend trains the guidance LoRA on the Tinker stand-in,
    #: `harness.rehearsal.tinker_stack`).
    backend: str = "frozen"
    #: Seconds between polls for a judge verdict (None: the reference's 2 s, as a real run).
    #: The local judge answers a stand-in's program in a fraction of a second, so in-process
    #: callers that run many short rehearsals (the tests) poll faster.
    judge_poll_s: float | None = None

    @property
    def seed_record(self) -> str:
        return self.seed or (SEED_RECORD if self.task is None else "solution/seed.json")

    @property
    def task_dir(self) -> Path:
        """The rehearsed task's directory (absolute)."""
        return task_dir() if self.task is None else Path(self.task).resolve()


def default_state_dir(options: RehearsalOptions) -> Path:
    """Where a rehearsal's state goes by default: work/rehearsal, or work/rehearsal-<task> for
    `--task` (named after the task, not its path)."""
    name = "rehearsal" if options.task is None else f"rehearsal-{Path(options.task).resolve().name}"
    return Path("work") / (name if options.backend == "frozen" else f"{name}-{options.backend}")


def run_values(options: RehearsalOptions, state_dir: Path) -> RunValues:
    """What the rehearsal's settings copy carries of its own run."""
    return RunValues(
        state_dir=state_dir,
        steps=options.steps,
        groups=options.groups,
        rollouts=options.rollouts,
        arm=options.arm,
        parent_selection=options.parent_selection,
        run_seed=options.run_seed,
        max_cost_usd=options.max_cost_usd,
        max_tokens=options.max_tokens,
    )


def write_settings(
    path: Path,
    state_dir: Path,
    options: RehearsalOptions,
    *,
    guidance_url: str,
    judge_url: str,
    reef_port: int,
    task: str | None = None,
) -> RunSettings:
    """The repository's serve-frozen.yaml with the rehearsal's values, written to `path`
    (`task`, default the template's, names the Reef scenario, `guidance-ttt-<task>`)."""
    document = load_document(FROZEN_TEMPLATE)
    document["reef"].update(host="127.0.0.1", port=reef_port, token=TOKEN)
    document["inference"].update({"upstream-url": guidance_url, "upstream-model": GUIDANCE_MODEL})
    run = fill_run(document, run_values(options, state_dir))
    run["task"] = task or run["task"]
    if options.wandb:
        block = document.setdefault("observability", {}).setdefault("wandb", {})
        block.update(dict(options.wandb))
        name_wandb_runs(block, scenario_name(run["task"]), state_dir)
    run["harness"].update(
        executor_backend="gpt_oss_120b",
        gpt_oss_reasoning_effort="high",
        judge_url=judge_url,
        judge_problem_id="0" if options.task is None else "",  # a task's own: contract.json
        seed=options.seed_record,
    )
    run["harness"].pop("executor", None)  # the stand-in's address is given at run time
    if options.guidance_dialect is not None:
        run["harness"]["guidance"] = {"request": {"dialect": options.guidance_dialect}}
    header = (
        "# Written by `guidance-ttt rehearse`: the repository's serve-frozen.yaml with the\n"
        "# rehearsal's stand-in guidance model, judge, ports, grid and STEPS filled in.\n"
    )
    write_copy(document, path, header)
    return RunSettings.load(path, environ={}, base_dir=path.parent)


@dataclass(frozen=True)
class StandInStack:
    """What the runs of a rehearsal share: the local judge and the stand-in executor (each run
    that calls the guidance model starts its own stand-in for it, so no run's guidance depends
    on how many calls another run made)."""

    judge_url: str
    executor: OpenAIFixture


@contextmanager
def stand_in_stack(
    directory: Path,
    cases: int,
    judge_seed: int,
    console: Console,
    options: RehearsalOptions | None = None,
) -> Iterator[StandInStack]:
    """Start the local judge (its state under `directory/judge`) and the stand-in executor; stop
    them on exit. The template's task is judged on the generated suite
    `generated:<judge_seed>:<cases>`; with `options.task` the judge is `options.judge_url` or a
    local judge serving the task (`judge_flags`), and the executor edits that task's seed."""
    options = options or RehearsalOptions(cases=cases, judge_seed=judge_seed)
    task = options.task_dir
    with ExitStack() as stack:
        console.print("rehearse: starting the local judge and the stand-in executor")
        judge_url = options.judge_url
        if judge_url is None:
            flags = (
                ["--generated-cases", str(cases), "--seed", str(judge_seed)]
                if options.task is None
                else judge_flags(options, task)
            )
            judge = LocalJudge(Path(directory) / "judge", *flags, with_token=True)
            judge_url = stack.enter_context(judge).url
        reply = executor_reply
        if options.task is not None:
            seed = json.loads((task / options.seed_record).read_text(encoding="utf-8"))
            reply = seed_edits(str(seed["entry"]["solution"]), load_contract(task).fence_tag)
        executor = stack.enter_context(OpenAIFixture(reply, model=EXECUTOR_MODEL))
        yield StandInStack(judge_url, executor)


def judge_flags(options: RehearsalOptions, task: Path) -> list[str]:
    """The local judge's flags for `--task`: a FrontierCS checkout when given, else the task's
    own judge packages."""
    if options.frontiercs is not None:
        return ["--frontiercs", str(options.frontiercs)]
    if not (task / "judge").is_dir():
        raise ValueError(
            f"{task} has no judge/ packages: give --frontiercs CHECKOUT (a FrontierCS problem) "
            "or --judge-url URL (a running judge that serves the task's problem)"
        )
    return ["--task", str(task)]


def refuse_finished(state_dir: Path, steps: int) -> None:
    """`ResumeRefused` at once, before any stand-in, judge or `reef serve` starts, when the run
    in `state_dir` has already committed `steps` steps (the run controller would refuse too,
    after the start-up). A resume state that cannot be read is left to the run to report."""
    try:
        stored = ResumeState.load(Path(state_dir) / RESUME_STATE)
    except Exception:  # damaged: the run names what is wrong with it
        return
    if stored is not None and stored.next_step >= steps:
        raise ResumeRefused(
            f"run already finished: {state_dir} has {stored.next_step} of "
            f"{counted(steps, 'step')} committed; pass more steps (--steps, or `steps:` in a "
            "plan) to continue it, or name a new directory"
        )


def refuse_backend(options: RehearsalOptions) -> None:
    """`ValueError` at once for a backend the rehearsal does not have, and for `tinker` with an
    arm that calls no guidance model or with `--task` (the Tinker rehearsal trains the
    template task's guidance model)."""
    if options.backend not in BACKENDS:
        raise ValueError(f"rehearsal backend {options.backend!r}; choose one of {BACKENDS}")
    if options.backend == "tinker" and (options.arm != "guidance-ttt" or options.task):
        raise ValueError(
            "--backend tinker trains the guidance model of the template's task: use the "
            f"guidance-ttt arm without --task (got arm {options.arm}"
            + (f", task {options.task})" if options.task is not None else ")")
        )


def rehearse(
    state_dir: Path, options: RehearsalOptions, console: Console | None = None
) -> RunResult:
    """Run (or resume) the rehearsal into `state_dir`; raises what stops the run."""
    refuse_backend(options)
    state_dir = Path(state_dir).resolve()
    if state_dir.exists() and not state_dir.is_dir():
        raise ValueError(f"{state_dir} is a file, not a state directory; choose another path")
    refuse_finished(state_dir, options.steps)
    state_dir.mkdir(parents=True, exist_ok=True)
    console = console or Console(stderr=True)
    with holding(state_dir, COMMAND):  # first: a second command here starts nothing
        stack = stand_in_stack(state_dir, options.cases, options.judge_seed, console, options)
        with stack as stand_ins:
            return rehearse_run(stand_ins, state_dir, options, console)


def rehearse_run(
    stand_ins: StandInStack,
    state_dir: Path,
    options: RehearsalOptions,
    console: Console,
    command: str = COMMAND,
) -> RunResult:
    """One rehearsal run against running stand-ins: take the state directory's lock (in the
    name of `command`), write its settings file, start `reef serve` when the arm calls the
    guidance model, run (or resume) it, stop what it started."""
    state_dir = Path(state_dir).resolve()
    refuse_finished(state_dir, options.steps)
    state_dir.mkdir(parents=True, exist_ok=True)
    task = options.task_dir
    load_contract(task)  # a broken task stops here, before any process starts
    guided = options.arm == "guidance-ttt"
    refuse_backend(options)
    with ExitStack() as stack:
        stack.enter_context(holding(state_dir, command))
        port = free_port()
        if options.backend == "tinker":
            # Imported here: the stand-in needs the Tinker SDK (the tinker extra).
            from harness.rehearsal.tinker_stack import tinker_rehearsal

            console.print("rehearse: starting the Tinker stand-in and reef serve on it")
            settings = stack.enter_context(
                tinker_rehearsal(
                    run_values(options, state_dir),
                    judge_url=stand_ins.judge_url,
                    seed=options.seed_record,
                    port=port,
                )
            )
            return _run(settings, stand_ins, state_dir, options, console, task)
        settings_path = state_dir / SETTINGS_FILE
        guidance_url = "http://127.0.0.1:9"  # never called by an arm without guidance
        if guided:
            guidance = stack.enter_context(
                OpenAIFixture(GuidanceScript(malformed=[MALFORMED_CALL]), model=GUIDANCE_MODEL)
            )
            guidance_url = guidance.base_url
        settings = write_settings(
            settings_path,
            state_dir,
            options,
            guidance_url=guidance_url,
            judge_url=stand_ins.judge_url,
            reef_port=port,
            task=None if options.task is None else str(task),
        )
        if guided:
            console.print("rehearse: starting reef serve (record-only) for the guidance calls")
            stack.enter_context(
                running_reef(state_dir / "reef", config=settings_path, port=port, token=TOKEN)
            )
        return _run(settings, stand_ins, state_dir, options, console, task)


def _run(
    settings: RunSettings,
    stand_ins: StandInStack,
    state_dir: Path,
    options: RehearsalOptions,
    console: Console,
    task: Path,
) -> RunResult:
    """Run (or resume) the rehearsal's run of `settings` with the stand-in executor."""
    backend = replace(
        backend_from_name("gpt_oss_120b", base_url=stand_ins.executor.v1_url),
        model=EXECUTOR_MODEL,
    )
    guidance = "frozen guidance" if settings.arm_spec.guided else "no guidance model"
    if settings.training_backend == "tinker":
        guidance = "guidance trained by Reef's Tinker backend on the Tinker stand-in"
    suite = (
        f"judge suite generated:{options.judge_seed}:{options.cases}"
        if options.task is None
        else f"task {task.name}, judge {stand_ins.judge_url}"
    )
    console.print(
        f"rehearse: arm {settings.arm_spec.label()} ({guidance}), run seed "
        f"{options.run_seed}, {options.groups}×{options.rollouts} rollouts per step, steps up "
        f"to {options.steps}, {suite}; state in {state_dir}"
    )
    return assemble_and_run(
        settings,
        task,
        (task / "instruction.md").read_text(encoding="utf-8"),
        AssemblyOptions(
            backend=backend,
            console=console,
            workers=options.workers,
            judge_poll_s=options.judge_poll_s,
        ),
    )


def next_commands(state_dir: Path) -> list[str]:
    """The commands that look at a rehearsal's state directory."""
    state = shlex.quote(str(state_dir))
    results = shlex.quote(str(Path(state_dir) / "results"))
    png = shlex.quote(str(Path(state_dir) / "trajectory.png"))
    check = os.path.relpath(CHECK_RESULTS)
    if check.startswith(".."):  # run from outside the repository: name it in full
        check = str(CHECK_RESULTS)
    return [
        f"guidance-ttt status  {state}",
        f"guidance-ttt inspect {state}",
        f"guidance-ttt plot    {state} -o {png}",
        f"guidance-ttt export  {state} --out {results}",
        f"guidance-ttt browse  {state} -o {shlex.quote(str(Path(state_dir) / 'run.html'))}",
        f"python {shlex.quote(check)} {results} --state-dir {state}",
    ]
