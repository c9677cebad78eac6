"""Preflight checks of the services a run talks to: the judge, the executor and, in
frozen-guidance mode, the guidance endpoint.

Each check makes one bounded request (a health probe, the seed judged once, a 1-token chat
request), returns a `CheckResult` and never raises: a failing or unreachable service is a
missing row whose fix names the environment variable or command that points the run at it. An
API key is sent where needed but only ever reported by its variable's name. `judge_announced`
waits for the URL of a judge `guidance-ttt run` is starting beside the preflight.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from harness.adapters.executor.backends import ExecutionBackend
from harness.adapters.executor.client import (
    ACCESS_STATUSES,
    ExecutionClient,
    ExecutionError,
    ExecutionHTTPError,
    MissingAPIKeyError,
)
from harness.adapters.judge.suites import suite_name
from harness.adapters.judge.token import TOKEN_ENV, judge_headers, unauthorized_hint
from harness.preflight.report import CheckResult, missing_check, ready_check
from harness.prompts import Prompt, guidance_request_body
from harness.request_shapes import OPENAI_CHAT_FIELDS, RequestShape
from harness.state import VerificationResult

HEALTH_TIMEOUT_S = 5.0
EXECUTOR_PROBE_TIMEOUT_S = 60.0


def typed_command() -> str | None:
    """The front command of the run being checked, as the user typed its first words
    (`guidance-ttt run` or `./run.sh`; `GUIDANCE_TTT_COMMAND`, set by `guidance-ttt run` for
    its stack), or None when the preflight runs on its own (`guidance-ttt doctor`)."""
    command = os.environ.get("GUIDANCE_TTT_COMMAND", "").strip()
    if not command:
        return None
    return "./run.sh" if command.startswith("./run.sh") else "guidance-ttt run"


def flag_or_variable(flags: str, variables: str) -> str:
    """`flags` of the command that was typed (`pass --guidance-url … to guidance-ttt run`),
    else the environment `variables` (the preflight on its own)."""
    command = typed_command()
    return f"pass {flags} to {command}" if command else f"set {variables}"


def check_judge(judge_url: str, score_seed: Callable[[], VerificationResult] | None) -> CheckResult:
    """The judge answers `GET /health` with `{"ok": true}` and, unless `score_seed` is None, judges
    the seed candidate as valid with a non-zero score. `score_seed` is the caller's scorer bound
    to the seed program (e.g. `FrontierCSScorer`), so the check exercises the same client the run
    uses."""
    url = judge_url.rstrip("/")
    fix = (
        f"start the judge at {url} (guidance-ttt judge, or the FrontierCS compose stack), or "
        "point FRONTIERCS_JUDGE_URL at a running one"
    )
    try:
        response = httpx.get(f"{url}/health", timeout=HEALTH_TIMEOUT_S)
        healthy = response.status_code == 200 and response.json().get("ok") is True
        answer = f"{response.status_code} {response.text[:120]!r}"
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        healthy, answer = False, f"{type(exc).__name__}: {exc}"
    if not healthy:
        return missing_check("judge", f"GET {url}/health failed: {answer}", fix)
    refused = token_refused(url)
    if refused is not None:
        return missing_check(
            "judge",
            f"{url} healthy but refuses the run's requests: {refused}",
            f"export {TOKEN_ENV} with the judge's token, here and where the task verifier runs "
            "(task.toml passes it into the container)",
        )
    if score_seed is None:
        return ready_check("judge", f"{url} healthy (seed scoring skipped)")
    try:
        verdict = score_seed()
    except Exception as exc:  # JudgeUnavailableError, unreadable seed, ...: all are "not ready"
        return missing_check("judge", f"{url} healthy but scoring the seed failed: {exc}", fix)
    certified = "case_values" in verdict.artifacts  # a verifier's value: 0 is a real score
    if not verdict.valid or (not verdict.raw_score and not certified):
        # A seed on which every case scored 0 is a valid candidate to the run, but as a
        # preflight answer it says the judge's problem package does not fit the task.
        return missing_check(
            "judge",
            f"{url} judged the seed {verdict.status} with score "
            f"{'--' if verdict.raw_score is None else f'{verdict.raw_score:.4f}'}: "
            f"{verdict.message}{_judge_log(verdict)}",
            "check the judge's problem package and the problem id (FRONTIERCS_PROBLEM_ID, "
            "else judge_problem_id in the task's contract.json)",
        )
    return ready_check("judge", f"{url} healthy; " + seed_on_suite(verdict))


def token_refused(url: str) -> str | None:
    """Why the judge refuses a request that needs its token (`GET /problems`, sent as the run's
    client and the task verifier send it), or None when it accepts it. The token is never
    shown, only its variable's name."""
    try:
        response = httpx.get(f"{url}/problems", timeout=HEALTH_TIMEOUT_S, headers=judge_headers())
    except httpx.HTTPError as exc:
        return f"GET {url}/problems failed: {type(exc).__name__}: {exc}"
    if response.status_code == 401:
        return f"GET {url}/problems answered 401" + unauthorized_hint(401)
    return None


def seed_on_suite(verdict: VerificationResult) -> str:
    """The judge row's seed line. Scores of two suites are never put side by side: when the
    seed file measured the seed on another suite than the judge's, the line says so and that
    the run re-scores the seed on the judge's suite at start."""
    suite = suite_name(verdict.artifacts.get("judge_suite"))
    text = f"seed scored {verdict.raw_score:.4f} on suite {suite}"
    recorded = verdict.artifacts.get("seed_file")
    if not isinstance(recorded, dict):
        return text
    if recorded.get("suite") is None:
        return text + " (the seed record names no suite for its score: not compared)"
    if recorded.get("suite") == suite:
        return text + f" (seed.json: {recorded.get('score', 0.0):.4f} on {suite})"
    return (
        text + f"; seed.json measured it on {recorded.get('suite')}, not compared: the run "
        f"re-scores the seed on {suite} at start and records it"
    )


def check_guidance(
    url: str,
    *,
    model: str | None = None,
    shape: RequestShape | None = None,
    settings_key: Callable[[str], str] = lambda name: f"training.config.{name}",
) -> CheckResult:
    """Frozen-guidance mode: the OpenAI-compatible endpoint lists `model` at `GET <url>/v1/models`
    (when it lists models) and answers one real request of the run's own shape (the guidance
    body shaped by `shape`, `max_completion_tokens` cut to `PROBE_MAX_TOKENS`). A refusal is the
    row's reason in one line: the endpoint's own message and the setting that changes the body.
    The tokens the call used are shown in the row (they are billed like any other call)."""
    base = url.rstrip("/")
    fix = "start the guidance server, or " + flag_or_variable(
        "--guidance-url URL (without /v1) and --guidance-model MODEL",
        "GUIDANCE_TTT_GUIDANCE_URL (without /v1) and GUIDANCE_TTT_GUIDANCE_MODEL for "
        "serve-frozen.yaml",
    )
    key = os.environ.get("GUIDANCE_TTT_GUIDANCE_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    target = base + "/v1/models"
    try:
        response = httpx.get(target, headers=headers, timeout=HEALTH_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return missing_check("guidance", f"GET {target} failed: {type(exc).__name__}: {exc}", fix)
    if response.status_code != 200:
        return missing_check("guidance", f"GET {target} answered {response.status_code}", fix)
    if model is None:
        return ready_check(
            "guidance", f"{url} answers (frozen guidance: no GPUs or weights needed)"
        )
    listed = _model_ids(response)
    if listed is not None and model not in listed:
        shown = ", ".join(listed[:5]) + (" …" if len(listed) > 5 else "")
        return missing_check(
            "guidance",
            f"{target} lists {shown or 'no models'}, not {model!r}",
            flag_or_variable(
                "--guidance-model with a listed id",
                "GUIDANCE_TTT_GUIDANCE_MODEL (inference.upstream-model) to a listed id",
            ),
        )
    shape = shape or RequestShape()
    body = shape.apply(
        guidance_request_body(PROBE_PROMPT, model=model, max_tokens=PROBE_MAX_TOKENS)
    )
    chat = base + "/v1/chat/completions"
    try:
        answer = httpx.post(chat, json=body, headers=headers, timeout=GUIDANCE_PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return missing_check("guidance", f"POST {chat} failed: {type(exc).__name__}: {exc}", fix)
    if not answer.is_success:
        message = endpoint_message(answer)
        return missing_check(
            "guidance",
            f"the endpoint refused the request ({answer.status_code}): {message}",
            request_fix(message, shape, settings_key("harness.guidance.request")),
        )
    usage = _usage(answer)
    used = _total_tokens(usage)
    return ready_check(
        "guidance",
        f"{url} serves {model!r} and answered a request of the run's shape "
        f"(dialect {shape.describe()}; {used} tokens, counted in the run's cost)",
        usage,
    )


#: The guidance preflight's one real request: the run's body with a tiny answer budget.
PROBE_PROMPT = Prompt("You are a preflight check.", "Reply with OK.")
PROBE_MAX_TOKENS = 16
GUIDANCE_PROBE_TIMEOUT_S = 120.0
#: How services name a field they refuse: OpenAI's "Unrecognized request argument supplied: X",
#: "unknown field/parameter X", pydantic's "Extra inputs are not permitted" with the field.
_UNRECOGNIZED = re.compile(
    r"(?:Unrecognized request argument supplied|[Uu]nknown (?:field|param(?:eter)?)|"
    r"[Ee]xtra (?:inputs|fields)[^:]*)[:\s]+['\"`]?([A-Za-z_][\w.]*)"
)


def endpoint_message(response: httpx.Response) -> str:
    """The endpoint's own error message in one line (OpenAI's `error.message`, SGLang's
    `message`, FastAPI's `detail`), else the start of the body."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    message: Any = None
    if isinstance(payload, dict):
        error = payload.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        message = message or payload.get("message") or payload.get("detail")
    text = str(message) if message else response.text
    return " ".join(text.split())[:300] or f"HTTP {response.status_code}"


def request_fix(
    message: str, shape: RequestShape, where: str, explicit: frozenset[str] = frozenset()
) -> str:
    """The setting that changes what the endpoint refused: the `openai` dialect when the field
    is one it leaves out, else dropping that field (always for an `explicit` field, one the
    settings add, which no dialect removes); a generic hint when no field is named."""
    found = _UNRECOGNIZED.search(message)
    if found is None:
        return f"check {where} (dialect: sglang | openai | openrouter; drop; extra_body)"
    name = found.group(1)
    if name not in explicit and shape.dialect != "openai" and name not in OPENAI_CHAT_FIELDS:
        return f"set {where}.dialect: openai (it sends no {name})"
    if name == "max_tokens" and shape.dialect != "openai":
        return f"set {where}.dialect: openai (it sends max_completion_tokens)"
    return f"set {where}.drop: [{name}] (or remove it from the settings that add it)"


def _message_of(body: str) -> str | None:
    """The error message in an error body kept as text (`ExecutionHTTPError.body`)."""
    return endpoint_message(httpx.Response(400, text=body)) if body else None


def _model_ids(response: httpx.Response) -> list[str] | None:
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [str(item.get("id")) for item in data if isinstance(item, dict) and item.get("id")]


def _usage(response: httpx.Response) -> dict[str, Any] | None:
    """The answer's OpenAI `usage` object, None when it has none."""
    try:
        usage = response.json().get("usage")
    except (ValueError, AttributeError):
        return None
    return dict(usage) if isinstance(usage, dict) else None


def _total_tokens(usage: dict[str, Any] | None) -> int | str:
    """The call's total tokens as the row shows them (`total_tokens`, else prompt + completion)."""
    counts = [(usage or {}).get(k) for k in ("total_tokens", "prompt_tokens", "completion_tokens")]
    if isinstance(counts[0], int):
        return counts[0]
    if all(isinstance(c, int) for c in counts[1:]):
        return counts[1] + counts[2]
    return "unknown"


def check_executor(
    backend: ExecutionBackend,
    *,
    timeout_s: float = EXECUTOR_PROBE_TIMEOUT_S,
    settings_key: Callable[[str], str] = lambda name: f"training.config.{name}",
) -> CheckResult:
    """The configured executor is usable: its key variable is set (when it names one),
    `GET <base_url>/models` lists its model (when the endpoint lists models at all), and it
    answers a 1-token chat request (no retries, bounded by `timeout_s`). A key is reported by
    the name of its environment variable, never its value."""
    label = f"{backend.name} ({backend.model}) at {backend.base_url}"
    key_name = backend.api_key_env
    key = os.environ.get(key_name, "").strip() if key_name else ""
    if key_name and not key:
        return missing_check(
            "executor",
            f"{label}: the key variable {key_name} is not set",
            f"export {key_name}=<your key> ({settings_key('harness.executor.api_key_env')} "
            "names the variable)",
        )
    fix = f"start the executor at {backend.base_url}, or " + flag_or_variable(
        "--executor-url URL (with /v1) and --executor-model MODEL (--set "
        "harness.executor_backend=NAME picks a preset or openai_compatible)",
        f"{settings_key('harness.executor.base_url')} (GUIDANCE_TTT_EXECUTOR_URL) to where it "
        "runs (GUIDANCE_TTT_EXECUTOR picks a preset or openai_compatible)",
    )
    listed = _listed_models(backend.base_url, key)
    if listed is not None and backend.model not in listed:
        shown = ", ".join(listed[:5]) + (" …" if len(listed) > 5 else "")
        return missing_check(
            "executor",
            f"{label}: GET {backend.base_url}/models lists {shown or 'no models'}, not "
            f"{backend.model!r}",
            flag_or_variable(
                "--executor-model with a listed id",
                f"{settings_key('harness.executor.model')} (GUIDANCE_TTT_EXECUTOR_MODEL) to a "
                "listed id",
            ),
        )
    probe_backend = replace(backend, timeout_s=min(backend.timeout_s, timeout_s), max_retries=0)
    try:
        with ExecutionClient(probe_backend) as client:
            detail, usage = client.probe()
    except ExecutionHTTPError as exc:
        if exc.status in ACCESS_STATUSES or exc.status >= 500:
            return missing_check("executor", f"{label}: {exc}", fix)
        message = _message_of(exc.body) or str(exc)
        return missing_check(
            "executor",
            f"{label}: the endpoint refused the request ({exc.status}): {message}",
            request_fix(
                message,
                RequestShape(backend.dialect),
                settings_key("harness.executor.request"),
                frozenset(backend.request_options),
            ),
        )
    except ExecutionError as exc:
        if isinstance(exc, MissingAPIKeyError):
            fix = f"export {backend.api_key_env}=<your key>"
        return missing_check("executor", f"{label}: {exc}", fix)
    listing = "listed by /models; " if listed is not None else ""
    spent = f"; {_total_tokens(usage)} tokens, counted in the run's cost" if usage else ""
    return ready_check("executor", f"{label}: {listing}{detail}{spent}", usage)


def _listed_models(base_url: str, key: str) -> list[str] | None:
    """The model ids `GET <base_url>/models` lists; None when the endpoint lists none (no such
    route, an unexpected answer, or no answer: the chat probe then says what is wrong)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(f"{base_url}/models", headers=headers, timeout=HEALTH_TIMEOUT_S)
        data = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [str(item.get("id")) for item in data if isinstance(item, dict) and item.get("id")]


def _judge_log(verdict: VerificationResult) -> str:
    """The start of the judge's log for the seed (a compile error, say): the seed is the
    operator's own program, and the preflight's reader needs the judge's words to fix it."""
    logs = (verdict.artifacts or {}).get("judge_logs")
    if not logs:
        return ""
    return f" (judge log: {' '.join(str(logs).split())[:240]})"


#: How long the preflight waits for the URL of a judge started beside it (the local judge's own
#: start timeout: `harness.adapters.judge.process.LocalJudge`).
JUDGE_ANNOUNCE_S = 180.0


def judge_announced(path: Path, timeout_s: float = JUDGE_ANNOUNCE_S) -> tuple[str, str] | None:
    """The URL and preflight row `guidance-ttt run` writes to `path` once the judge it starts
    listens (the file appears whole: it is renamed into place); None when none comes within
    `timeout_s` (the command stops the preflight first when the judge fails)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        if len(lines) >= 2:
            return lines[0], lines[1]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
