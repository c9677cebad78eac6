"""Preflight checks against real local servers: a judge stand-in and an OpenAI-compatible executor.

The judge stand-in speaks the FrontierCS protocol (`/health`, multipart `/submit`,
`/result/{sid}`) with scripted answers, so the judge row is exercised through the run's own
`FrontierCSScorer`. GPUs cannot exist here: the real check runs against the installed CPU torch,
and the "GPUs present" path uses a stand-in module that only reports a device count.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from judge_fakes import closed_port_url
from rich.console import Console

from harness.adapters.executor.backends import backend_from_name
from harness.preflight.doctor import build_parser, resolve_defaults, run_preflight
from harness.preflight.machine import (
    check_disk,
    check_git_lfs,
    check_gpus,
    check_model,
    check_python,
)
from harness.preflight.report import LOG_WIDTH, CheckResult, PreflightReport
from harness.preflight.services import check_executor, check_judge, judge_announced
from harness.preflight.task import seed_program, seed_scorer
from tests.reef_fixtures import free_port
from tests.task_builders import write_task

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
SEED = "int main() { return 0; }\n"
DONE = {
    "status": "done",
    "passed": False,
    "result": "Wrong Answer",
    "score": 50.0,
    "scoreUnbounded": 50.0,
    "cases": [
        {"ok": False, "status": "Wrong Answer", "msg": "points 0.6", "scoreRatio": 0.6},
        {"ok": False, "status": "Wrong Answer", "msg": "points 0.4", "scoreRatio": 0.4},
    ],
}


@dataclass
class Route:
    status: int
    body: Any


@dataclass
class StandIn:
    """A real HTTP server on 127.0.0.1 whose answers are a dict `(method, path) -> Route`."""

    routes: dict[tuple[str, str], Route]
    requests: list[tuple[str, str, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                outer.requests.append((method, self.path, self.rfile.read(length)))
                route = outer.routes.get((method, self.path), Route(404, {"error": "not found"}))
                data = json.dumps(route.body).encode()
                self.send_response(route.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def bodies(self, method: str, path: str) -> list[bytes]:
        return [body for m, p, body in self.requests if (m, p) == (method, path)]


@pytest.fixture
def judge() -> Iterator[StandIn]:
    server = StandIn(
        {
            ("GET", "/health"): Route(200, {"ok": True}),
            ("POST", "/submit"): Route(200, {"sid": 7}),
            ("GET", "/result/7"): Route(200, DONE),
        }
    )
    yield server
    server.stop()


def chat(content: str = "OK") -> dict[str, Any]:
    return {"choices": [{"message": {"content": content}, "finish_reason": "length"}]}


@pytest.fixture
def executor_server() -> Iterator[StandIn]:
    server = StandIn({("POST", "/v1/chat/completions"): Route(200, chat())})
    yield server
    server.stop()


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    """A minimal valid Harbor task directory: contract, task.toml, problem text, and a seed
    record holding the seed program."""
    return write_task(tmp_path / "task", SEED)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 16)
    return model


def torch_sees_gpus() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.device_count() > 0


no_gpu_here = pytest.mark.skipif(
    torch_sees_gpus(), reason="this test expects a machine without GPUs"
)


def rows(report: PreflightReport) -> dict[str, CheckResult]:
    return {check.name: check for check in report.checks}


# ------------------------------------------------------------------------- whole preflight


@no_gpu_here
def test_cpu_machine_has_every_row_ready_except_gpus(judge, executor_server, task_dir, model_dir):
    report = run_preflight(
        state_dir=task_dir.parent / "state",
        model_dir=model_dir,
        judge_url=judge.url,
        executor=backend_from_name("gpt_oss_120b", base_url=f"{executor_server.url}/v1"),
        score_seed=seed_scorer(task_dir, judge.url),
        min_free_gb=0.001,
        task_dir=task_dir,
    )

    by_name = rows(report)
    assert list(by_name) == [
        "python", "GPUs", "model", "task", "judge", "executor", "git-lfs", "disk",
    ]  # fmt: skip
    assert [c.name for c in report.missing] == ["GPUs"]
    assert not report.ok
    assert "0 GPUs visible to torch" in by_name["GPUs"].detail
    assert "CUDA_VISIBLE_DEVICES" in by_name["GPUs"].fix
    assert "seed scored 50.0000 on suite public" in by_name["judge"].detail
    assert SEED.encode() in judge.bodies("POST", "/submit")[0]
    assert "missing GPUs" in report.failure_message()
    (probe,) = executor_server.bodies("POST", "/v1/chat/completions")
    assert json.loads(probe)["max_tokens"] == 1


def test_table_is_plain_ascii_when_not_a_terminal():
    report = PreflightReport(
        (CheckResult("python", True, "Python 3.12.1"), CheckResult("GPUs", False, "0 GPUs", "fix"))
    )
    out = io.StringIO()

    report.render(Console(file=out, width=120))

    text = out.getvalue()
    assert "\x1b[" not in text
    assert text.isascii()
    assert any(line.startswith("| python") and "| ready " in line for line in text.splitlines())
    assert any(line.startswith("| GPUs") and "| missing" in line for line in text.splitlines())


def test_no_row_breaks_a_path_mid_word(tmp_path: Path) -> None:
    """A log is as wide as it needs; a terminal of 100 columns gives the detail column the
    room a long path needs; neither folds it, and text in brackets is shown, not markup."""
    path = "/srv/guidance-ttt/checkouts/Frontier-CS/algorithmic/problems/0/testdata/public"
    report = PreflightReport(
        (
            CheckResult("task", False, f"{path} has no cases [bold]", f"copy them into {path}"),
            CheckResult("python", True, "Python 3.12.1"),
        )
    )
    log = io.StringIO()
    report.render(Console(file=log, width=80))
    terminal = io.StringIO()
    report.render(Console(file=terminal, width=100, force_terminal=True, color_system=None))
    for out in (log.getvalue(), terminal.getvalue()):
        assert sum(path in line for line in out.splitlines()) == 2, out
    assert "[bold]" in log.getvalue()


@no_gpu_here
@pytest.mark.slow
def test_command_prints_table_and_exits_1_naming_missing_gpus(
    judge, executor_server, task_dir, model_dir
):
    command = [
        sys.executable,
        "-m",
        "harness.preflight.doctor",
        f"--state-dir={task_dir.parent / 'state'}",
        f"--model-dir={model_dir}",
        f"--judge-url={judge.url}",
        f"--task-dir={task_dir}",
        "--executor=gpt_oss_120b",
        f"--executor-url={executor_server.url}/v1",
        "--min-free-gb=0.001",
    ]
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}

    done = subprocess.run(command, capture_output=True, text=True, timeout=90, cwd=REPO, env=env)

    assert done.returncode == 1, done.stderr
    cells = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")]
    table = {cell[1].strip(): "|".join(cell) for cell in cells if cell[1].strip()}
    for ready in ("python", "model", "task", "judge", "executor", "git-lfs", "disk"):
        assert "| ready " in table[ready], done.stdout
    assert "| missing " in table["GPUs"]
    assert "missing GPUs" in done.stderr
    assert judge.bodies("POST", "/submit"), "the seed was not submitted"


@pytest.mark.slow
def test_command_rejects_an_unknown_reasoning_effort():
    done = subprocess.run(
        [sys.executable, "-m", "harness.preflight.doctor", "--reasoning-effort=extreme"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )

    assert done.returncode == 2
    assert "'extreme'" in done.stderr


# ------------------------------------------------------------------------------------ judge


def test_unhealthy_judge_is_missing_and_is_not_asked_to_score(judge):
    judge.routes[("GET", "/health")] = Route(503, {"ok": False})
    called = []

    def score_seed() -> Any:
        called.append(1)
        raise AssertionError("an unhealthy judge must not be asked to score")

    result = check_judge(judge.url, score_seed)

    assert not result.ready
    assert "/health failed: 503" in result.detail
    assert judge.url in result.fix
    assert called == []


def test_seed_judged_invalid_is_missing_with_the_judge_message(judge, task_dir):
    judge.routes[("GET", "/result/7")] = Route(
        200, {"status": "error", "error": "Error: compile failed: expected ';'"}
    )

    result = check_judge(judge.url, seed_scorer(task_dir, judge.url))

    assert not result.ready
    assert "invalid" in result.detail
    assert "compile failed" in result.detail


def test_seed_on_which_every_case_scored_zero_is_missing(judge, task_dir):
    zero = {"ok": False, "status": "Runtime Error", "msg": "", "scoreRatio": 0.0}
    judge.routes[("GET", "/result/7")] = Route(
        200, {**DONE, "score": 0.0, "scoreUnbounded": 0.0, "cases": [zero, zero]}
    )

    result = check_judge(judge.url, seed_scorer(task_dir, judge.url))

    assert not result.ready
    assert "judged the seed valid with score 0.0" in result.detail
    assert "judge_problem_id" in result.fix


def test_a_certified_value_of_zero_is_a_seed_s_real_score(judge):
    """A `value` task's seed may score 0 (an OpenEvolve example's evaluator gives its initial
    program 0): the verifier certified it, so it is no sign of a misfitting package."""
    from harness.state import VALID, VerificationResult

    certified = VerificationResult(0.0, 0.0, True, VALID, "accepted", {"case_values": [0.0]})

    result = check_judge(judge.url, lambda: certified)

    assert result.ready, result.detail


def test_seed_scored_on_another_suite_is_not_compared_with_the_seed_file(judge, task_dir):
    seed = json.loads((REPO / "harbor/polyomino_packing/solution/seed.json").read_text())
    (task_dir / "solution" / "seed.json").write_text(json.dumps(seed))
    done = {**DONE, "suite": {"name": "generated:3:2", "kind": "generated"}}
    judge.routes[("GET", "/result/7")] = Route(200, done)

    result = check_judge(judge.url, seed_scorer(task_dir, judge.url))

    assert result.ready
    assert "seed scored 50.0000 on suite generated:3:2" in result.detail
    assert "seed.json measured it on public, not compared" in result.detail
    assert "re-scores the seed on generated:3:2 at start" in result.detail
    assert f"{seed['entry']['verifier_raw_score']:.4f}" not in result.detail
    judge.routes[("GET", "/result/7")] = Route(200, DONE)  # FrontierCS's judge: no suite label
    same = check_judge(judge.url, seed_scorer(task_dir, judge.url))
    expected = seed["entry"]["verifier_raw_score"]
    assert f"on suite public (seed.json: {expected:.4f} on public)" in same.detail


def test_frozen_mode_checks_the_guidance_endpoint_instead_of_gpus_and_model(
    judge, executor_server, task_dir, model_dir
):
    report = run_preflight(
        state_dir=task_dir.parent / "state",
        model_dir=model_dir,
        judge_url=judge.url,
        executor=backend_from_name("gpt_oss_120b", base_url=f"{executor_server.url}/v1"),
        min_free_gb=0.001,
        guidance_url=closed_port_url(),
    )
    by_name = rows(report)
    assert list(by_name) == ["python", "guidance", "judge", "executor", "git-lfs", "disk"]
    assert [c.name for c in report.missing] == ["guidance"]
    assert "GUIDANCE_TTT_GUIDANCE_URL" in by_name["guidance"].fix


def test_judge_that_cannot_score_is_missing(judge, task_dir):
    judge.routes[("GET", "/result/7")] = Route(500, {"error": "boom"})
    judge.routes[("POST", "/submit")] = Route(500, {"error": "judge crashed"})

    result = check_judge(judge.url, seed_scorer(task_dir, judge.url))

    assert not result.ready
    assert "scoring the seed failed" in result.detail


def test_skipped_seed_scoring_checks_health_only(judge):
    result = check_judge(judge.url, None)

    assert result.ready
    assert "seed scoring skipped" in result.detail
    assert judge.bodies("POST", "/submit") == []


def test_a_task_without_contract_is_not_scored_and_names_the_file(judge, tmp_path):
    result = check_judge(judge.url, seed_scorer(tmp_path, judge.url))

    assert not result.ready
    assert "contract.json is missing" in result.detail
    assert judge.bodies("POST", "/submit") == []


def test_unreachable_judge_is_missing():
    result = check_judge("http://127.0.0.1:9", None)

    assert not result.ready
    assert "ConnectError" in result.detail


# --------------------------------------------------------------------------------- executor


def test_executor_without_its_key_names_the_variable_not_a_value(executor_server, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    backend = backend_from_name("openrouter_glm_5_2", base_url=f"{executor_server.url}/v1")

    result = check_executor(backend)

    assert not result.ready
    assert "OPENROUTER_API_KEY" in result.detail
    assert result.fix.startswith("export OPENROUTER_API_KEY=<your key>")
    assert executor_server.requests == []


def test_executor_probe_sends_the_backend_options_and_accepts_empty_content(
    executor_server, monkeypatch
):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-preflight")
    executor_server.routes[("POST", "/v1/chat/completions")] = Route(200, chat(content=""))
    backend = backend_from_name("openrouter_glm_5_2", base_url=f"{executor_server.url}/v1")

    result = check_executor(backend)

    assert result.ready, result.detail
    assert "z-ai/glm-5.2 answered" in result.detail
    (body,) = executor_server.bodies("POST", "/v1/chat/completions")
    sent = json.loads(body)
    assert sent["max_tokens"] == 1
    assert sent["reasoning"] == {"effort": "high", "exclude": False}
    assert "sk-or-preflight" not in result.detail


def test_executor_error_status_is_missing_without_retrying(executor_server, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-x")
    executor_server.routes[("POST", "/v1/chat/completions")] = Route(503, {"error": "loading"})
    backend = backend_from_name("openrouter_glm_5_2", base_url=f"{executor_server.url}/v1")

    result = check_executor(backend)

    assert not result.ready
    assert "HTTP 503" in result.detail
    assert len(executor_server.bodies("POST", "/v1/chat/completions")) == 1


# ------------------------------------------------------------------------------- other rows


def test_python_older_than_3_12_is_missing():
    assert not check_python((3, 11, 9)).ready
    assert check_python((3, 12, 0)).ready


def test_absent_torch_is_reported_with_the_install_command():
    def no_torch(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {name!r}")

    result = check_gpus(import_module=no_torch)

    assert not result.ready
    assert result.detail == "torch not installed"
    assert "pip install -e '.[train]'" in result.fix


def fake_torch(count: int) -> Any:
    """Stand-in for a CUDA torch (no GPU exists here): only what `check_gpus` reads."""
    cuda = SimpleNamespace(device_count=lambda: count, get_device_name=lambda i: f"H100 #{i}")
    return SimpleNamespace(cuda=cuda, __version__="2.x+cu")


def test_gpu_count_must_cover_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    short = check_gpus(import_module=lambda _: fake_torch(2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    enough = check_gpus(import_module=lambda _: fake_torch(2))

    assert not short.ready
    assert "3 needed" in short.detail and "CUDA_VISIBLE_DEVICES='0,1,2'" in short.detail
    assert enough.ready
    assert "H100 #1" in enough.detail


@no_gpu_here
def test_real_torch_without_gpus_is_missing(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    result = check_gpus()

    assert not result.ready
    assert result.detail.startswith("0 GPUs visible to torch, 1 needed")


def test_model_directory_with_a_missing_shard_is_fetchable_not_complete(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    (model / shards["a"]).write_bytes(b"x")

    result = check_model(model)

    assert result.ready
    assert "model-00002-of-00002.safetensors" in result.detail
    assert "fetchable as Qwen/Qwen3-8B" in result.detail


def test_absent_model_without_huggingface_hub_is_missing(tmp_path):
    def no_hub(name: str) -> Any:
        raise ModuleNotFoundError(name)

    result = check_model(tmp_path / "model", import_module=no_hub)

    assert not result.ready
    assert "no config.json" in result.detail
    assert "huggingface_hub" in result.fix


def test_complete_model_directory_is_ready(model_dir):
    result = check_model(model_dir)

    assert result.ready
    assert "has config.json and weights" in result.detail


def test_git_lfs_absent_from_path_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))

    assert not check_git_lfs().ready


def test_git_lfs_on_path_is_ready():
    result = check_git_lfs()

    assert result.ready, result.detail
    assert "git-lfs" in result.detail


def test_disk_threshold_is_checked_at_the_nearest_existing_parent(tmp_path):
    state = tmp_path / "not" / "yet" / "created"

    ok = check_disk(state, min_free_gb=0.001)
    too_much = check_disk(state, min_free_gb=1e9)

    assert ok.ready and str(tmp_path) in ok.detail
    assert not too_much.ready and "set training.config.state_dir" in too_much.fix
    assert "training.config.harness.min_free_gb" in too_much.fix
    assert not state.exists()


def test_a_crashing_check_is_a_missing_row_not_an_exception(judge, executor_server, model_dir):
    def broken() -> Any:
        raise RuntimeError("scorer exploded")

    started = time.monotonic()
    report = run_preflight(
        state_dir=model_dir,
        model_dir=model_dir,
        judge_url=judge.url,
        executor=backend_from_name("gpt_oss_120b", base_url=f"{executor_server.url}/v1"),
        score_seed=broken,
        min_free_gb=0.001,
    )

    assert time.monotonic() - started < 60
    assert "scorer exploded" in rows(report)["judge"].detail
    assert not rows(report)["judge"].ready


def test_seed_program_reads_a_seed_record_or_a_program_file(tmp_path: Path) -> None:
    record = tmp_path / "seed.json"
    record.write_text(json.dumps({"entry": {"solution": "int main() {}"}}))
    program = tmp_path / "main.cpp"
    program.write_text("int main() { return 0; }")
    assert seed_program(record) == "int main() {}"
    assert seed_program(program) == "int main() { return 0; }"
    record.write_text(json.dumps({"node": {}}))
    with pytest.raises(
        ValueError, match=r"seed\.json is not a seed record with an entry\.solution"
    ):
        seed_program(record)


def test_every_hint_names_a_setting_the_user_changes_not_an_internal_flag(tmp_path):
    """With everything missing, each row's fix names run.sh's environment variables or
    serve.yaml keys (or a command to install), never a flag of the preflight module that
    run.sh passes for the user."""
    dead = f"http://127.0.0.1:{free_port()}"
    report = run_preflight(
        state_dir=tmp_path / "state",
        model_dir=tmp_path / "no-model",
        judge_url=dead,
        executor=backend_from_name("gpt_oss_120b", base_url=dead + "/v1"),
        min_free_gb=1e9,
        min_gpus=64,
    )
    by_name = {check.name: check for check in report.missing}
    assert {"GPUs", "judge", "executor", "disk"} <= set(by_name)
    for check in report.missing:
        assert " --" not in check.fix, (check.name, check.fix)
    assert "FRONTIERCS_JUDGE_URL" in by_name["judge"].fix
    assert "GUIDANCE_TTT_EXECUTOR_URL" in by_name["executor"].fix
    assert "training.config.state_dir" in by_name["disk"].fix
    assert "CUDA_VISIBLE_DEVICES" in by_name["GPUs"].fix


@pytest.mark.slow
def test_doctor_takes_its_defaults_from_serve_yaml_and_the_installed_task_from_any_directory(
    tmp_path,
):
    """Run from a directory that holds no checkout: the state directory is serve.yaml's
    (relative to serve.yaml), the task and its seed come from the installed package."""
    dead = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "FRONTIERCS_JUDGE_URL": dead, "GUIDANCE_TTT_EXECUTOR_URL": dead + "/v1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.entry",
            "doctor",
            "--min-free-gb",
            "0",
            "--min-gpus",
            "64",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 1, done.stderr
    assert "Guidance-TTT preflight" in done.stdout
    # Not a terminal (captured): a table takes the log width, so no path breaks mid-word
    # (harness.preflight.report.LOG_WIDTH); where a path is wider than its column (a checkout
    # under a long path) the rows are printed one by one instead, each line whole.
    table = [line for line in done.stdout.splitlines() if line.startswith(("|", "+"))]
    assert all(len(line) <= LOG_WIDTH for line in table)
    text = " ".join(done.stdout.split())
    assert dead in text  # FRONTIERCS_JUDGE_URL reached serve.yaml's judge_url
    assert str(tmp_path) not in text  # nothing resolved against the current directory
    assert "missing GPUs, judge, executor" in done.stderr  # the seed's task was found
    args = resolve_defaults(build_parser().parse_args([]))
    assert args.task_dir == REPO / "harbor" / "polyomino_packing"
    assert args.state_dir == REPO / "work" / "polyomino_packing"
    assert args.seed_file == args.task_dir / "solution" / "seed.json"


def test_a_configured_seed_is_used_when_the_main_flags_are_all_given(tmp_path: Path) -> None:
    """Giving the six main flags does not make the preflight judge the default seed instead of
    the one serve.yaml configures (`training.config.harness.seed`)."""
    serve = tmp_path / "serve.yaml"
    serve.write_text(
        (REPO / "serve.yaml")
        .read_text()
        .replace("${GUIDANCE_TTT_SEED:-solution/seed.json}", "solution/shelf/seed.json", 1)
    )
    flags = ["--config", str(serve), "--state-dir", "s", "--model-dir", "m", "--judge-url"]
    flags += ["http://127.0.0.1:9", "--task-dir", str(REPO / "harbor" / "polyomino_packing")]
    flags += ["--executor", "gpt_oss_120b", "--reasoning-effort", "high"]
    args = resolve_defaults(build_parser().parse_args(flags))
    assert args.seed_file == REPO / "harbor" / "polyomino_packing" / "solution/shelf/seed.json"
    assert args.state_dir == Path("s") and args.judge_url == "http://127.0.0.1:9"
    missing = resolve_defaults(build_parser().parse_args([*flags[2:], "--config", "nowhere.yaml"]))
    assert missing.seed_file is None  # no settings file: the flags alone, as before


def test_a_check_that_crashes_is_a_missing_row_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in one check (here the disk check, made to raise) shows as that row, missing,
    with the exception and what to do; every other row is still checked."""

    def broken_disk_check(state_dir: Path, min_free_gb: float, *keys: object) -> CheckResult:
        raise RuntimeError(f"statvfs of {state_dir} exploded")

    monkeypatch.setattr("harness.preflight.doctor.check_disk", broken_disk_check)
    report = run_preflight(
        state_dir=tmp_path,
        model_dir=tmp_path,
        judge_url=closed_port_url(),
        executor=backend_from_name("gpt_oss_120b", base_url=f"{closed_port_url()}/v1"),
        min_free_gb=0.001,
    )
    by_name = rows(report)
    assert list(by_name) == ["python", "GPUs", "model", "judge", "executor", "git-lfs", "disk"]
    disk = by_name["disk"]
    assert not disk.ready
    assert disk.detail == f"check crashed: RuntimeError: statvfs of {tmp_path} exploded"
    assert disk.fix == "a bug in the preflight: report it with this line"
    assert by_name["python"].ready and by_name["git-lfs"].ready


def test_fixes_name_the_flags_of_the_command_typed_not_variables(monkeypatch):
    """Under `guidance-ttt run` (which gives its stack GUIDANCE_TTT_COMMAND) a dead guidance or
    executor endpoint's fix names that command's flags; `doctor` on its own names variables."""
    from harness.adapters.executor.backends import configured_backend
    from harness.preflight.services import check_guidance

    backend = configured_backend(
        "openai_compatible", base_url="http://127.0.0.1:9/v1", model="e", max_retries=0
    )
    monkeypatch.delenv("GUIDANCE_TTT_COMMAND", raising=False)
    assert "set GUIDANCE_TTT_GUIDANCE_URL" in check_guidance("http://127.0.0.1:9", model="m").fix
    for typed, front in (
        ("./run.sh --steps 3", "./run.sh"),
        ("guidance-ttt run", "guidance-ttt run"),
    ):
        monkeypatch.setenv("GUIDANCE_TTT_COMMAND", typed)
        guidance = check_guidance("http://127.0.0.1:9", model="m").fix
        executor = check_executor(backend, timeout_s=2).fix
        assert f"--guidance-url URL (without /v1) and --guidance-model MODEL to {front}" in guidance
        assert "--executor-url URL (with /v1) and --executor-model MODEL" in executor
        assert front in executor
        assert "GUIDANCE_TTT_GUIDANCE_URL" not in guidance + executor
        assert "GUIDANCE_TTT_EXECUTOR_URL" not in executor


def test_a_judge_started_beside_the_preflight_is_waited_for_in_its_file(tmp_path: Path) -> None:
    """`guidance-ttt run` renames the judge's URL and row into place once the judge listens;
    the preflight, started before that, reads them when they come, and gives up (None) when
    they never do."""
    address = tmp_path / "local-judge"

    def announce() -> None:
        written = tmp_path / "local-judge.writing"
        written.write_text("http://127.0.0.1:4242\nstarted by guidance-ttt run: problem 0\n")
        written.replace(address)

    later = threading.Timer(0.3, announce)
    later.start()
    try:
        assert judge_announced(address, timeout_s=60) == (
            "http://127.0.0.1:4242",
            "started by guidance-ttt run: problem 0",
        )
    finally:
        later.cancel()
    assert judge_announced(tmp_path / "never", timeout_s=0.1) is None
