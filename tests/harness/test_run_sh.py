"""`run.sh` and `run.py` as a user runs them: real subprocesses in the repository."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from judge_fakes import closed_port_url

from run import container_judge_url

REPO = Path(__file__).resolve().parents[2]


def cpu_only() -> bool:
    probe = "import torch, sys; sys.exit(torch.cuda.device_count() > 0)"
    return subprocess.run([sys.executable, "-c", probe], timeout=120).returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_run_sh_without_gpus_prints_the_preflight_table_and_stops_naming_the_gpus() -> None:
    if not cpu_only():
        pytest.skip("this machine has GPUs: run.sh would go past the preflight")
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(
        PYTHON=sys.executable,  # with GUIDANCE_TTT_SKIP_SETUP, run.sh uses it as it is
        GUIDANCE_TTT_SKIP_SETUP="1",
        FRONTIERCS_JUDGE_URL=closed_port_url(),
        GUIDANCE_TTT_EXECUTOR_URL=closed_port_url() + "/v1",
    )
    done = subprocess.run(
        ["bash", str(REPO / "run.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0
    assert "Guidance-TTT preflight" in done.stdout
    assert "missing" in table_row(done.stdout, "GPUs")
    assert "0 GPUs visible to torch, 2 needed" in table_row(done.stdout, "GPUs")
    assert "missing GPUs" in done.stderr
    assert "nothing was started" in done.stderr
    assert "reef serve" not in done.stdout
    # The no-GPU hint names frozen-guidance mode and the rehearsal, with how to start each.
    hint = " ".join(done.stderr.split())
    assert "Frozen-guidance mode runs the same loop without training" in hint
    assert "./run.sh --config serve-frozen.yaml --guidance-url http://HOST:PORT" in hint
    assert "guidance-ttt rehearse" in hint


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_run_sh_in_frozen_mode_checks_the_guidance_endpoint_instead_of_gpus() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GUIDANCE_TTT_GUIDANCE_API_KEY"}
    env.update(
        PYTHON=sys.executable,
        GUIDANCE_TTT_SKIP_SETUP="1",
        GUIDANCE_TTT_SERVE_YAML="serve-frozen.yaml",
        GUIDANCE_TTT_GUIDANCE_URL=closed_port_url(),
        GUIDANCE_TTT_GUIDANCE_MODEL="some-model",
        FRONTIERCS_JUDGE_URL=closed_port_url(),
        GUIDANCE_TTT_EXECUTOR_URL=closed_port_url() + "/v1",
    )
    done = subprocess.run(
        ["bash", str(REPO / "run.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    # A dead guidance endpoint is one line, before the judge, the preflight and Reef start
    # (harness/run/early_checks.py); it names the flag that points the run elsewhere.
    assert done.returncode != 0
    refusal = done.stderr.strip().splitlines()[-1]
    assert "the guidance endpoint" in refusal and "refuses connections" in refusal, done.stderr
    assert "--guidance-url" in refusal
    assert "| GPUs " not in done.stdout and "| model " not in done.stdout
    assert "local judge" not in done.stdout and "reef serve" not in done.stdout
    assert "no GPUs?" not in done.stderr  # frozen mode needs none


def _listed_row(lines: list[str], name: str) -> str:
    """The row `name` of a preflight printed row by row (`harness.preflight.report`: "NAME:
    STATUS", then its detail and "how to fix: ..." indented), in `table_row`'s form."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}: "))
    status = lines[start][len(name) + 2 :].strip()
    rest = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        rest.append(line.strip().removeprefix("how to fix: "))
    return " | ".join([name, status, *rest])


def table_row(table: str, name: str) -> str:
    """The text of the preflight table's row `name`, its wrapped continuation lines joined: the
    cells of each column are concatenated with single spaces."""
    lines = table.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {name} ")), None)
    if start is None:  # printed row by row: a word (a long path) is wider than its column
        return _listed_row(lines, name)
    rows = [lines[start]]
    for line in lines[start + 1 :]:
        cells = line.strip("|").split("|")
        if not line.startswith("|") or cells[0].strip():
            break
        rows.append(line)
    columns = zip(*(row.strip("|").split("|") for row in rows), strict=True)
    return " | ".join(
        " ".join(cell.strip() for cell in column if cell.strip()) for column in columns
    )


def test_run_sh_is_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/system-packages.sh installs it)")
    done = subprocess.run(
        ["shellcheck", "-x", "run.sh", "scripts/reef-stack.sh"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout


STACK_THAT_NEVER_GETS_HEALTHY = """
import os, sys, time
print("slime-driver: loading Qwen3-8B shards", flush=True)
print("slime-driver: still waiting for the Ray placement group", flush=True)
with open(sys.argv[1], "w") as out:
    out.write(str(os.getpid()))
time.sleep(600)
"""


@pytest.mark.timeout(120)
def test_startup_deadline_stops_the_stack_and_prints_the_end_of_reef_log(tmp_path: Path) -> None:
    # run.sh's own wait (scripts/reef-stack.sh) with a stand-in for `reef serve` that runs but
    # never answers /healthz, and a 2 s deadline instead of the default 3600 s.
    fake = tmp_path / "fake_reef.py"
    fake.write_text(STACK_THAT_NEVER_GETS_HEALTHY)
    log, pid_file = tmp_path / "reef.log", tmp_path / "reef.pid"
    script = (
        "source scripts/reef-stack.sh; "
        'start_reef "$LOG" "$python" "$FAKE" "$PID_FILE"; '
        'wait_for_reef "$URL" 2 "$LOG"; echo "wait returned $?"'
    )
    env = {
        **os.environ,
        "python": sys.executable,
        "LOG": str(log),
        "FAKE": str(fake),
        "PID_FILE": str(pid_file),
        "URL": closed_port_url(),
        "REEF_HEALTH_POLL_S": "0.2",
    }
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    elapsed = time.monotonic() - started

    assert "wait returned 1" in done.stdout
    assert "was not healthy" in done.stderr and "within 2s" in done.stderr
    assert "GUIDANCE_TTT_STARTUP_DEADLINE_S" in done.stderr
    assert "still waiting for the Ray placement group" in done.stderr  # the end of reef.log
    assert "stopping the Reef stack" in done.stderr
    assert 1.0 <= elapsed < 30.0  # bash counts whole seconds
    stack = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(stack, 0)  # the stand-in stack was stopped (and reaped by the shell)


def default_signals() -> None:
    """In the shell's child before it starts: HUP, INT and TERM back to their default action.
    bash cannot trap a signal that was ignored when it started (a suite run under `nohup`
    ignores HUP), so these tests give it the disposition a terminal's shell has."""
    for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)


SLEEPER = """import os, sys, time
with open(sys.argv[1], "w") as out:
    out.write(str(os.getpid()))
time.sleep(600)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("signame", "status"), [("TERM", 143), ("HUP", 129)])
def test_a_signal_to_run_sh_stops_the_episode_the_stack_and_the_forwarder(
    tmp_path: Path, signame: str, status: int
) -> None:
    # run.sh's life cycle (scripts/reef-stack.sh: trap_signals, start_reef, run_episode) with
    # stand-ins for `reef serve`, the key forwarder and `run.py` that only sleep.
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    pids = {name: tmp_path / f"{name}.pid" for name in ("stack", "proxy", "episode")}
    script = (
        "set -euo pipefail; source scripts/reef-stack.sh; trap_signals; "
        'start_reef "$TMP/reef.log" "$python" "$SLEEPER" "$TMP/stack.pid"; '
        '"$python" "$SLEEPER" "$TMP/proxy.pid" & proxy_pid=$!; '
        'run_episode "$python" "$SLEEPER" "$TMP/episode.pid"'
    )
    env = {**os.environ, "python": sys.executable, "SLEEPER": str(sleeper), "TMP": str(tmp_path)}
    shell = subprocess.Popen(
        ["bash", "-c", script], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=default_signals,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not all(p.is_file() and p.read_text() for p in pids.values()):
            assert time.monotonic() < deadline, "the stand-ins did not start"
            time.sleep(0.1)
        shell.send_signal(getattr(signal, f"SIG{signame}"))
        _, stderr = shell.communicate(timeout=60)
    finally:
        if shell.poll() is None:
            shell.kill()
    assert shell.returncode == status, stderr.decode()[-2000:]
    for pid_file in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)  # stopped and reaped by the shell


@pytest.mark.timeout(120)
def test_a_signal_before_a_started_process_is_named_still_stops_it(tmp_path: Path) -> None:
    """A signal between `cmd &` and the `$!` that names it runs the trap at that boundary, with
    the name still unset (what left an episode running in one fresh-clone run): the process is
    stopped all the same. Here the signal is sent right after the `&`, so it always is."""
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    script = (
        "set -euo pipefail; source scripts/reef-stack.sh; trap_signals; "
        '"$python" "$SLEEPER" "$TMP/job.ready" & echo $! > "$TMP/job.pid"; kill -HUP $$; '
        "episode_pid=never-reached; sleep 60"
    )
    env = {**os.environ, "python": sys.executable, "SLEEPER": str(sleeper), "TMP": str(tmp_path)}
    done = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=90,
        preexec_fn=default_signals,
    )  # fmt: skip
    assert done.returncode == 129, done.stderr[-2000:]
    assert "stopping a process it had just started" in done.stderr
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "job.pid").read_text()), 0)  # stopped and reaped by the shell


def test_run_py_describes_the_settings_run_sh_reads() -> None:
    env = {**os.environ, "FRONTIERCS_JUDGE_URL": "http://127.0.0.1:9999"}
    done = subprocess.run(
        [sys.executable, "run.py", "--describe"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    values = dict(shlex.split(line)[0].split("=", 1) for line in done.stdout.splitlines())
    assert values["JUDGE_URL"] == "http://127.0.0.1:9999"
    assert values["REEF_URL"] == "http://127.0.0.1:8900"
    assert Path(values["STATE_DIR"]) == REPO / "work" / "polyomino_packing"
    assert Path(values["TASK_DIR"]) == REPO / "harbor" / "polyomino_packing"
    assert values["EXECUTOR"] in ("gpt_oss_120b", "openrouter_glm_5_2")
    assert values["STARTUP_DEADLINE_S"] == "3600"  # the reference's start-up deadline


def test_run_py_refuses_a_broken_serve_yaml_naming_the_setting(tmp_path: Path) -> None:
    broken = tmp_path / "serve.yaml"
    broken.write_text(
        (REPO / "serve.yaml").read_text().replace("global-batch-size: 8", "global-batch-size: 9")
    )
    done = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--serve-yaml", str(broken), "--describe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "global-batch-size" in done.stderr and "Traceback" not in done.stderr


def test_run_py_describe_names_a_task_without_contract_in_one_line(tmp_path: Path) -> None:
    task = tmp_path / "harbor" / "polyomino_packing"  # a task given by its absolute path
    text = (REPO / "serve.yaml").read_text().replace("task: polyomino_packing", f"task: {task}")
    (tmp_path / "serve.yaml").write_text(text)
    task.mkdir(parents=True)
    serve_yaml = tmp_path / "serve.yaml"
    done = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--serve-yaml", str(serve_yaml), "--describe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("run.py: ") and "contract.json is missing" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_run_py_describe_refuses_an_executor_limit_above_the_rollout_workers(
    tmp_path: Path,
) -> None:
    edited = tmp_path / "serve.yaml"
    edited.write_text(
        (REPO / "serve.yaml")
        .read_text()
        .replace("executor_max_in_flight: 8", "executor_max_in_flight: 9")
    )
    done = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--serve-yaml", str(edited), "--describe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "executor_max_in_flight" in done.stderr
    assert "must not exceed max_rollout_workers (8)" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_container_reaches_a_loopback_judge_through_the_docker_host_name() -> None:
    assert container_judge_url("http://127.0.0.1:8081") == "http://host.docker.internal:8081"
    assert container_judge_url("http://localhost:8081/") == "http://host.docker.internal:8081/"
    assert container_judge_url("http://judge.lan:8081") == "http://judge.lan:8081"
