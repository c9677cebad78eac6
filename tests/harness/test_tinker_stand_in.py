"""The Tinker stand-in (`harness.rehearsal.tinker_stand_in`) driven by the real Tinker SDK and by
Reef's own Tinker trainer client on 127.0.0.1: training steps with tttd's loss inputs, durable
saves, sampling from a saved sampler, and requests the SDK's own types refuse."""

from __future__ import annotations

import itertools
import json
import math
import tempfile

import httpx
import pytest

tinker = pytest.importorskip("tinker", reason="needs the Tinker SDK (the tinker extra, 0.33.1)")

from reef.train.tinker_backend.client import TinkerSDKClient  # noqa: E402
from reef.train.tinker_backend.config import TinkerConfig  # noqa: E402
from reef.train.tinker_backend.losses import TokenRow  # noqa: E402

from harness.rehearsal.tinker_process import running_stand_in  # noqa: E402
from harness.rehearsal.tinker_stand_in import TinkerStandIn  # noqa: E402
from harness.rehearsal.tinker_toy_model import Weights  # noqa: E402
from tttd.objective import entropic_advantages  # noqa: E402
from tttd.tinker_loss import TTTDTinkerLoss, kl_folded_advantages  # noqa: E402

MODEL = "Qwen/Qwen3-8B"
KEY = "tml-stand-in-dummy"  # Tinker's key form; a dummy that exists only in this environment
WAIT_S = 30


@pytest.fixture
def stand_in(monkeypatch):
    with TinkerStandIn() as server:
        monkeypatch.setenv("TINKER_BASE_URL", server.base_url)
        monkeypatch.setenv("TINKER_API_KEY", KEY)
        yield server


def _datum(tokens, logprobs, advantages):
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tokens[1:],
            "logprobs": logprobs,
            "advantages": advantages,
        },
    )


def test_the_stand_in_listens_on_loopback_only(stand_in):
    assert stand_in.base_url.startswith("http://127.0.0.1:")


def test_a_training_step_a_save_and_a_sample_through_the_sdk(stand_in):
    service = tinker.ServiceClient()
    try:
        trainer = service.create_lora_training_client(base_model=MODEL, rank=32, seed=0)
        tokens, sampled, advantages = [11, 12, 13, 14], [-1.0, -0.5, -2.0], [0.0, 0.7, -0.3]
        data = [_datum(tokens, sampled, advantages)]

        before = trainer.forward_backward(data, "importance_sampling").result(timeout=WAIT_S)
        base = Weights(MODEL)
        expected = [base.logprob(x, y) for x, y in itertools.pairwise(tokens)]
        assert before.loss_fn_outputs[0]["logprobs"].tolist() == pytest.approx(expected, abs=1e-6)
        loss = -math.fsum(
            math.exp(lp - q) * a for lp, q, a in zip(expected, sampled, advantages, strict=True)
        )
        assert before.metrics["loss:sum"] == pytest.approx(loss)

        trainer.optim_step(tinker.AdamParams(learning_rate=4e-5)).result(timeout=WAIT_S)
        after = trainer.forward(data, "importance_sampling").result(timeout=WAIT_S)
        trained = after.loss_fn_outputs[0]["logprobs"].tolist()
        assert trained != pytest.approx(expected, abs=1e-6), "an optimizer step changed nothing"

        state = trainer.save_state("step-1", ttl_seconds=None).result(timeout=WAIT_S)
        sampler = trainer.save_weights_for_sampler("step-1", ttl_seconds=None).result(
            timeout=WAIT_S
        )
        assert state.path.startswith("tinker://") and "/weights/step-1" in state.path
        assert sampler.path.startswith("tinker://") and "/sampler_weights/step-1" in sampler.path

        client = service.create_sampling_client(model_path=sampler.path)
        assert client.get_base_model() == MODEL
        prompt = tinker.ModelInput.from_ints(tokens[:-1])
        result = client.sample(
            prompt=prompt, num_samples=2, sampling_params=tinker.SamplingParams(max_tokens=3)
        ).result(timeout=WAIT_S)
        assert len(result.sequences) == 2
        for sequence in result.sequences:
            assert 1 <= len(sequence.tokens) <= 3
            assert len(sequence.logprobs) == len(sequence.tokens)
            assert sequence.stop_reason in ("stop", "length")
        # The sampler serves the trained weights: its prompt log-probs are the trainer's.
        scored = client.compute_logprobs(tinker.ModelInput.from_ints(tokens)).result(timeout=WAIT_S)
        assert scored[0] is None
        assert scored[1:] == pytest.approx(trained, abs=1e-6)
    finally:
        service.close("success").result(timeout=WAIT_S)
    assert stand_in.refused == []


# Reef 0.1.3 passes train_timeout_s to ServiceClient, which tinker 0.33.1 ignores with this warning
# (the futures' .result(timeout=...) still bound every call).
@pytest.mark.filterwarnings("ignore:ServiceClient ignores unsupported arguments:FutureWarning")
def test_reef_trains_tttd_steps_from_durable_checkpoints_on_the_stand_in(stand_in):
    config = TinkerConfig(
        state_dir=tempfile.gettempdir(),
        lora_rank=32,
        learning_rate=4e-5,
        kl_coef=0.1,
        train_timeout_s=WAIT_S,
    )
    client = TinkerSDKClient(MODEL, config, KEY)
    try:
        first = client.initialize()
        rewards = [0.1, 0.5, 0.9, 0.2]
        rows = [
            TokenRow((5, 6, 7, 8 + index, 9), (1, 1), (-1.0, -0.5), advantage)
            for index, advantage in enumerate(entropic_advantages(rewards))
        ]
        second, metrics = client.train(first, [rows], TTTDTinkerLoss(), [4e-5])
        third, _ = client.train(second, [rows], TTTDTinkerLoss(), [4e-5])
    finally:
        client.close()

    assert metrics["optimizer_steps"] == 1 and "loss:sum" in metrics
    paths = {first.state_path, second.state_path, third.state_path}
    assert len(paths) == 3
    for checkpoint in (first, second, third):
        durable = stand_in.service.checkpoints[checkpoint.state_path]
        assert durable.ttl_seconds is None and durable.lora.rank == 32
        assert stand_in.service.checkpoints[checkpoint.sampler_path].kind == "sampler"
    # Each step resumed its predecessor with the optimizer state.
    loads = [call.body for call in stand_in.calls if call.route == "/load_weights"]
    assert [(load.path, load.optimizer) for load in loads] == [
        (first.state_path, True),
        (second.state_path, True),
    ]
    # The first step's loss inputs are tttd's: the row advantages with the centred KL against
    # the frozen base's log-probs (which the stand-in served through compute_logprobs).
    step = next(call.body for call in stand_in.calls if call.route == "/forward_backward")
    assert step.loss_fn == "importance_sampling"
    base = Weights(MODEL)
    base_logprobs = [[base.logprob(7, 8 + index), base.logprob(8 + index, 9)] for index in range(4)]
    folded = kl_folded_advantages(
        [row.advantage for row in rows],
        [row.mask for row in rows],
        [row.logprobs for row in rows],
        base_logprobs,
        0.1,
    )
    for datum, row, expected in zip(step.data, rows, folded, strict=True):
        inputs = {name: value.to_numpy().tolist() for name, value in datum.loss_fn_inputs.items()}
        assert datum.model_input.to_ints() == list(row.tokens[:-1])
        assert inputs["target_tokens"] == list(row.tokens[1:])
        assert inputs["advantages"] == pytest.approx([0.0, 0.0, *expected], abs=1e-6)
        assert inputs["logprobs"] == pytest.approx([0.0, 0.0, -1.0, -0.5], abs=1e-6)
    assert stand_in.refused == []


def test_a_loss_the_sdk_types_refuse_comes_back_with_their_message(stand_in):
    service = tinker.ServiceClient()
    try:
        trainer = service.create_lora_training_client(base_model=MODEL, rank=8)
        data = [_datum([1, 2, 3], [-1.0, -1.0], [1.0, 1.0])]
        with pytest.raises(tinker.BadRequestError) as refused:
            trainer.forward_backward(data, "not_a_loss").result(timeout=WAIT_S)
    finally:
        service.close("errored").result(timeout=WAIT_S)
    message = str(refused.value)
    assert "loss_fn" in message
    assert "Input should be 'cross_entropy', 'importance_sampling'" in message
    assert any("not_a_loss" in line for line in stand_in.refused)


def test_a_json_body_with_a_field_the_sdk_type_lacks_is_refused(stand_in):
    answer = httpx.post(
        f"{stand_in.base_url}/api/v1/create_session",
        headers={"X-API-Key": KEY},
        json={"tags": [], "user_metadata": None, "sdk_version": "0.33.1", "colour": "red"},
        timeout=WAIT_S,
    )
    assert answer.status_code == 400
    assert "colour" in answer.json()["detail"]
    assert "Extra inputs are not permitted" in answer.json()["detail"]


def test_a_request_without_a_key_is_refused_and_a_revoked_key_stops_the_sdk(stand_in):
    answer = httpx.post(f"{stand_in.base_url}/api/v1/client/config", json={}, timeout=WAIT_S)
    assert answer.status_code == 401
    assert "X-API-Key" in answer.json()["detail"]

    stand_in.revoke_key()
    with pytest.raises(tinker.AuthenticationError, match="revoked"):
        tinker.ServiceClient().create_lora_training_client(base_model=MODEL, rank=8)


def test_a_server_error_is_retried_by_the_sdk_and_the_step_still_lands(stand_in):
    service = tinker.ServiceClient()
    try:
        trainer = service.create_lora_training_client(base_model=MODEL, rank=8)
        stand_in.fail_next("/forward_backward", 503)
        data = [_datum([1, 2, 3], [-1.0, -1.0], [1.0, 1.0])]
        result = trainer.forward_backward(data, "importance_sampling").result(timeout=WAIT_S)
    finally:
        service.close("success").result(timeout=WAIT_S)
    assert "loss:sum" in result.metrics
    assert stand_in.routes().count("/forward_backward") == 1  # the faulted try is not a call


def test_durable_checkpoints_outlive_the_stand_in_that_saved_them(tmp_path, monkeypatch):
    store = tmp_path / "checkpoints.json"
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    with TinkerStandIn(store=store) as first:
        monkeypatch.setenv("TINKER_BASE_URL", first.base_url)
        service = tinker.ServiceClient()
        try:
            trainer = service.create_lora_training_client(base_model=MODEL, rank=8)
            data = [_datum([1, 2, 3], [-1.0, -1.0], [1.0, 1.0])]
            trainer.forward_backward(data, "importance_sampling").result(timeout=WAIT_S)
            trainer.optim_step(tinker.AdamParams(learning_rate=1e-4)).result(timeout=WAIT_S)
            state = trainer.save_state("kept", ttl_seconds=None).result(timeout=WAIT_S).path
            sampler = trainer.save_weights_for_sampler("kept", ttl_seconds=None)
            sampler = sampler.result(timeout=WAIT_S).path
        finally:
            service.close("success").result(timeout=WAIT_S)
    with TinkerStandIn(store=store) as second:  # a new process of the service, same storage
        monkeypatch.setenv("TINKER_BASE_URL", second.base_url)
        service = tinker.ServiceClient()
        try:
            service.create_training_client_from_state_with_optimizer(state)
            client = service.create_sampling_client(model_path=sampler)
            scored = client.compute_logprobs(tinker.ModelInput.from_ints([1, 2, 3]))
            scored = scored.result(timeout=WAIT_S)
        finally:
            service.close("success").result(timeout=WAIT_S)
    kept = second.service.checkpoints[state]
    assert kept.optimizer_steps == 1 and kept.weights.version != "base"
    assert scored[1:] == pytest.approx(
        [kept.weights.logprob(1, 2), kept.weights.logprob(2, 3)], abs=1e-6
    )
    assert second.routes().count("/load_weights") == 1 and second.refused == []


@pytest.mark.slow  # the process drains for a few seconds after SIGTERM
def test_the_stand_in_process_serves_the_sdk_and_keeps_its_checkpoints(tmp_path, monkeypatch):
    store = tmp_path / "stand-in" / "checkpoints.json"
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    with running_stand_in(store, scripted_guidance=False) as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        monkeypatch.setenv("TINKER_BASE_URL", base_url)
        service = tinker.ServiceClient()
        try:
            trainer = service.create_lora_training_client(base_model=MODEL, rank=8)
            saved = trainer.save_state("kept", ttl_seconds=None).result(timeout=WAIT_S).path
        finally:
            service.close("success").result(timeout=WAIT_S)
    assert saved in json.loads(store.read_text())
    assert (tmp_path / "stand-in" / "tinker-stand-in.log").is_file()
