"""What the run stores and sends, held to the reference's behaviour (the Guidance-TTT example's
`harness/scorer.py`, `harness/execution.py`, `harness/agent.py`, `harness/run_controller.py`,
`harness/harbor_agent.py`, `serve.yaml`). Each test names the reference file whose behaviour it
states; where this project keeps a difference, the test names its docs/differences.md row.

Real here: HTTP exchanges with scripted judges on 127.0.0.1 (tests/judge_fakes.py), `bash` for
the Harbor write path, the repository's serve.yaml. The exec-only environment stands for a
Harbor environment (the reference's own test fake offers `exec` only).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from judge_fakes import SUBMITTED, FakeJudge, Reply, checker_case, done, failed_run_case

from harness.adapters.executor.client import ExecutionResult
from harness.adapters.judge.frontiercs import SUBMISSION_TOO_LARGE, FrontierCSScorer
from harness.adapters.reef.status import read_step_status
from harness.run.candidate_file import DELIMITER, EXEC_COMMAND_LIMIT, write_candidate
from harness.scorer import JudgeUnavailableError

REPO = Path(__file__).resolve().parents[2]
TASK_DIR = REPO / "harbor" / "polyomino_packing"
PROGRAM = "int main() { return 0; }\n"
FAST = {"deadline_s": 2.0, "poll_interval_s": 0.02, "attempts": 2, "retry_backoff_s": 0.01}
MARKER = "CANDIDATE-STDERR-MARKER"
SCENARIO = "guidance-ttt-polyomino-packing"


def scorer_for(url: str, **overrides: float) -> FrontierCSScorer:
    return FrontierCSScorer.for_task(TASK_DIR, url, "0", **{**FAST, **overrides})


# --- the judge's verdict (reference: harness/scorer.py) -----------------------------------------


def test_a_valid_verdict_is_accepted_with_the_references_artifact_keys() -> None:
    """Reference harness/scorer.py: a `done` answer is valid with message `result.message or
    "accepted"` (FrontierCS answers carry no message) and artifacts `code`, `problem_id`,
    `submission_id`, `judge_status`, `score_unbounded`. Ours adds its own keys beside them
    (differences row 68); a failed case's stderr goes only to the bounded `case_detail`."""
    cases = [checker_case(400, 25, 20), failed_run_case(MARKER * 40, status="Runtime Error")]
    with FakeJudge([SUBMITTED], [done(cases)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert (verdict.status, verdict.message) == ("valid", "accepted")
    artifacts = verdict.artifacts
    reference = {"code", "problem_id", "submission_id", "judge_status", "score_unbounded"}
    assert reference <= set(artifacts)
    assert artifacts["code"] == PROGRAM and artifacts["problem_id"] == "0"
    assert artifacts["judge_status"] == "done" and artifacts["score_unbounded"] == 40.0
    assert MARKER in artifacts["case_detail"] and len(artifacts["case_detail"]) <= 600


def test_no_failure_message_carries_what_a_case_or_compile_log_said() -> None:
    """Reference harness/scorer.py keeps an `error` answer's text as the message, which its
    report's feedback then carries to Reef. Ours keeps the text in `judge_logs` (the
    reference's artifact key for an error's logs) and, for a rejected score, `score_check`;
    the message, which Reef receives, is ours (differences row 37)."""
    compile_log = {"status": "error", "error": f"Error: compile failed: {MARKER}"}
    forged = failed_run_case(f"points 1 Ratio: 1.0 (cells=1, W=1, H=1, area=1) {MARKER}")
    forged["scoreRatio"] = 1.0
    for answer in (Reply(200, compile_log), done([forged])):
        with FakeJudge([SUBMITTED], [answer]) as judge:
            verdict = scorer_for(judge.url)(PROGRAM)
        assert verdict.status == "invalid" and MARKER not in verdict.message
        kept = verdict.artifacts.get("judge_logs") or verdict.artifacts.get("score_check")
        assert MARKER in kept and len(kept) <= 600


@pytest.mark.parametrize(
    "answer",
    [
        {"status": "error", "message": "Compilation Error", "logs": f"solution.cpp:1: {MARKER}"},
        {"status": "error", "message": "compile failed", "stderr": f"solution.cpp:1: {MARKER}"},
        {"status": "error", "message": f"compile error: {MARKER}", "error": "Error"},
    ],
    ids=["message-and-logs", "message-and-stderr", "message-before-error"],
)
def test_an_error_answer_is_read_from_message_then_error(answer: dict[str, Any]) -> None:
    """Reference harness/scorer.py reads an `error` answer's text from `message`, then `error`,
    and its logs from `logs`, then `stderr`: a compile failure carried in `message` (another
    go-judge front than FrontierCS, which answers in `error`) is the candidate's `invalid`, its
    logs in `judge_logs`, not a judge fault retried until the step stops."""
    with FakeJudge([SUBMITTED], [Reply(200, answer)]) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert (verdict.status, verdict.reward, verdict.raw_score) == ("invalid", 0.0, None)
    assert verdict.artifacts["judge_status"] == "error" and MARKER not in verdict.message
    assert MARKER in verdict.artifacts["judge_logs"] and judge.count("submit") == 1


def test_a_submission_refused_as_too_large_is_an_environment_error() -> None:
    """Reference harness/scorer.py: any HTTP error on submit raises JudgeUnavailableError, which
    `JudgeScorer.__call__` turns into `environment_error` with reward 0 and artifacts
    `{"code": ...}`. Ours does that for a 413 (other refusals stop the run: row 10)."""
    with FakeJudge([Reply(413, {"error": "too large"})], []) as judge:
        verdict = scorer_for(judge.url)(PROGRAM)
    assert (verdict.status, verdict.reward, verdict.raw_score) == ("environment_error", 0.0, None)
    assert verdict.message == SUBMISSION_TOO_LARGE and verdict.artifacts == {"code": PROGRAM}
    assert judge.count("submit") == 1


@pytest.mark.parametrize(
    ("submit", "result", "submits"),
    [
        (Reply(503, {"error": "busy"}), Reply(404, {}), 2),
        (Reply(400, {"error": "unknown problem"}), Reply(404, {}), 1),
        (SUBMITTED, Reply(500, {"error": "database locked"}), 2),
    ],
    ids=["submit-5xx", "submit-400", "poll-500"],
)
def test_a_failed_submit_or_poll_error_stops_where_the_reference_scores_it(
    submit: Reply, result: Reply, submits: int
) -> None:
    """Reference harness/scorer.py: a failed submit (any HTTP error, a transport fault, no sid)
    and a poll answered with an HTTP error other than 404 raise JudgeUnavailableError, which its
    `JudgeScorer.__call__` makes the candidate's `environment_error`, reward 0. Ours gives no
    verdict (differences row 10): a 5xx is retried (here 2 attempts), a 4xx refusal is not,
    then the scorer raises and the step stops before the slot is reported."""
    with FakeJudge([submit], [result]) as judge, pytest.raises(JudgeUnavailableError):
        scorer_for(judge.url, deadline_s=0.3)(PROGRAM)
    assert judge.count("submit") == submits


def test_a_timed_out_evaluation_records_judge_status_timeout() -> None:
    """Reference harness/scorer.py: at the deadline the artifacts say `judge_status: timeout`
    and the message is `evaluation timed out after <deadline>s`."""
    with FakeJudge([SUBMITTED], [Reply(200, {"status": "queued"})]) as judge:
        verdict = scorer_for(judge.url, deadline_s=0.3)(PROGRAM)
    assert verdict.message == "evaluation timed out after 0.3s"
    assert verdict.artifacts["judge_status"] == "timeout"


# --- the executor's answer (reference: harness/execution.py, harness/agent.py) -----------------


def test_execution_response_metadata_has_the_references_keys() -> None:
    """Reference harness/execution.py: `provider` "openai_compatible", `backend`, `api_attempts`,
    `api_elapsed_s`, the request's `purpose` "execution", `api_response_model` and
    `api_response_provider` only when the body names them; harness/agent.py adds
    `finish_reason` (a string). Usage is `dict(data.get("usage") or {})`."""
    named = ExecutionResult("t", "", "stop", {"total_tokens": 3}, 2, 1.5, "m", "p", "b")
    assert named.response_metadata() == {
        "provider": "openai_compatible",
        "backend": "b",
        "api_attempts": 2,
        "api_elapsed_s": 1.5,
        "purpose": "execution",
        "api_response_model": "m",
        "api_response_provider": "p",
        "finish_reason": "stop",
    }
    bare = ExecutionResult("t", "", None, None, 1, 0.5, backend="b")
    assert "api_response_model" not in bare.response_metadata()
    assert bare.response_metadata()["finish_reason"] == ""
    assert bare.response_usage() == {}


# --- the barrier (reference: harness/run_controller.py) ----------------------------------------


def page(scenarios: Any) -> dict[str, Any]:
    return {"error": None, "scenarios": scenarios}


@pytest.mark.parametrize(
    ("scenarios", "named"),
    [
        ({SCENARIO: {"scenario_step": 0}}, "no processor block"),
        ({SCENARIO: {"processor": {"open_steps": []}}}, "failed_steps is None"),
        (
            {SCENARIO: {"processor": {"failed_steps": [{"step": 0, "release_ids": []}]}}},
            "non-empty `reason`",
        ),
    ],
)
def test_the_barrier_refuses_a_page_it_cannot_read_a_failure_from(
    scenarios: Any, named: str
) -> None:
    """Reference harness/run_controller.py: `scenario_status` raises when the page has no
    mapping for the scenario, `failed_training_step` when `processor` is not a mapping, its
    `failed_steps` not a list, or an entry lacks a non-empty `reason` or a `release_ids` list.
    The `status` command's reading (not strict) still treats them as "nothing known yet"."""
    with pytest.raises(RuntimeError, match=named):
        read_step_status(page(scenarios), SCENARIO, 0, strict=True)
    if named != "non-empty `reason`":
        assert read_step_status(page(scenarios), SCENARIO, 0).failed is None


def test_a_page_without_the_scenario_is_read_as_nothing_known_yet() -> None:
    """Reference harness/run_controller.py `scenario_status` raises on a page without the
    scenario; ours waits (differences row 43): a Reef without a training backend for the
    scenario, as the CPU rehearsal's record-only one, lists none."""
    status = read_step_status(page({}), SCENARIO, 0, strict=True)
    assert (status.error, status.failed, status.missing_slots) == (None, None, None)


# --- the Harbor agent (reference: harness/harbor_agent.py, run.py) -----------------------------


@dataclass
class ExecResult:
    return_code: int
    stdout: str
    stderr: str


class ExecOnlyEnvironment:
    """A Harbor environment that offers `exec` only, as the reference's test fake does; the
    command runs in real `bash` on this host."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    async def exec(self, command: str, **_: Any) -> ExecResult:
        self.commands.append(command)
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)
        return ExecResult(done.returncode, done.stdout, done.stderr)


def test_the_candidate_is_written_with_one_exec_of_a_here_document(tmp_path: Path) -> None:
    """Reference harness/harbor_agent.py: one `environment.exec` of
    `cat > <path> <<'REEF_GUIDANCE_EOF'` with the program and a final newline; a non-zero exit
    raises. A program holding the delimiter as a line gets another one (it would otherwise
    end the document and run the rest as shell commands), and nothing in it is expanded."""
    target = tmp_path / "workspace" / "solution.cpp"
    hostile = f'int main() {{ return 0; }}\n{DELIMITER}\ntouch "{tmp_path}/pwned"\n$(echo hi) `x`'
    environment = ExecOnlyEnvironment()
    asyncio.run(write_candidate(environment, str(target), hostile))
    assert target.read_text() == hostile + "\n"
    assert not (tmp_path / "pwned").exists()
    (command,) = environment.commands
    assert f"<<'{DELIMITER}_" in command
    plain = ExecOnlyEnvironment()
    asyncio.run(write_candidate(plain, str(target), PROGRAM.rstrip("\n")))
    assert f"<<'{DELIMITER}'\n" in plain.commands[0] and target.read_text() == PROGRAM
    with pytest.raises(RuntimeError, match="failed"):
        asyncio.run(write_candidate(ExecOnlyEnvironment(), "/proc/no/such/solution.cpp", PROGRAM))


def test_an_over_long_candidate_is_uploaded_instead(tmp_path: Path) -> None:
    """Ours only (differences row 67): a command over EXEC_COMMAND_LIMIT bytes would exceed
    Linux's 128 KiB limit on one `bash -c` argument, so the file is uploaded."""

    class Uploading(ExecOnlyEnvironment):
        async def upload_file(self, source: Path, target: str) -> None:
            Path(target).write_bytes(Path(source).read_bytes())

    target = tmp_path / "w" / "solution.cpp"
    program = "// " + "x" * EXEC_COMMAND_LIMIT
    environment = Uploading()
    asyncio.run(write_candidate(environment, str(target), program))
    assert target.read_text() == program + "\n"
    assert all("cat >" not in command for command in environment.commands)


def test_a_model_name_other_than_serve_yamls_is_refused(tmp_path: Path) -> None:
    """Reference harness/harbor_agent.py uses `self.model_name or "reef"` as the guidance
    requests' model. Ours reads serve.yaml's `training.config.model` and refuses another
    `model_name` before anything starts (differences row 69)."""
    from harness.run.harbor_agent import HarborAgent

    agent = HarborAgent(tmp_path, model_name="someone/else", serve_yaml=str(REPO / "serve.yaml"))
    with pytest.raises(ValueError, match=r"'someone/else' differs from serve\.yaml"):
        asyncio.run(agent.run("problem", ExecOnlyEnvironment(), None))  # type: ignore[arg-type]


def test_run_py_prints_the_references_episode_reward_line() -> None:
    """Reference run.py: `print(f"episode reward: {row.rewards}")`."""
    assert 'print(f"episode reward: {row.rewards}")' in (REPO / "run.py").read_text()


# --- serve.yaml (reference: serve.yaml) ---------------------------------------------------------

#: The reference serve.yaml's `observability.wandb` values (its commented keys are absent: None).
REFERENCE_WANDB = {
    "enabled": False,
    "project": "reef",
    "entity": None,
    "group_prefix": None,
    "name_prefix": None,
    "tags": [],
    "mode": "online",
    "upload_checkpoints": False,
}


def test_serve_yamls_wandb_block_has_the_references_values() -> None:
    """Reference serve.yaml: `observability.wandb` is enabled false, project reef, tags [], mode
    online, upload_checkpoints false, the directory under the task's work directory."""
    block = yaml.safe_load((REPO / "serve.yaml").read_text())["observability"]["wandb"]
    assert {key: block.get(key) for key in REFERENCE_WANDB} == REFERENCE_WANDB
    assert block["directory"] == "${training.config.state_dir}/wandb"


def test_the_guidance_call_timeout_is_serve_yamls_inference_timeout() -> None:
    """Reference harness/harbor_agent.py: one Reef client with 28800 s for every call. Ours
    (differences row 46): guidance calls wait `GUIDANCE_TIMEOUT_S`, a constant equal to
    serve.yaml's `inference.timeout-s` (after which Reef has given up anyway); reports 120 s."""
    from harness.adapters.reef.channel import GUIDANCE_TIMEOUT_S, REPORT_TIMEOUT_S

    inference = yaml.safe_load((REPO / "serve.yaml").read_text())["inference"]
    assert GUIDANCE_TIMEOUT_S == float(inference["timeout-s"]) == 7200.0
    assert REPORT_TIMEOUT_S == 120.0


def test_reefs_bridge_health_carries_no_runtime_load_id() -> None:
    """Reference harness/run_controller.py takes `runtime_load_id` from the last committed
    step's bridge health; the pinned Reef's `TrainingCoordinator.health()` has no such key, so
    the reference's value is always null there, and ours reads Reef's status page instead
    (differences row 70)."""
    import inspect

    from reef.runtime.scheduler import TrainingCoordinator

    source = inspect.getsource(TrainingCoordinator.health)
    assert '"completed_train_steps"' in source  # the keys are spelled out in this method
    assert '"runtime_load_id"' not in source


def test_the_task_verifier_records_a_done_answer_without_cases_as_reward_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reference harbor/polyomino_packing/tests/grade.py takes a `done` answer's `score` as it
    comes. Ours (differences row 44): the task verifier's hardening finds no list of cases and
    scores 0 with that reason (the harness instead retries it as a judge fault, row 10)."""
    import importlib.util

    tests_dir = TASK_DIR / "tests"
    monkeypatch.syspath_prepend(str(tests_dir))
    spec = importlib.util.spec_from_file_location("_task_verify", tests_dir / "verify.py")
    assert spec is not None and spec.loader is not None
    verify = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(verify)
    assert verify.inconsistency({"status": "done", "score": 40.0}) == (
        "the result has no list of cases"
    )


def test_the_agent_writes_the_best_candidate_into_an_exec_only_environment(
    tmp_path: Path,
) -> None:
    """Reference harness/harbor_agent.py and its test: an environment offering only `exec`
    receives one command holding the program and `/workspace/solution.cpp`. Here that command
    runs in `bash` with the container's `/workspace` standing at a temporary directory."""
    from types import SimpleNamespace

    from harness.run.harbor_agent import HarborAgent

    class Container(ExecOnlyEnvironment):
        async def exec(self, command: str, **_: Any) -> ExecResult:
            self.commands.append(command)
            local = command.replace("/workspace", str(tmp_path / "workspace"))
            done = subprocess.run(["bash", "-c", local], capture_output=True, text=True, timeout=30)
            return ExecResult(done.returncode, done.stdout, done.stderr)

    program = "#include <iostream>\nint main() { return 0; }"
    best = SimpleNamespace(solution=program, verifier_raw_score=27.8)
    agent = HarborAgent(tmp_path / "logs", serve_yaml=str(REPO / "serve.yaml"))
    environment = Container()
    asyncio.run(agent._write_best(environment, SimpleNamespace(best=best), TASK_DIR))  # type: ignore[arg-type]
    (command,) = environment.commands
    assert program in command and "/workspace/solution.cpp" in command
    assert (tmp_path / "workspace" / "solution.cpp").read_text() == program + "\n"


def print_config(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    reef = Path(sys.executable).parent / "reef"
    command = [str(reef), "serve", "-c", str(path), "--print-config"]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_reef_accepts_the_references_serve_keys_but_schema_version(tmp_path: Path) -> None:
    """Reference serve.yaml: `schema-version: 2`, `inference.handler-factory`,
    `inference.options.router-port`, `training.options.hf-checkpoint`. The pinned Reef refuses
    only `schema-version`; ours leaves the other three to Reef's defaults, which give the
    reference's handler and `hf-checkpoint` (differences row 41)."""
    ours = yaml.safe_load((REPO / "serve.yaml").read_text())
    theirs = dict(ours)
    theirs["inference"] = {
        **ours["inference"],
        "handler-factory": "reef.inference.sglang.chat.SGLangInferenceHandler",
        "options": {**ours["inference"]["options"], "router-port": "30000"},
    }
    theirs["training"] = {
        **ours["training"],
        "options": {**ours["training"]["options"], "hf-checkpoint": "${inference.model-path}"},
    }
    accepted = tmp_path / "with-reference-keys.yaml"
    accepted.write_text(yaml.safe_dump(theirs, sort_keys=False))
    refused = tmp_path / "with-schema-version.yaml"
    refused.write_text(yaml.safe_dump({"schema-version": 2, **theirs}, sort_keys=False))
    done = print_config(accepted, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "reef.inference.sglang.chat.SGLangInferenceHandler  (file)" in done.stdout
    refusal = print_config(refused, tmp_path)
    assert refusal.returncode != 0 and "schema-version" in refusal.stdout + refusal.stderr
    default = print_config(REPO / "serve.yaml", tmp_path)
    assert default.returncode == 0, default.stderr
    assert '"hf-checkpoint": "${reef.model_path}"' in default.stdout
    assert "inference.handler-factory = null  (default)" in default.stdout

    from reef.inference.sglang.chat import SGLangInferenceHandler
    from reef.inference.sglang.runtime import SGLangInferenceRuntime

    assert SGLangInferenceRuntime.default_inference_handler is SGLangInferenceHandler
