"""The stack of processes `guidance-ttt run` (and ./run.sh, a thin wrapper over it) starts: the one
way to start a run from the command line.

0. The state directory's lock (`harness.storage.command_lock`), before anything else: a second
   command on a directory in use is refused in one line naming the holder, having started and
   written nothing.
1. The run's own settings copy: the settings file (`--config`, default `$GUIDANCE_TTT_SERVE_YAML`,
   else serve.yaml) with what the command line changed, in the run's state directory
   (`harness.settings.run_copy`); the run, `status`, `resume` and `export` read it.
   The cheap checks come next, each well under a second (`harness.run.early_checks`): the
   task folder and `--steps` against the committed steps (on the new settings, before the
   copy replaces the old one), then whether the endpoints answer and list their models. A
   finished run, a smaller `--steps`, a missing folder or a dead URL is refused in one line
   naming the flag and the command typed, with a non-zero exit, before anything starts.
2. The judge: when the run names none (`$FRONTIERCS_JUDGE_URL`, `--judge-url`, or a URL written
   in the file), the project's local judge for the configured task (`python -m judges`: the
   task's own `judge/` packages, else the bundled Polyomino problem), its log in
   `<state>/judge.log`, shown as the preflight's "local judge" row, stopped on exit (after
   the stack); it has a fresh access token of its own, given to the stack through the
   environment only. It starts beside the stack (step 3), which checks its settings and starts
   a frozen Reef meanwhile and waits for the judge's URL before its preflight; a judge that
   does not start stops the stack. A `reef.port` some process already listens on is refused
   before either starts, naming the port and the process.
3. The stack (`scripts/run-stack.sh`, the preflight table, `reef serve -c <copy>`, the episode:
   a Harbor trial with `harness:HarborAgent`, which runs the steps through the one run
   assembly, `harness.run.assembly`), started in a session of its own and tied to this process
   (`harness.adapters.child_process`): a stop sends it SIGTERM, on which it stops the episode,
   Reef and the key forwarder; if this process dies, the kernel sends it the same.

`start_stack` raises what ends it; `harness.cli.run_command` turns a signal into the one stopping
line and exit 128 + the signal (`harness.cli.termination`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.adapters.child_process import start_tied
from harness.adapters.judge.process import LocalJudge
from harness.adapters.reef.ownership import describe_owner
from harness.observe.wandb_sink import name_wandb_runs
from harness.run.early_checks import (
    refuse_finished,
    refuse_missing_task,
    refuse_unreachable,
    steps_source,
)
from harness.settings.document import RunSettingsError
from harness.settings.run_copy import judge_url_given, run_section, write_run_copy
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings, scenario_name
from harness.settings.task_dirs import task_dir_of
from harness.storage.command_lock import holding
from harness.storage.resume_state import RESUME_STATE, ResumeState, RunIdentity

REPO = Path(__file__).resolve().parents[2]
STACK = REPO / "scripts" / "run-stack.sh"
#: How long the stack may take to stop after SIGTERM (Reef stops its services in order; the
#: episode is SIGTERMed first) before its whole session is killed.
STACK_STOP_S = 90.0


@dataclass(frozen=True)
class StackRequest:
    """What `guidance-ttt run` was asked: the settings file, the state directory (default: the
    file's), the named overrides (`harness.settings.run_copy.NAMED`) and `--set` items."""

    config: Path | None = None
    state_dir: Path | None = None
    named: Mapping[str, Any] = field(default_factory=dict)
    sets: Sequence[str] = ()
    #: The command as it was typed (`./run.sh …` when ./run.sh started it): refusals name it.
    command: str = "guidance-ttt run"


def settings_file(config: Path | None, environ: Mapping[str, str]) -> Path:
    """`--config`, else `$GUIDANCE_TTT_SERVE_YAML` (taken from the repository root when
    relative, as ./run.sh always did), else the repository's serve.yaml."""
    if config is not None:
        return Path(config).expanduser().resolve()
    named = environ.get("GUIDANCE_TTT_SERVE_YAML", "").strip()
    if named:
        path = Path(named).expanduser()
        return (path if path.is_absolute() or path.exists() else REPO / path).resolve()
    return Path(DEFAULT_SERVE_YAML).resolve()


def state_dir_of(request: StackRequest, environ: Mapping[str, str]) -> Path:
    """The run's state directory: `--state-dir`, else the settings file's `state_dir`."""
    if request.state_dir is not None:
        return Path(request.state_dir)
    return RunSettings.load(settings_file(request.config, environ), environ=environ).state_dir


def prepare(request: StackRequest, environ: Mapping[str, str]) -> tuple[Path, RunSettings]:
    """Write the run's settings copy and load it; `RunSettingsError` names a wrong key, and
    `RunRefused` a missing task folder or a run that has committed its steps already (the
    copy is then left as it was)."""
    config = settings_file(request.config, environ)
    state_dir = state_dir_of(request, environ)
    source = steps_source(request.named, request.sets, Path(state_dir).resolve(), config)

    def check(settings: RunSettings) -> None:
        refuse_missing_task(settings, config, request.sets)
        same_identity(settings)
        refuse_finished(settings, source, request.command)

    try:
        copy = write_run_copy(
            config,
            Path(state_dir),
            request.named,
            request.sets,
            environ=environ,
            check=check,
            edit=lambda document: name_own_wandb_runs(document, Path(state_dir)),
        )
    except RunSettingsError as exc:  # named as the user wrote it, not as the trial copy
        raise RunSettingsError(
            TRIAL_COPY.sub(f"{config} (with this command's flags)", str(exc))
        ) from exc
    return copy, RunSettings.load(copy, environ=environ)


#: The trial copy `write_run_copy` validates before it replaces the run's copy: a file of its
#: own the user never wrote, so a refusal names the settings file and the flags instead.
TRIAL_COPY = re.compile(r"\S*\.serve(?:-frozen|-tinker)?\.yaml\.checking")


def name_own_wandb_runs(document: dict[str, Any], state_dir: Path) -> None:
    """Give the copy's `observability.wandb` block this run's own W&B names (from the state
    directory's run id), so that Reef's tracker, which derives its run ids from them, never
    shares an id with another run's and a resumed run continues its own (docs/observability.md)."""
    block = (document.get("observability") or {}).get("wandb")
    if not isinstance(block, dict):
        return
    section: Any = document
    for key in run_section(document):
        section = section.get(key) if isinstance(section, dict) else None
    task = section.get("task") if isinstance(section, dict) else None
    if isinstance(task, str) and task:
        name_wandb_runs(block, scenario_name(task), state_dir)


def same_identity(settings: RunSettings) -> None:
    """Refuse, naming the key, settings whose run identity differs from the one the state
    directory's committed steps were made with (before the copy is replaced, so the run's
    settings stay what they were); the run controller checks the same again at start."""
    stored = ResumeState.load(settings.state_dir / RESUME_STATE)
    if stored is None:
        return
    mismatch = stored.identity.first_difference(RunIdentity.from_dict(settings.identity()))
    if mismatch is not None:
        key, was, now = mismatch
        raise RunSettingsError(
            f"resume settings mismatch: {key} stored {was!r}, requested {now!r}; the run in "
            f"{settings.state_dir} keeps its settings — use a new --state-dir for a new run"
        )


def refuse_taken_reef_port(settings: RunSettings, copy: Path) -> None:
    """RuntimeError in one line, before the judge or Reef starts, when a process already
    listens on the run's `reef.port`: the run would reach that process (another run's Reef,
    say) instead of its own (its own `reef serve` also confirms, once healthy, that the
    listener is itself: scripts/reef-stack.sh)."""
    owner = describe_owner(settings.reef_port)
    if owner is not None:
        raise RuntimeError(
            f"reef.port {settings.reef_port} (in {copy}) is in use by {owner}: this run's Reef "
            "needs a port of its own; stop that process or pass --set reef.port=FREE_PORT"
        )


def judge_flags(task_dir: Path) -> list[str]:
    """The local judge's flags for the task: its own `judge/` packages when it has them, else
    none (the judge's bundled Polyomino problem, the template task's)."""
    return ["--task", str(task_dir)] if (task_dir / "judge").is_dir() else []


#: The variable that names, to scripts/run-stack.sh, the file the local judge's address and
#: preflight row are written to once it listens (the stack starts beside the judge).
LOCAL_JUDGE_FILE = "GUIDANCE_TTT_LOCAL_JUDGE_FILE"


def run_stack(
    copy: Path, extra_env: Mapping[str, str], environ: Mapping[str, str], command: str = ""
) -> int:
    """Run scripts/run-stack.sh on the copy and return its exit status; whatever stops this
    call (a signal's `Terminated`) first stops the stack (SIGTERM, then SIGKILL of its session
    after `STACK_STOP_S`)."""
    stack = _start_stack_script(copy, extra_env, environ, command)
    try:
        return stack.wait()
    except BaseException:
        _stop(stack)
        raise


def run_stack_beside_local_judge(
    settings: RunSettings, copy: Path, environ: Mapping[str, str], command: str = ""
) -> int:
    """Run scripts/run-stack.sh while the project's local judge starts for the task: the stack
    checks its settings and starts a frozen Reef meanwhile, and waits for the judge's URL and
    preflight row in the file `LOCAL_JUDGE_FILE` names, written here once the judge listens.
    A judge that does not start stops the stack (`RuntimeError` naming why); a signal stops
    the stack, then the judge; on the way out the judge is stopped after the stack."""
    task = task_dir_of(settings)
    log = settings.state_dir / "judge.log"
    print(f"guidance-ttt run: no judge URL given: starting the local judge (log {log})", flush=True)
    judge = LocalJudge(settings.state_dir / "judge", *judge_flags(task), log=log, with_token=True)
    with tempfile.TemporaryDirectory(prefix="guidance-ttt-run-") as scratch:
        address = Path(scratch) / "local-judge"
        # its clients' token: the environment only (the file holds the URL and the row)
        extra = {**judge.token_environment(), LOCAL_JUDGE_FILE: str(address)}
        stack = _start_stack_script(copy, extra, environ, command)
        try:
            with judge:
                row = f"started by guidance-ttt run: {judge.describe()} at {judge.url}; log {log}"
                written = address.with_suffix(".writing")
                written.write_text(f"{judge.url}\n{row}\n", encoding="utf-8")
                written.replace(address)  # whole, or not there: the stack reads it once
                try:
                    return stack.wait()
                except BaseException:
                    _stop(stack)  # before the judge: the episode may be judging
                    raise
        except BaseException:
            _stop(stack)
            raise


def _start_stack_script(
    copy: Path, extra_env: Mapping[str, str], environ: Mapping[str, str], command: str
) -> subprocess.Popen[Any]:
    given = {key: value for key, value in environ.items() if key != LOCAL_JUDGE_FILE}
    env = {
        **given,  # a judge file only from here: the stack would wait for it
        **extra_env,
        "GUIDANCE_TTT_SERVE_YAML": str(copy),
        "PYTHON": sys.executable,  # the interpreter of this command, with the project
        "GUIDANCE_TTT_QUIET_STOP": "1",
        # The command that was typed: the preflight's fixes and the spend limit's advice name
        # its flags (`harness.run.spend.spend_advice`).
        "GUIDANCE_TTT_COMMAND": command or "guidance-ttt run",
    }
    return start_tied(["bash", str(STACK)], cwd=REPO, env=env)


def _stop(stack: subprocess.Popen[Any]) -> None:
    if stack.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        stack.send_signal(signal.SIGTERM)  # its trap stops the episode, Reef, the forwarder
    try:
        stack.wait(timeout=STACK_STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stack.pid, signal.SIGKILL)
        stack.wait(timeout=10)


def start_stack(request: StackRequest, environ: Mapping[str, str] | None = None) -> int:
    """Start (or resume) the run `request` describes; returns the stack's exit status."""
    environ = dict(os.environ if environ is None else environ)
    state_dir = state_dir_of(request, environ).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    with holding(state_dir, "guidance-ttt run"):  # first: a second command here starts nothing
        copy, settings = prepare(request, environ)
        print(f"guidance-ttt run: settings {copy} (state in {settings.state_dir})", flush=True)
        refuse_taken_reef_port(settings, copy)
        refuse_unreachable(settings, environ)
        if judge_url_given(copy, environ):
            return run_stack(copy, {}, environ, request.command)
        return run_stack_beside_local_judge(settings, copy, environ, request.command)
