"""What the Tinker stand-in does for each call, on the SDK's request and response types.

:class:`ToyTinker` holds the state a Tinker account would: sessions, training models (a
:class:`~harness.rehearsal.tinker_toy_model.Weights` and its LoRA settings each), sampling
sessions, and durable checkpoints by ``tinker://`` path. Each method takes the request model the
SDK sent (already validated by the HTTP layer, ``harness.rehearsal.tinker_stand_in``) and returns
the SDK's response type. :class:`Refused` is a request the service refuses (answered 4xx with its
message); :class:`Failed` is a queued request whose future fails (answered as Tinker's
``RequestFailedResponse``).

Checkpoint paths are Tinker's: ``tinker://<model_id>/weights/<name>`` for ``save_state`` (weights
with their optimizer state) and ``tinker://<model_id>/sampler_weights/<name>`` for
``save_weights_for_sampler``, with model ids ``<session_id>:train:<n>`` as the SDK derives them.
Checkpoints never expire here (``ttl_seconds`` is recorded, not enforced). With ``store`` they
outlive the process, as Tinker's do a client's crash: every save rewrites that JSON file
atomically, and a new service reads it back (sessions and training models are not kept).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tinker import types
from tinker.types._pydantic_types.forward_backward_input import ForwardBackwardInput

from harness.rehearsal.tinker_toy_model import (
    Weights,
    loss_terms,
    prompt_logprobs,
    toy_completion,
)
from harness.storage.atomic import atomic_write_json

#: Produces the tokens a sampler returns for a prompt (the stand-in's script) to a request that
#: does not score its prompt; None, and for scoring requests (compute_logprobs): toy tokens.
Completion = Callable[[Sequence[int]], Sequence[int]]


class Refused(Exception):
    """A request the service refuses at once: ``status`` and a message naming the value."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Failed(Exception):
    """A queued request whose result is Tinker's ``RequestFailedResponse`` (a user error)."""


@dataclass
class TrainingModel:
    """A LoRA training client's model: its weights, its LoRA settings and pending losses."""

    weights: Weights
    lora: types.LoraConfig
    optimizer_steps: int = 0
    pending_losses: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Checkpoint:
    """A durable snapshot: the weights, the LoRA settings, and the optimizer's step count."""

    weights: Weights
    lora: types.LoraConfig
    optimizer_steps: int
    kind: str  # "training" or "sampler"
    ttl_seconds: int | None


class ToyTinker:
    """The service's state and its answers; not thread-safe (the HTTP layer holds a lock)."""

    def __init__(
        self,
        models: Sequence[str],
        *,
        context_length: int = 32768,
        completion: Completion | None = None,
        store: Path | None = None,
    ) -> None:
        self.models = tuple(models)
        self.store = store
        self.context_length = context_length
        self.completion = completion
        self.sessions: dict[str, str | None] = {}  # session id -> finish reason
        self.training: dict[str, TrainingModel] = {}
        self.samplers: dict[str, tuple[Weights, str | None]] = {}  # id -> (weights, path)
        self.checkpoints: dict[str, Checkpoint] = _stored(store)

    # -- sessions --------------------------------------------------------------

    def create_session(self, request: types.CreateSessionRequest) -> types.CreateSessionResponse:
        session_id = f"stand-in-{uuid.uuid4().hex[:12]}"
        self.sessions[session_id] = None
        return types.CreateSessionResponse(session_id=session_id)

    def heartbeat(self, request: types.SessionHeartbeatRequest) -> types.SessionHeartbeatResponse:
        self._session(request.session_id)
        return types.SessionHeartbeatResponse()

    def finish_session(self, session_id: str, reason: str) -> None:
        self._session(session_id)
        if self.sessions[session_id] is None:  # first reason wins, as Tinker's finish does
            self.sessions[session_id] = reason

    def _session(self, session_id: str) -> None:
        if session_id not in self.sessions:
            raise Refused(404, f"session {session_id!r} does not exist; create a session first")
        if self.sessions[session_id] is not None:
            raise Refused(410, f"session {session_id!r} has finished")

    def _served(self, base_model: str) -> None:
        if base_model not in self.models:
            raise Refused(
                400, f"base_model {base_model!r} is not served; choose one of {list(self.models)}"
            )

    # -- training --------------------------------------------------------------

    def create_model(self, request: types.CreateModelRequest) -> types.CreateModelResponse:
        self._session(request.session_id)
        self._served(request.base_model)
        if request.lora_config is None:
            raise Refused(400, "lora_config is required: Tinker trains LoRA adapters only")
        model_id = f"{request.session_id}:train:{request.model_seq_id}"
        self.training[model_id] = TrainingModel(Weights(request.base_model), request.lora_config)
        return types.CreateModelResponse(model_id=model_id)

    def model(self, model_id: str) -> TrainingModel:
        """The training model ``model_id`` names; refused when there is none."""
        if model_id not in self.training:
            raise Refused(404, f"model_id {model_id!r} does not exist; create a model first")
        return self.training[model_id]

    def forward_backward(
        self, model_id: str, forward_only: bool, request: ForwardBackwardInput
    ) -> types.ForwardBackwardOutput:
        model = self.model(model_id)
        outputs, total = [], 0.0
        for index, datum in enumerate(request.data):
            inputs = {
                name: value.to_numpy().reshape(-1).tolist()
                for name, value in datum.loss_fn_inputs.items()
            }
            try:
                logprobs, losses = loss_terms(
                    model.weights, request.loss_fn, datum.model_input.to_ints(), inputs
                )
            except ValueError as error:
                raise Refused(400, f"data[{index}]: {error}") from None
            total += math.fsum(losses)
            outputs.append(
                {
                    "logprobs": types.TensorData.from_numpy(np.asarray(logprobs, dtype=np.float32)),
                    "elementwise_loss": types.TensorData.from_numpy(
                        np.asarray(losses, dtype=np.float32)
                    ),
                }
            )
        if not forward_only:
            model.pending_losses.append(total)
        return types.ForwardBackwardOutput(
            loss_fn_output_type="ArrayRecord", loss_fn_outputs=outputs, metrics={"loss:sum": total}
        )

    def optim_step(self, request: types.OptimStepRequest) -> types.OptimStepResponse:
        model = self.model(request.model_id)
        rate = request.optim_params.learning_rate
        model.weights = model.weights.stepped(rate, model.pending_losses)
        model.pending_losses = []
        model.optimizer_steps += 1
        return types.OptimStepResponse(metrics={"learning_rate:mean": rate})

    def save(
        self, request: types.SaveWeightsRequest | types.SaveWeightsForSamplerRequest
    ) -> tuple[str | None, str | None]:
        """``(path, sampling_session_id)`` of a save: a named checkpoint, or (a sampler save
        without a name) an ephemeral sampling session on the current weights."""
        model = self.model(request.model_id)
        sampler = isinstance(request, types.SaveWeightsForSamplerRequest)
        if request.path is None:
            if not sampler or request.sampling_session_seq_id is None:
                raise Failed("save_state needs a name (path)")
            session = request.model_id.split(":train:")[0]
            sampler_id = f"{session}:sample:{request.sampling_session_seq_id}"
            self.samplers[sampler_id] = (model.weights, None)
            return None, sampler_id
        folder = "sampler_weights" if sampler else "weights"
        path = f"tinker://{request.model_id}/{folder}/{request.path}"
        if path in self.checkpoints and not getattr(request, "overwrite", False):
            raise Failed(f"checkpoint {path} exists; choose another name or set overwrite")
        self.checkpoints[path] = Checkpoint(
            model.weights,
            model.lora,
            model.optimizer_steps,
            "sampler" if sampler else "training",
            request.ttl_seconds,
        )
        if self.store is not None:
            atomic_write_json(
                self.store, {key: _plain(value) for key, value in self.checkpoints.items()}
            )
        return path, None

    def checkpoint(self, path: str, kind: str) -> Checkpoint:
        """The ``kind`` checkpoint at ``path``; refused when there is none."""
        found = self.checkpoints.get(path)
        if found is None or found.kind != kind:
            raise Refused(404, f"no {kind} checkpoint at {path!r}")
        return found

    def weights_info(self, path: str) -> types.WeightsInfoResponse:
        found = self.checkpoint(path, "training")
        return types.WeightsInfoResponse(
            base_model=found.weights.base_model,
            is_lora=True,
            lora_rank=found.lora.rank,
            train_unembed=found.lora.train_unembed,
            train_mlp=found.lora.train_mlp,
            train_attn=found.lora.train_attn,
        )

    def load_weights(self, request: types.LoadWeightsRequest) -> types.LoadWeightsResponse:
        if request.model_id is None:
            raise Failed("load_weights needs the model_id of a created model")
        model = self.model(request.model_id)
        try:
            found = self.checkpoint(request.path, "training")
        except Refused as refused:
            raise Failed(str(refused)) from None
        model.weights = found.weights
        model.optimizer_steps = found.optimizer_steps if request.optimizer else 0
        return types.LoadWeightsResponse(path=request.path, model_id=request.model_id)

    # -- sampling --------------------------------------------------------------

    def create_sampling_session(
        self, request: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        self._session(request.session_id)
        if request.model_path is not None:
            weights = self.checkpoint(request.model_path, "sampler").weights
        elif request.base_model is not None:
            self._served(request.base_model)
            weights = Weights(request.base_model)
        else:
            raise Refused(400, "create_sampling_session needs model_path or base_model")
        sampler_id = f"{request.session_id}:sample:{request.sampling_session_seq_id}"
        self.samplers[sampler_id] = (weights, request.model_path)
        return types.CreateSamplingSessionResponse(sampling_session_id=sampler_id)

    def sampler(self, sampler_id: str) -> types.GetSamplerResponse:
        weights, path = self._sampler(sampler_id)
        return types.GetSamplerResponse(
            sampler_id=sampler_id, base_model=weights.base_model, model_path=path
        )

    def _sampler(self, sampler_id: str | None) -> tuple[Weights, str | None]:
        if sampler_id not in self.samplers:
            raise Refused(404, f"sampling session {sampler_id!r} does not exist")
        return self.samplers[sampler_id]

    def sample(self, request: types.SampleRequest) -> types.SampleResponse:
        weights, _ = self._sampler(request.sampling_session_id)
        prompt = request.prompt.to_ints()
        if not prompt:
            raise Refused(400, "prompt is empty; send at least one token")
        limit = request.sampling_params.max_tokens or 1
        if len(prompt) + limit > self.context_length:
            raise Refused(
                400,
                f"prompt of {len(prompt)} tokens plus max_tokens {limit} exceeds the model's "
                f"context window of {self.context_length} tokens",
            )
        sequences = []
        for index in range(request.num_samples):
            seed = (
                None
                if request.sampling_params.seed is None
                else request.sampling_params.seed + index
            )
            # A scoring request (compute_logprobs asks for the prompt's log-probs) takes no
            # scripted answer: the script is for what a caller reads.
            scripted = self.completion is not None and not request.prompt_logprobs
            tokens = list(
                self.completion(prompt) if scripted else toy_completion(weights, prompt, seed)
            )
            stop = "length" if len(tokens) > limit else "stop"
            tokens = tokens[:limit]
            context = [*prompt, *tokens]
            logprobs = [
                weights.logprob(x, y)
                for x, y in zip(context[len(prompt) - 1 :], tokens, strict=False)
            ]
            sequences.append(
                types.SampledSequence(
                    stop_reason=stop,
                    sequence_id=uuid.uuid4().hex,
                    _tokens_list=tokens,
                    _logprobs_list=logprobs,
                )
            )
        scored = None
        if request.prompt_logprobs:
            scored = prompt_logprobs(weights, prompt)
            if request.prompt_logprobs_last_n is not None:
                keep = len(scored) - request.prompt_logprobs_last_n
                scored = [None] * keep + scored[keep:]
        return types.SampleResponse(sequences=sequences, _prompt_logprobs_list=scored)


def _plain(checkpoint: Checkpoint) -> dict[str, object]:
    return {**asdict(checkpoint), "lora": checkpoint.lora.model_dump()}


def _stored(store: Path | None) -> dict[str, Checkpoint]:
    """The checkpoints ``store`` keeps (none when there is no file yet)."""
    if store is None or not store.is_file():
        return {}
    found = {}
    for path, value in json.loads(store.read_text(encoding="utf-8")).items():
        found[path] = Checkpoint(
            Weights(**value["weights"]),
            types.LoraConfig.model_validate(value["lora"]),
            value["optimizer_steps"],
            value["kind"],
            value["ttl_seconds"],
        )
    return found
