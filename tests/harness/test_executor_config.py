"""The executor named by endpoint and model in the settings (docs/executors.md): a generic
OpenAI-compatible endpoint works end to end against a loopback server that checks the model id
and the bearer header, the two presets keep the reference's request bodies, and the preflight
checks the configured executor (the key variable is set, `/models` lists the model)."""

from __future__ import annotations

import pytest

from harness.adapters.executor.backends import build_request_body, configured_backend
from harness.adapters.executor.client import ExecutionClient
from harness.preflight.services import check_executor
from harness.rehearsal.openai_server import OpenAIFixture, RecordedRequest, Reply
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings, RunSettingsError

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write it"}]
KEY_VAR = "MY_EXECUTOR_KEY"
KEY = "sk-test-4f1e2d"


def generic_env(url: str, model: str = "acme/coder-7b", **extra: str) -> dict[str, str]:
    return {
        "GUIDANCE_TTT_EXECUTOR": "openai_compatible",
        "GUIDANCE_TTT_EXECUTOR_URL": url,
        "GUIDANCE_TTT_EXECUTOR_MODEL": model,
        "GUIDANCE_TTT_EXECUTOR_KEY_ENV": KEY_VAR,
        **extra,
    }


def strict_server(model: str):
    """A reply that refuses any request not for `model` or without the bearer key."""

    def reply(request: RecordedRequest) -> Reply:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return Reply(status=401, error="missing or wrong bearer key")
        if request.body.get("model") != model:
            return Reply(status=404, error=f"no model {request.body.get('model')!r}")
        return Reply(content="<solution>```cpp\nint main(){}\n```</solution>")

    return reply


def test_an_endpoint_named_by_url_model_and_key_variable_is_called_as_configured(
    monkeypatch, tmp_path
):
    with OpenAIFixture(strict_server("acme/coder-7b"), model="acme/coder-7b") as server:
        env = generic_env(server.v1_url, GUIDANCE_TTT_EXECUTOR_TEMPERATURE="0.3")
        settings = RunSettings.load(DEFAULT_SERVE_YAML, environ=env, base_dir=tmp_path)
        backend = settings.executor()
        monkeypatch.setenv(KEY_VAR, KEY)
        with ExecutionClient(backend) as client:
            result = client.complete(MESSAGES)
        assert "int main" in result.text
        (request,) = server.completion_requests()
        assert request.body["model"] == "acme/coder-7b"
        assert request.body["temperature"] == 0.3
        assert request.headers["authorization"] == f"Bearer {KEY}"
        # The preflight's executor row checks the same configured executor.
        assert check_executor(backend).ready
    # What is persisted names the variable, never the key.
    assert backend.safe_dict()["api_key_env"] == KEY_VAR
    assert KEY not in repr(backend.safe_dict())


def test_the_preflight_names_an_unset_key_variable_and_an_unlisted_model(monkeypatch, tmp_path):
    with OpenAIFixture("ok", model="served-model") as server:
        env = generic_env(server.v1_url, model="other-model")
        backend = RunSettings.load(DEFAULT_SERVE_YAML, environ=env, base_dir=tmp_path).executor()
        monkeypatch.delenv(KEY_VAR, raising=False)
        unset = check_executor(backend)
        monkeypatch.setenv(KEY_VAR, KEY)
        unlisted = check_executor(backend)
        assert server.completion_requests() == []  # neither got as far as a chat request
    assert not unset.ready and f"export {KEY_VAR}=" in unset.fix
    assert not unlisted.ready and "served-model" in unlisted.detail
    assert "'other-model'" in unlisted.detail and "executor.model" in unlisted.fix


def test_a_generic_endpoint_without_url_or_model_is_refused_naming_the_keys(tmp_path):
    env = {"GUIDANCE_TTT_EXECUTOR": "openai_compatible", "GUIDANCE_TTT_EXECUTOR_MODEL": "m"}
    with pytest.raises(RunSettingsError, match=r"harness\.executor: .*executor\.base_url"):
        RunSettings.load(DEFAULT_SERVE_YAML, environ=env, base_dir=tmp_path)


def test_a_pasted_key_in_api_key_env_is_refused_without_echoing_it(tmp_path):
    env = {"GUIDANCE_TTT_EXECUTOR_KEY_ENV": "sk-live-abc123"}
    with pytest.raises(RunSettingsError) as refused:
        RunSettings.load(DEFAULT_SERVE_YAML, environ=env, base_dir=tmp_path)
    assert "executor.api_key_env" in str(refused.value)
    assert "sk-live-abc123" not in str(refused.value)


def test_the_presets_send_the_reference_request_bodies(tmp_path):
    settings = RunSettings.load(DEFAULT_SERVE_YAML, environ={}, base_dir=tmp_path)
    gpt_oss = build_request_body(settings.executor(), MESSAGES, max_tokens=None)
    assert gpt_oss == {
        "model": "openai/gpt-oss-120b",
        "messages": MESSAGES,
        "temperature": 0.0,
        "reasoning_effort": "high",
    }
    glm_settings = RunSettings.load(
        DEFAULT_SERVE_YAML,
        environ={"GUIDANCE_TTT_EXECUTOR": "openrouter_glm_5_2"},
        base_dir=tmp_path,
    )
    glm = glm_settings.executor()
    assert build_request_body(glm, MESSAGES, max_tokens=None) == {
        "model": "z-ai/glm-5.2",
        "messages": MESSAGES,
        "temperature": 1.0,
        "reasoning": {"effort": "high", "exclude": False},
    }
    assert (glm.base_url, glm.api_key_env, glm.max_retries) == (
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        6,
    )
    assert (settings.executor().base_url, settings.executor().max_retries) == (
        "http://127.0.0.1:8000/v1",
        0,
    )


def test_a_preset_takes_settings_key_by_key_and_extra_body_fields():
    backend = configured_backend(
        "gpt_oss_120b",
        base_url="http://10.0.0.5:8000/v1/",
        reasoning_effort="low",
        extra_body={"top_p": 0.9},
        max_tokens=4096,
        concurrency=4,
    )
    body = build_request_body(backend, MESSAGES, max_tokens=backend.max_tokens)
    assert body["reasoning_effort"] == "low" and body["top_p"] == 0.9
    assert body["max_tokens"] == 4096
    assert (backend.base_url, backend.concurrency) == ("http://10.0.0.5:8000/v1", 4)
    with pytest.raises(ValueError, match="OPENROUTER_API_KEY only"):
        configured_backend("openrouter_glm_5_2", api_key_env="OTHER_KEY")


def test_frozen_mode_hints_name_serve_frozen_keys_and_ask_for_less_disk(tmp_path):
    from harness.preflight.machine import check_disk
    from harness.settings.run_settings import SETTINGS_BASE

    env = {"GUIDANCE_TTT_GUIDANCE_URL": "http://127.0.0.1:9", "GUIDANCE_TTT_GUIDANCE_MODEL": "m"}
    frozen = RunSettings.load(SETTINGS_BASE / "serve-frozen.yaml", environ=env)
    trained = RunSettings.load(DEFAULT_SERVE_YAML, environ={})
    assert (frozen.min_free_gb, trained.min_free_gb) == (5.0, 100.0)
    disk = check_disk(tmp_path, 1e9, frozen.settings_key)
    assert "set recipe.config.guidance-ttt.state_dir" in disk.fix
    assert "recipe.config.guidance-ttt.harness.min_free_gb" in disk.fix
    with OpenAIFixture("ok", model="served") as server:
        backend = configured_backend("openai_compatible", base_url=server.v1_url, model="other")
        row = check_executor(backend, settings_key=frozen.settings_key)
    assert "recipe.config.guidance-ttt.harness.executor.model" in row.fix
    copy = tmp_path / "serve.yaml"
    text = DEFAULT_SERVE_YAML.read_text()
    copy.write_text(
        text.replace(
            "      max_rollout_workers: 8", "      min_free_gb: 12\n      max_rollout_workers: 8"
        )
    )
    assert RunSettings.load(copy, environ={}).min_free_gb == 12.0  # the file's key wins
