"""`guidance-ttt run`: the run's own settings copy, and whole runs through it.

The copy: what the command line changes lands in the copy in the state directory, is validated
as the file is (a wrong key or value refused naming it, nothing written), and is remembered for
the next invocation. The runs: `guidance-ttt run --config serve-frozen.yaml --state-dir D
--steps 2 --groups 1 --rollouts 2` with loopback model servers and no judge URL starts the local
judge, commits two steps, resumes to three with `--steps 3`, refuses a changed identity key
naming it, and leaves no process behind. Ctrl-C of ./run.sh mid-step: along the way its own
judge answers only its token (401 without) and a second `guidance-ttt run` on its state
directory is refused in one line naming the holder; the token is in no file or output.
Real: the CLI, the local judge, `reef serve`, the Harbor trial in the local environment, the
run loop; stand-ins: the two models (scripted answers, real C++ edits judged for real).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.settings.document import RunSettingsError
from harness.settings.run_copy import OVERRIDES_FILE, judge_url_given, write_run_copy
from harness.settings.run_settings import RunSettings, scenario_name

REPO = Path(__file__).resolve().parents[2]
FROZEN = REPO / "serve-frozen.yaml"
CLI_RUN = (sys.executable, "-m", "harness.cli.entry", "run")
ENV = {"GUIDANCE_TTT_GUIDANCE_URL": "http://127.0.0.1:9", "GUIDANCE_TTT_GUIDANCE_MODEL": "m"}


def test_the_command_line_lands_in_the_runs_copy_and_is_remembered(tmp_path: Path) -> None:
    state = tmp_path / "run"
    named = {"steps": 2, "groups": 1, "rollouts": 2, "arm": "unguided", "seed": 7}
    copy = write_run_copy(FROZEN, state, named, ["harness.max_rollout_workers=3"], environ=ENV)
    assert copy == state.resolve() / "serve-frozen.yaml"
    settings = RunSettings.load(copy, environ=ENV)
    assert (settings.steps, settings.groups_per_step, settings.rollouts_per_group) == (2, 1, 2)
    assert (settings.arm, settings.run_seed, settings.max_rollout_workers) == ("unguided", 7, 3)
    assert settings.state_dir == state.resolve()
    assert settings.identity()["groups_per_step"] == 1
    # The next invocation changes only the steps: the rest of the first one's changes hold.
    write_run_copy(FROZEN, state, {"steps": 3}, environ=ENV)
    again = RunSettings.load(copy, environ=ENV)
    assert (again.steps, again.groups_per_step, again.max_rollout_workers) == (3, 1, 3)
    assert again.identity() == {**settings.identity()}
    recorded = json.loads((state / OVERRIDES_FILE).read_text())
    assert recorded["settings_file"] == str(FROZEN)
    assert recorded["overrides"]["steps"] == 3


def test_plain_runs_copies_give_reefs_tracker_ids_of_their_own(tmp_path: Path) -> None:
    """Two plain runs of one task and a resume of the first, through `guidance-ttt run`'s copy
    (`stack.prepare`): Reef's tracker ids — its own `stable_run_id`, from the names in the
    copy Reef is started with — differ between the runs, and the resume keeps its run's."""
    from reef.observability.wandb import stable_run_id

    from harness.run.stack import StackRequest, prepare

    def reef_id(state: Path) -> str:
        copy, settings = prepare(StackRequest(config=FROZEN, state_dir=state), ENV)
        block = yaml.safe_load(copy.read_text())["observability"]["wandb"]
        scenario = scenario_name(settings.task)
        return stable_run_id(
            project=block["project"],
            entity=block["entity"],
            group=f"{block['group_prefix']}/{scenario}",
            name_prefix=block["name_prefix"],
            scenario=scenario,
            recipe="tttd",
            run_segment=0,
        )

    first, other, again = (reef_id(tmp_path / name) for name in ("a", "b", "a"))
    assert first != other
    assert again == first


@pytest.mark.parametrize(
    ("sets", "named"),
    [
        (["harness.no_such_setting=1"], "no_such_setting"),
        (["harness.max_rollout_workers=many"], "max_rollout_workers"),
        (["reef.port"], "reef.port"),
    ],
)
def test_a_wrong_setting_is_refused_naming_the_key_and_nothing_is_written(
    tmp_path: Path, sets: list[str], named: str
) -> None:
    state = tmp_path / "run"
    with pytest.raises(RunSettingsError, match=named.replace(".", r"\.")):
        write_run_copy(FROZEN, state, {}, sets, environ=ENV)
    assert not (state / "serve-frozen.yaml").exists() and not (state / OVERRIDES_FILE).exists()


def test_a_judge_url_in_the_file_or_the_environment_wins_over_the_local_judge(
    tmp_path: Path,
) -> None:
    copy = write_run_copy(FROZEN, tmp_path / "a", {}, environ=ENV)
    assert not judge_url_given(copy, ENV)
    assert judge_url_given(copy, {**ENV, "FRONTIERCS_JUDGE_URL": "http://127.0.0.1:1"})
    given = write_run_copy(
        FROZEN, tmp_path / "b", {"judge_url": "http://10.0.0.2:8081"}, environ=ENV
    )
    assert judge_url_given(given, ENV)
    document = yaml.safe_load(FROZEN.read_text())
    document["recipe"]["config"]["guidance-ttt"]["harness"]["judge_url"] = "http://10.0.0.3:1"
    written = tmp_path / "written.yaml"
    written.write_text(yaml.safe_dump(document))
    assert judge_url_given(write_run_copy(written, tmp_path / "c", {}, environ=ENV), ENV)


def _committed_run(state: Path, steps: int) -> None:
    """A state directory whose run has committed `steps` steps (its resume state, made with
    the settings `guidance-ttt run --config serve-frozen.yaml` writes), and a task folder."""
    from harness.storage.resume_state import RESUME_STATE, SUMMARY_KEYS, ResumeState, RunIdentity

    copy = write_run_copy(FROZEN, state, {"steps": steps}, environ=ENV)
    identity = RunIdentity.from_dict(RunSettings.load(copy, environ=ENV).identity())
    summaries = tuple(
        {**dict.fromkeys(SUMMARY_KEYS, 0), "step": i, "train_metrics": {}} for i in range(steps)
    )
    ResumeState(identity, {"name": "gpt_oss_120b"}, "summary_only", steps, summaries).save(
        state / RESUME_STATE
    )


def _run_cli(
    *flags: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS_"))
    }
    command = [*CLI_RUN, "--config", str(FROZEN), *flags]
    return subprocess.run(
        command,
        cwd=cwd,
        env={**clean, **ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_finished_run_and_a_smaller_steps_are_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    state = tmp_path / "run"
    _committed_run(state, 2)
    before = (state / "serve-frozen.yaml").read_text()
    same = _run_cli("--state-dir", str(state), "--steps", "2", cwd=tmp_path)
    assert same.returncode != 0
    line = same.stderr.strip()
    assert f"run {state.resolve()} has committed 2 steps of 2; `--steps M` (M > 2)" in line, line
    assert line.endswith("--steps 3"), line  # the command typed, with the steps that continue
    assert "local judge" not in same.stdout + same.stderr  # nothing started
    smaller = _run_cli("--state-dir", str(state), "--steps", "1", cwd=tmp_path)
    assert smaller.returncode != 0
    assert smaller.stderr.startswith("guidance-ttt run: --steps 1 asks for 1 steps"), smaller.stderr
    assert "has committed 2" in smaller.stderr and "serve.yaml" not in smaller.stderr
    by_set = _run_cli("--state-dir", str(state), "--set", "steps=1", cwd=tmp_path)
    assert "--set steps=1 asks for 1 steps" in by_set.stderr
    # Started by ./run.sh (which sets GUIDANCE_TTT_FRONT_COMMAND), the advice is for ./run.sh.
    wrapped = _run_cli(
        "--state-dir", str(state), cwd=tmp_path, env={"GUIDANCE_TTT_FRONT_COMMAND": "./run.sh"}
    )
    assert wrapped.returncode != 0
    assert "continues it: ./run.sh --config" in wrapped.stderr, wrapped.stderr
    assert (state / "serve-frozen.yaml").read_text() == before  # the run's settings kept
    assert json.loads((state / OVERRIDES_FILE).read_text())["overrides"]["steps"] == 2


def test_a_missing_task_folder_a_dead_url_and_a_wrong_key_name_what_was_typed(
    tmp_path: Path,
) -> None:
    missing = _run_cli(
        "--state-dir", str(tmp_path / "a"), "--set", f"task={tmp_path / 'nope'}", cwd=tmp_path
    )
    assert missing.returncode != 0
    assert f"--set task={tmp_path / 'nope'}: {tmp_path / 'nope'} does not exist" in missing.stderr
    assert "local judge" not in missing.stdout and "--task-dir" not in missing.stderr
    dead = _run_cli(
        "--state-dir", str(tmp_path / "b"), "--guidance-url", "http://127.0.0.1:9", cwd=tmp_path
    )
    assert dead.returncode != 0
    assert "the guidance endpoint http://127.0.0.1:9 refuses connections" in dead.stderr
    assert "--guidance-url" in dead.stderr and "local judge" not in dead.stdout
    wrong = _run_cli(
        "--state-dir", str(tmp_path / "c"), "--set", "harness.max_rollout_workers=x", cwd=tmp_path
    )
    assert wrong.returncode != 0 and ".checking" not in wrong.stderr
    assert f"{FROZEN} (with this command's flags)" in wrong.stderr


def _processes_naming(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command:
            found.append(f"{proc.name}: {command[:200]}")
    return found


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_run_commits_two_steps_with_its_own_judge_resumes_to_three_and_refuses_a_changed_grid(
    tmp_path: Path,
) -> None:
    from harness.rehearsal.openai_server import OpenAIFixture
    from harness.rehearsal.reef_process import free_port
    from harness.rehearsal.stand_ins import GuidanceScript, executor_reply
    from harness.storage.store import read_committed

    state = tmp_path / "state"
    with (
        OpenAIFixture(GuidanceScript(), model="my-guidance") as guidance,
        OpenAIFixture(executor_reply, model="my-executor") as executor,
    ):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS_"))
        }
        env.update(GUIDANCE_TTT_EXECUTOR="openai_compatible")

        def run(*flags: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "harness.cli.entry", "run", "--config", str(FROZEN)]
            command += ["--state-dir", str(state), "--guidance-url", guidance.base_url]
            command += ["--guidance-model", "my-guidance", "--executor-url", executor.v1_url]
            command += ["--executor-model", "my-executor", "--set", f"reef.port={free_port()}"]
            command += ["--set", "harness.seed=solution/shelf/seed.json", *flags]
            return subprocess.run(
                command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=840
            )

        first = run("--steps", "2", "--groups", "1", "--rollouts", "2")
        out = first.stdout + first.stderr
        assert first.returncode == 0, out[-4000:]
        assert "no judge URL given: starting the local judge" in first.stdout
        assert "started by guidance-ttt run: problem 0" in first.stdout  # the preflight's row
        _, committed = read_committed(state / "guidance-run" / "archive")
        assert committed == 1
        assert not _processes_naming(str(state)), "a process of the run outlived it"
        assert re.search(r"^episode reward: \d+\.\d{4}$", first.stdout, re.M), first.stdout[-2000:]
        judged = (state / "judge.log").stat().st_size
        second = run("--steps", "3")
        assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
        # The seed's verdict comes from the judge's verdict cache in <state>/judge (keyed by the
        # judge package's fingerprint and the source's hash): the second run does not re-judge it.
        again = (state / "judge.log").read_text(errors="replace")[judged:]
        assert "(cached)" in again, again[-2000:]
        archive, committed = read_committed(state / "guidance-run" / "archive")
        assert committed == 2
        assert len([e for e in archive.entries.values() if e.timestep == 3]) == 2
        refused = run("--steps", "4", "--groups", "2")
        assert refused.returncode != 0
        assert "groups_per_step" in refused.stdout + refused.stderr
        assert not _processes_naming(str(state))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_ctrl_c_of_a_frozen_run_sh_stops_everything_in_one_line(tmp_path: Path) -> None:
    """./run.sh as a user runs it (frozen, loopback models, no judge URL: its own judge), Ctrl-C
    once the first step runs: exit 130, the stopping line naming ./run.sh, no traceback, and
    no process left that names the state directory (judge, reef serve, the episode)."""
    import signal
    import time

    from harness.rehearsal.openai_server import OpenAIFixture
    from harness.rehearsal.reef_process import free_port
    from harness.rehearsal.stand_ins import GuidanceScript, executor_reply

    state = tmp_path / "state"
    events = state / "guidance-run" / "events.jsonl"
    with (
        OpenAIFixture(GuidanceScript(), model="my-guidance") as guidance,
        OpenAIFixture(executor_reply, model="my-executor") as executor,
    ):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS_"))
        }
        env.update(
            PYTHON=sys.executable,
            GUIDANCE_TTT_SKIP_SETUP="1",
            GUIDANCE_TTT_SERVE_YAML="serve-frozen.yaml",
            GUIDANCE_TTT_GUIDANCE_URL=guidance.base_url,
            GUIDANCE_TTT_GUIDANCE_MODEL="my-guidance",
            GUIDANCE_TTT_EXECUTOR="openai_compatible",
            GUIDANCE_TTT_EXECUTOR_URL=executor.v1_url,
            GUIDANCE_TTT_EXECUTOR_MODEL="my-executor",
            GUIDANCE_TTT_SEED="solution/shelf/seed.json",
        )
        flags = ["--state-dir", str(state), "--steps", "20", "--set", f"reef.port={free_port()}"]
        process = subprocess.Popen(
            ["bash", str(REPO / "run.sh"), *flags],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 900
            while not (events.is_file() and b'"step_started"' in events.read_bytes()):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the run's first step never started"
                time.sleep(0.5)
            assert _processes_naming(str(state))
            token = _only_the_run_reaches_its_judge_and_its_directory(state, env)
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, (stdout + stderr)[-3000:]
    resume = f"./run.sh {' '.join(flags)}"
    assert stderr.count("guidance-ttt run: stopping (SIGINT)") == 1, stderr[-3000:]
    assert f"resume with: {resume}" in stderr
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    deadline = time.monotonic() + 60
    while _processes_naming(str(state)):
        assert time.monotonic() < deadline, _processes_naming(str(state))
        time.sleep(0.5)
    assert token not in stdout + stderr
    holding = [p for p in state.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert not holding, f"the judge's token was written to {holding}"


def _frozen_run(state: Path, guidance_url: str, executor_url: str) -> list[str]:
    """`guidance-ttt run` of a frozen run on loopback models, with its own judge and Reef."""
    from harness.rehearsal.reef_process import free_port

    command = [*CLI_RUN, "--config", str(FROZEN), "--state-dir", str(state)]
    command += ["--guidance-url", guidance_url, "--guidance-model", "my-guidance"]
    command += ["--executor-url", executor_url, "--executor-model", "my-executor"]
    return [*command, "--set", f"reef.port={free_port()}", "--steps", "1"]


def _clean_environment() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS_"))
    }
    return {**env, "GUIDANCE_TTT_EXECUTOR": "openai_compatible"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_failing_frozen_preflight_stops_the_reef_started_beside_it(tmp_path: Path) -> None:
    """A frozen run's Reef starts beside its preflight (scripts/run-stack.sh). A preflight that
    fails (the guidance model refuses its one real request) stops that Reef and the local
    judge: one line says so, exit 1, no episode ran, no process naming the state directory."""
    from harness.rehearsal.openai_server import OpenAIFixture, Reply
    from harness.rehearsal.stand_ins import executor_reply

    state = tmp_path / "state"
    with (
        OpenAIFixture(Reply(status=503, error="overloaded"), model="my-guidance") as guidance,
        OpenAIFixture(executor_reply, model="my-executor") as executor,
    ):
        done = subprocess.run(
            _frozen_run(state, guidance.base_url, executor.v1_url),
            cwd=tmp_path,
            env=_clean_environment(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "beside the preflight" in done.stdout and (state / "reef.log").is_file()
    stopped = "stopping after the preflight; the Reef stack started beside it is stopped"
    assert done.stderr.count(stopped) == 1, done.stderr[-3000:]
    assert "Traceback" not in out, out[-3000:]
    events = state / "guidance-run" / "events.jsonl"
    assert not events.is_file() or b"run_started" not in events.read_bytes()
    assert not _processes_naming(str(state))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_while_the_preflight_and_reef_start_together_stops_both_in_one_line(
    tmp_path: Path,
) -> None:
    """Ctrl-C while a frozen run's preflight waits on the guidance model and its Reef starts
    beside it: exit 130, the one stopping line, no traceback, and no process left that names
    the state directory (the judge, the preflight, reef serve)."""

    from harness.rehearsal.openai_server import OpenAIFixture, Reply
    from harness.rehearsal.stand_ins import executor_reply

    state = tmp_path / "state"
    with (
        OpenAIFixture(Reply(delay_s=90), model="my-guidance") as guidance,
        OpenAIFixture(executor_reply, model="my-executor") as executor,
    ):
        stdout = _ctrl_c_once(
            tmp_path,
            state,
            _frozen_run(state, guidance.base_url, executor.v1_url),
            lambda: bool(guidance.completion_requests()) and (state / "reef.log").is_file(),
            "the preflight and Reef never started",
            poll_s=0.2,
        )
    assert "beside the preflight" in stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_local_judge_that_does_not_start_stops_the_stack_started_beside_it(
    tmp_path: Path,
) -> None:
    """The stack starts beside the local judge and waits for its URL before the preflight; a
    judge that does not start (its state directory is a file) stops the stack and whatever it
    started (a frozen Reef), in one `local judge did not start` refusal, with no process left
    that names the state directory."""
    from harness.rehearsal.openai_server import OpenAIFixture
    from harness.rehearsal.stand_ins import GuidanceScript, executor_reply

    state = tmp_path / "state"
    state.mkdir()
    (state / "judge").write_text("not a directory\n")
    with (
        OpenAIFixture(GuidanceScript(), model="my-guidance") as guidance,
        OpenAIFixture(executor_reply, model="my-executor") as executor,
    ):
        done = subprocess.run(
            _frozen_run(state, guidance.base_url, executor.v1_url),
            cwd=tmp_path,
            env=_clean_environment(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert not guidance.completion_requests(), "the preflight ran without a judge"
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    assert done.stderr.startswith("guidance-ttt run: local judge did not start"), done.stderr
    assert "is a file, not a directory" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not _processes_naming(str(state))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_while_the_judge_and_reef_start_together_stops_both_in_one_line(
    tmp_path: Path,
) -> None:
    """Ctrl-C as soon as a fresh frozen run's stack starts Reef, while its local judge is
    starting beside it (a fresh judge generates its suite first, which takes longer than the
    stack's settings check): exit 130, the one stopping line, no traceback, and no process left
    that names the state directory."""

    from harness.rehearsal.openai_server import OpenAIFixture
    from harness.rehearsal.stand_ins import GuidanceScript, executor_reply

    state = tmp_path / "state"
    with (
        OpenAIFixture(GuidanceScript(), model="my-guidance") as guidance,
        OpenAIFixture(executor_reply, model="my-executor") as executor,
    ):
        _ctrl_c_once(
            tmp_path,
            state,
            _frozen_run(state, guidance.base_url, executor.v1_url),
            (state / "reef.log").is_file,
            "the stack never started Reef",
            poll_s=0.02,
        )


def _ctrl_c_once(
    cwd: Path, state: Path, command: list[str], ready, never: str, poll_s: float
) -> str:
    """Start `command`, send one SIGINT once `ready()` holds (within 240 s), and check the
    stop: exit 130, the one stopping line, no traceback, and within a minute no process left
    that names `state`. Returns stdout."""
    import signal
    import time

    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=_clean_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not ready():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, never
            time.sleep(poll_s)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, (stdout + stderr)[-3000:]
    assert stderr.count("guidance-ttt run: stopping (SIGINT)") == 1, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    deadline = time.monotonic() + 60
    while _processes_naming(str(state)):
        assert time.monotonic() < deadline, _processes_naming(str(state))
        time.sleep(0.5)
    return stdout


def _only_the_run_reaches_its_judge_and_its_directory(state: Path, env: dict[str, str]) -> str:
    """While the run runs: its own judge answers 401 without the token in its environment and
    200 with it; a second `guidance-ttt run` on its state directory is refused in one line
    naming the holder, before it writes or starts anything. Returns the token."""
    import re

    import httpx

    from harness.adapters.judge.token import TOKEN_ENV

    url = re.search(r"judge listening on (http://\S+)", (state / "judge.log").read_text())[1]
    token = ""
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"judges" in command and str(state / "judge").encode() in command:
            prefix = TOKEN_ENV.encode() + b"="
            token = next((e[len(prefix) :].decode() for e in environ if e.startswith(prefix)), "")
    assert len(token) >= 32, f"the run's judge has no {TOKEN_ENV} of its own"
    assert httpx.get(url + "/problems", timeout=30).status_code == 401
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.get(url + "/problems", headers=bearer, timeout=30).status_code == 200
    copy = (state / "serve-frozen.yaml").read_bytes()
    second = subprocess.run(
        [*CLI_RUN, "--config", str(FROZEN), "--state-dir", str(state), "--steps", "99"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in (second.stdout + second.stderr).splitlines() if line.strip()]
    assert second.returncode == 2, lines
    assert len(lines) == 1 and f"{state} is in use by pid " in lines[0], lines
    assert "(guidance-ttt run " in lines[0]
    assert (state / "serve-frozen.yaml").read_bytes() == copy, "the refused run wrote its copy"
    return token


def test_under_guidance_ttt_run_the_episode_reward_is_a_number_to_four_places() -> None:
    """run.py keeps the reference's `episode reward: {row.rewards}` when run on its own; under
    `guidance-ttt run` (GUIDANCE_TTT_COMMAND set) the line shows the number for a person."""
    from run import readable_rewards

    assert readable_rewards({"reward": 16.666666666666664}) == "16.6667"
    assert readable_rewards({"reward": 1.0, "cases": 2}) == "reward 1.0000, cases 2"
