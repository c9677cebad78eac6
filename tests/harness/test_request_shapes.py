"""Request bodies held to the services' own definitions (docs/frozen.md, "What each dialect sends").

The definitions, and where each comes from:

- **OpenAI Chat Completions**: the installed `openai` package's request types,
  `openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming` (and
  `...Streaming`), validated with a pydantic `TypeAdapter`; a top-level field they do not declare
  is refused as the API refuses it (`400 Unrecognized request argument supplied: <field>`).
- **SGLang's OpenAI-compatible server**: `ChatCompletionRequest` in sglang
  `python/sglang/srt/entrypoints/openai/protocol.py`, commit
  004c82e07d876f6e4a0ad6e15325706b0f478f1a (read through the code index; SGLang cannot be
  installed here). It is a pydantic model with the default `extra="ignore"`, so unknown fields
  are ignored; beyond OpenAI's fields it declares, among others, `top_k: Optional[int]`,
  `min_p`, `min_tokens`, `repetition_penalty`, `regex`, `ebnf`, `stop_token_ids`,
  `skip_special_tokens`, `lora_path`, `separate_reasoning: bool`, `stream_reasoning: bool`,
  `chat_template_kwargs: Optional[Dict]`, `custom_params`, `rid`, `priority` (the full list is
  `harness.rehearsal.request_checks.SGLANG_EXTRAS`), and it reads `reasoning.effort` into
  `reasoning_effort`.
- **OpenRouter**: its documented request parameters (https://openrouter.ai/docs/api-reference/
  overview, "Request Schema", and https://openrouter.ai/docs/api-reference/parameters); unknown
  parameters are passed on to providers, so the check is on the documented ones' types.
"""

from __future__ import annotations

import httpx
import pytest
from openai.types.chat import completion_create_params

from harness.adapters.executor.backends import backend_from_name, build_request_body
from harness.adapters.executor.client import ExecutionClient, ExecutionHTTPError
from harness.arms import Arm
from harness.prompts import Prompt, guidance_request_body
from harness.rehearsal.request_checks import (
    OPENROUTER_DOCUMENTED,
    SGLANG_EXTRAS,
    openai_fields,
    openai_refusal,
    openrouter_refusal,
    sglang_refusal,
    undocumented_openrouter_fields,
)
from harness.request_shapes import OPENAI_CHAT_FIELDS, OPENROUTER_FIELDS, RequestShape
from tests.openai_fixture import OpenAIFixture
from tests.rehearsal_support import REPO

PROMPT = Prompt("You write guidance.", "Improve the packing.")
MESSAGES = PROMPT.messages()


@pytest.fixture(scope="module")
def strict() -> OpenAIFixture:
    with OpenAIFixture("<guidance>ok</guidance>", model="m", mode="strict") as server:
        yield server


def test_the_strict_validator_is_the_openai_packages_request_type() -> None:
    declared = completion_create_params.CompletionCreateParamsNonStreaming
    assert openai_fields() == declared.__required_keys__ | declared.__optional_keys__
    # What the harness's openai dialect keeps is a field OpenAI declares.
    assert openai_fields() >= OPENAI_CHAT_FIELDS


def test_the_strict_fixture_refuses_an_unknown_field_and_a_wrong_type(
    strict: OpenAIFixture,
) -> None:
    url = strict.v1_url + "/chat/completions"
    unknown = httpx.post(url, json={"model": "m", "messages": MESSAGES, "top_k": -1})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["message"] == "Unrecognized request argument supplied: top_k"
    wrong = httpx.post(url, json={"model": "m", "messages": MESSAGES, "temperature": "hot"})
    assert wrong.status_code == 400 and "temperature" in wrong.json()["error"]["message"]
    role = httpx.post(url, json={"model": "m", "messages": [{"role": "wizard", "content": "x"}]})
    assert role.status_code == 400
    fine = httpx.post(url, json={"model": "m", "messages": MESSAGES, "max_completion_tokens": 4})
    assert fine.status_code == 200
    assert fine.json()["choices"][0]["message"]["content"] == "<guidance>ok</guidance>"


def test_the_reference_guidance_body_is_sglangs_and_not_openais() -> None:
    body = guidance_request_body(PROMPT, model="Qwen/Qwen3-8B")
    assert RequestShape().apply(body) == body  # the default dialect sends it unchanged
    assert sglang_refusal(body) is None
    assert {"top_k", "chat_template_kwargs"} <= SGLANG_EXTRAS
    refusal = openai_refusal(body)
    assert refusal is not None and refusal.startswith("Unrecognized request argument supplied")


def test_the_openai_dialect_sends_only_what_openai_accepts() -> None:
    body = RequestShape("openai").apply(guidance_request_body(PROMPT, model="gpt-5", max_tokens=64))
    assert openai_refusal(body) is None
    assert "top_k" not in body and "chat_template_kwargs" not in body
    assert body["max_completion_tokens"] == 64
    shaped = RequestShape("openai", drop=("top_p",), extra_body={"user": "run-7"}).apply(body)
    assert "top_p" not in shaped and shaped["user"] == "run-7" and openai_refusal(shaped) is None


def test_the_openrouter_dialect_sends_openrouters_names() -> None:
    body = RequestShape("openrouter").apply(guidance_request_body(PROMPT, model="m", max_tokens=64))
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert "top_k" not in body and "chat_template_kwargs" not in body
    assert openrouter_refusal(body) is None and undocumented_openrouter_fields(body) == []


def test_the_openrouter_preset_body_passes_openrouters_documented_parameters() -> None:
    backend = backend_from_name("openrouter_glm_5_2", max_tokens=2048)
    body = build_request_body(backend, MESSAGES, max_tokens=2048, seed=11)
    assert backend.dialect == "openrouter"
    assert openrouter_refusal(body) is None
    assert undocumented_openrouter_fields(body) == []
    assert body["reasoning"] == {"effort": "high", "exclude": False}
    assert OPENROUTER_FIELDS <= OPENROUTER_DOCUMENTED
    assert openrouter_refusal({**body, "reasoning": {"effort": "extreme"}}) is not None


def test_the_gpt_oss_preset_body_passes_sglang_and_openai() -> None:
    body = build_request_body(backend_from_name("gpt_oss_120b"), MESSAGES, max_tokens=None, seed=3)
    assert body == {
        "model": "openai/gpt-oss-120b",
        "messages": MESSAGES,
        "temperature": 0.0,
        "seed": 3,
        "reasoning_effort": "high",
    }
    assert sglang_refusal(body) is None and openai_refusal(body) is None


#: The body each executor preset of the reference sends (its harness/execution.py
#: `OpenAICompatibleExecutionClient.complete`: model, messages, temperature, the preset's
#: request options; `max_tokens` only when set, and the presets set none).
REFERENCE_EXECUTOR_BODIES = {
    "gpt_oss_120b": {
        "model": "openai/gpt-oss-120b",
        "messages": MESSAGES,
        "temperature": 0.0,
        "reasoning_effort": "high",
    },
    "openrouter_glm_5_2": {
        "model": "z-ai/glm-5.2",
        "messages": MESSAGES,
        "temperature": 1.0,
        "reasoning": {"effort": "high", "exclude": False},
    },
}


@pytest.mark.parametrize("preset", sorted(REFERENCE_EXECUTOR_BODIES))
def test_a_default_runs_executor_body_is_the_references_plus_the_sampling_seed(
    preset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Differences rows 53 and 74: a default run (run seed 0) sends each preset the reference's
    body and one field more, the slot's sampling `seed`, which the reference never sends."""
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-body-check")
    seed = Arm().sampling_seed(2, 1, 3)  # what harness.run.rollout sends for step 2 g1r3
    with OpenAIFixture("<solution>x</solution>", model="m") as service:
        backend = backend_from_name(preset, base_url=service.v1_url)
        with ExecutionClient(backend) as client:
            client.complete(MESSAGES, seed=seed)
        sent = service.completion_requests()[-1].body
    assert sent == {**REFERENCE_EXECUTOR_BODIES[preset], "seed": seed}


def test_an_executor_in_the_openai_dialect_sends_max_completion_tokens(
    strict: OpenAIFixture,
) -> None:
    from dataclasses import replace

    base = backend_from_name("gpt_oss_120b", base_url=strict.v1_url)
    backend = replace(base, model="m", dialect="openai", drop=("seed",))
    with ExecutionClient(backend) as client:
        result = client.complete(MESSAGES, max_tokens=32, seed=5)
    sent = strict.completion_requests()[-1].body
    assert "max_tokens" not in sent and sent["max_completion_tokens"] == 32 and "seed" not in sent
    assert result.text == "<guidance>ok</guidance>"
    refused = replace(base, model="m", request_options={"reasoning_effort": "high", "top_k": 2})
    with ExecutionClient(refused) as client, pytest.raises(ExecutionHTTPError) as caught:
        client.complete(MESSAGES, max_tokens=32)
    assert caught.value.status == 400 and "top_k" in str(caught.value)


def _frozen_file(tmp_path, request: dict) -> object:  # type: ignore[no-untyped-def]
    import yaml

    from harness.settings.run_settings import RunSettings

    document = yaml.safe_load((REPO / "serve-frozen.yaml").read_text(encoding="utf-8"))
    document["recipe"]["config"]["guidance-ttt"]["harness"]["guidance"] = {"request": request}
    path = tmp_path / "serve-frozen.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    environ = {
        "GUIDANCE_TTT_GUIDANCE_URL": "http://127.0.0.1:9",
        "GUIDANCE_TTT_GUIDANCE_MODEL": "gpt-5",
    }
    return RunSettings.load(path, environ=environ, base_dir=tmp_path)


def test_the_guidance_request_block_is_checked_and_part_of_the_identity(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    from harness.settings.run_settings import RunSettings, RunSettingsError

    settings = _frozen_file(tmp_path, {"dialect": "openai", "drop": ["top_p"]})
    assert settings.identity()["guidance_request"] == "openai; drop top_p"  # type: ignore[attr-defined]
    with pytest.raises(RunSettingsError, match="dialect"):
        _frozen_file(tmp_path, {"dialect": "anthropic"})
    with pytest.raises(RunSettingsError, match="may not drop messages"):
        _frozen_file(tmp_path, {"drop": ["messages"]})
    trained = yaml.safe_load((REPO / "serve.yaml").read_text(encoding="utf-8"))
    trained["training"]["config"]["harness"]["guidance"] = {"request": {"dialect": "openai"}}
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(trained), encoding="utf-8")
    with pytest.raises(RunSettingsError, match="request options are for frozen mode"):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


FROZEN_KEY = "recipe.config.guidance-ttt.{}".format


def test_the_guidance_preflight_sends_the_runs_body_and_names_the_refused_field(
    strict: OpenAIFixture,
) -> None:
    from harness.preflight.services import check_guidance

    before = len(strict.completion_requests())
    refused = check_guidance(
        strict.base_url, model="m", shape=RequestShape(), settings_key=FROZEN_KEY
    )
    assert not refused.ready
    assert refused.line() == (
        "guidance: the endpoint refused the request (400): Unrecognized request argument "
        "supplied: top_k — set recipe.config.guidance-ttt.harness.guidance.request.dialect: "
        "openai (it sends no top_k)"
    )
    sent = strict.completion_requests()[before].body
    assert sent["max_completion_tokens"] <= 16 and sent["chat_template_kwargs"]  # the run's shape
    ready = check_guidance(
        strict.base_url, model="m", shape=RequestShape("openai"), settings_key=FROZEN_KEY
    )
    assert ready.ready and "5 tokens, counted in the run's cost" in ready.detail, ready
    assert ready.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    unknown = check_guidance(strict.base_url, model="gpt-9", shape=RequestShape("openai"))
    assert not unknown.ready and "not 'gpt-9'" in unknown.detail and "'m'" not in unknown.fix
    assert "GUIDANCE_TTT_GUIDANCE_MODEL" in unknown.fix


def test_the_executor_preflight_names_the_refused_field_and_the_setting(
    strict: OpenAIFixture,
) -> None:
    from dataclasses import replace

    from harness.preflight.services import check_executor

    base = backend_from_name("gpt_oss_120b", base_url=strict.v1_url)
    backend = replace(base, model="m", request_options={"reasoning_effort": "high", "top_k": 1})
    row = check_executor(backend, settings_key=FROZEN_KEY)
    assert not row.ready
    assert "refused the request (400): Unrecognized request argument supplied: top_k" in row.detail
    # top_k is an option the settings add: no dialect removes it, so the fix is to drop it.
    assert row.fix.startswith(
        "set recipe.config.guidance-ttt.harness.executor.request.drop: [top_k]"
    )
    ready = check_executor(replace(backend, request_options={}), settings_key=FROZEN_KEY)
    assert ready.ready and ready.usage == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
    }
    assert "5 tokens, counted in the run's cost" in ready.detail


def test_the_executor_request_block_shapes_the_configured_executor(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    from harness.settings.run_settings import RunSettings

    document = yaml.safe_load((REPO / "serve-frozen.yaml").read_text(encoding="utf-8"))
    harness = document["recipe"]["config"]["guidance-ttt"]["harness"]
    harness["executor"]["request"] = {"dialect": "openai", "drop": ["seed"], "extra_body": {"n": 1}}
    path = tmp_path / "serve-frozen.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    environ = {
        "GUIDANCE_TTT_GUIDANCE_URL": "http://127.0.0.1:9",
        "GUIDANCE_TTT_GUIDANCE_MODEL": "m",
    }
    backend = RunSettings.load(path, environ=environ, base_dir=tmp_path).executor()
    assert (backend.dialect, backend.drop) == ("openai", ("seed",))
    body = build_request_body(backend, MESSAGES, max_tokens=8, seed=4)
    assert "seed" not in body and body["max_completion_tokens"] == 8 and body["n"] == 1
    assert openai_refusal(body) is None


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dialect", ["", "openai"])
def test_the_preflight_of_serve_frozen_refuses_the_default_body_in_one_line(
    strict: OpenAIFixture, tmp_path, dialect: str
) -> None:  # type: ignore[no-untyped-def]
    """`python -m harness.preflight --config serve-frozen.yaml` against an endpoint that holds
    requests to OpenAI's types: the default dialect is refused in one line naming the field and
    the setting; `GUIDANCE_TTT_GUIDANCE_DIALECT=openai` makes the guidance row ready."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDANCE_TTT_")}
    env.update(
        GUIDANCE_TTT_GUIDANCE_URL=strict.base_url,
        GUIDANCE_TTT_GUIDANCE_MODEL="m",
        GUIDANCE_TTT_GUIDANCE_DIALECT=dialect,
    )
    command = [sys.executable, "-m", "harness.preflight", "--config", "serve-frozen.yaml"]
    command += ["--state-dir", str(tmp_path), "--skip-judge-score", "--judge-url"]
    command += ["http://127.0.0.1:9"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr  # the judge and executor are absent
    lines = [line for line in done.stderr.splitlines() if line.startswith("guidance:")]
    if dialect:
        assert lines == [], done.stderr
    else:
        assert lines == [
            "guidance: the endpoint refused the request (400): Unrecognized request argument "
            "supplied: top_k — set recipe.config.guidance-ttt.harness.guidance.request.dialect: "
            "openai (it sends no top_k)"
        ]
