"""A stand-in for Tinker's service at the SDK boundary: an HTTP server on 127.0.0.1.

It stands for the Tinker API the ``tinker`` SDK (0.33.1, pinned by reef-infra's ``[tinker]``
extra) talks to, so that Reef's Tinker backend — the trainer (``reef.train.tinker_backend``) and
the sampler runtime (``reef.inference.tinker``) — can run here without the network or an
account. Point the SDK at it with ``TINKER_BASE_URL`` (``base_url``) and any key of Tinker's
form in ``TINKER_API_KEY`` (``tml-…``, from the environment only: the stand-in checks that a key
is sent and never records it).

What it answers — every route Reef's Tinker path reaches through the SDK: the client config,
sessions (create, heartbeat, finish), LoRA training models (``create_model``,
``forward_backward``, ``optim_step``, ``save_weights`` = ``save_state``,
``save_weights_for_sampler``, ``load_weights`` and ``weights_info`` =
``create_training_client_from_state_with_optimizer``), sampling sessions (create, ``GET
samplers/<id>``, ``asample`` = ``sample`` and ``compute_logprobs``), futures
(``retrieve_future``), telemetry, health and the server capabilities. Every request body is
validated with the SDK's own pydantic request type (``forward_backward``'s protobuf through
``harness.rehearsal.tinker_wire``); a body it refuses is answered 400 with the SDK's validation
message. The three bodies the SDK writes as plain dicts (``weights_info``, ``sessions/<id>/finish``,
``cancel_future``) have no SDK type and are taken with exactly the keys the SDK writes. Every
answer is built from the SDK's response type and read back by the SDK with strict validation.

What it does not do: no model, no tokenizer, no learning. The numbers are the deterministic toy
arithmetic of ``harness.rehearsal.tinker_toy_model`` (log-probs from a hash, the loss computed
from the sent inputs, a new weights version per optimizer step); only ``cross_entropy`` and
``importance_sampling`` are computed; stop sequences, top-k/top-p, images, JWT exchange,
billing, quotas, TTL expiry and queueing are not modelled (every future is complete when
first polled). Sessions and models live in memory; the durable checkpoints too, unless a
``store`` file keeps them for the next stand-in (as Tinker keeps them across a client's crash).
Scripted faults (:meth:`TinkerStandIn.fail_next`) and a revoked key (:meth:`revoke_key`) let a
test watch the SDK's and Reef's handling of Tinker's errors.

    with TinkerStandIn() as tinker:
        env = {"TINKER_BASE_URL": tinker.base_url, "TINKER_API_KEY": "tml-stand-in"}
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pydantic
from tinker import types

from harness.rehearsal.loopback_server import LoopbackServer
from harness.rehearsal.tinker_service import Completion, Failed, Refused, ToyTinker
from harness.rehearsal.tinker_wire import (
    PROTOBUF,
    forward_backward_output_bytes,
    forward_backward_request,
    sample_response_bytes,
)
from harness.settings.tinker import TINKER_MODELS

API = "/api/v1"
#: Every byte a request may carry (a forward_backward of a long step is a few MB).
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Call:
    """A request the stand-in accepted: its method, route (without ``/api/v1``) and the body as
    the SDK type it validated into (a dict for the untyped bodies, None for a GET)."""

    method: str
    route: str
    body: Any


class TinkerStandIn(LoopbackServer):
    """The server, as a context manager (``start``/``stop`` also work).

    ``models`` are the base models it serves (Tinker's list by default); ``completion`` gives
    the tokens a sampler returns for a prompt it does not score (default, and for
    ``compute_logprobs``: a few toy tokens from a hash);
    ``context_length`` bounds prompt + ``max_tokens``; ``client_config`` is what
    ``/client/config`` answers (the SDK's defaults by default); ``store`` is the JSON file that
    keeps the durable checkpoints across stand-ins (default: memory only).
    """

    def __init__(
        self,
        *,
        models: Sequence[str] = TINKER_MODELS,
        completion: Completion | None = None,
        context_length: int = 32768,
        client_config: types.ClientConfigResponse | None = None,
        store: Path | None = None,
    ) -> None:
        self.service = ToyTinker(
            models, context_length=context_length, completion=completion, store=store
        )
        self.client_config = client_config or types.ClientConfigResponse()
        #: Accepted requests and refusal messages, in arrival order.
        self.calls: list[Call] = []
        self.refused: list[str] = []
        self._faults: dict[str, deque[int]] = {}
        self._futures: dict[str, tuple[str, Any]] = {}
        self._revoked = False
        #: When the last request arrived (``time.monotonic()``), for a caller that drains.
        self.last_request_at = time.monotonic()
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> TinkerStandIn:
        """Bind 127.0.0.1 on a free port and serve on a daemon thread."""
        if self._server is None:
            owner = self

            class Handler(_Handler):
                stand_in = owner

            self._serve(ThreadingHTTPServer(("127.0.0.1", 0), Handler), "tinker-stand-in", 0.05)
        return self

    @property
    def base_url(self) -> str:
        """What ``TINKER_BASE_URL`` takes: ``http://127.0.0.1:PORT`` (the server must run)."""
        if self._server is None:
            raise RuntimeError("the Tinker stand-in is not running; call start() first")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- scripting -------------------------------------------------------------

    def fail_next(self, route: str, status: int, times: int = 1) -> None:
        """Answer the next ``times`` requests to ``route`` (e.g. ``"/forward_backward"``) with
        ``status`` (429, 500, 503, ...) before looking at them."""
        with self._lock:
            self._faults.setdefault(route, deque()).extend([status] * times)

    def revoke_key(self) -> None:
        """From now on answer every request 401, as Tinker does for a revoked key."""
        with self._lock:
            self._revoked = True

    def routes(self) -> list[str]:
        """The routes of the accepted requests, in order (a test's view of the traffic)."""
        with self._lock:
            return [call.route for call in self.calls]

    # -- dispatch (called by the handler) -------------------------------------

    def answer(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        """``(status, content type, body)`` for one request."""
        route = path.split("?", 1)[0].removeprefix(API)
        self.last_request_at = time.monotonic()
        with self._lock:
            if not headers.get("x-api-key"):
                return _error(401, "send your Tinker key in the X-API-Key header")
            if self._revoked:
                return _error(401, "Invalid API key: this key has been revoked")
            faults = self._faults.get(route)
            if faults:
                return _error(faults.popleft(), f"scripted fault on {route}")
            try:
                return self._dispatch(method, route, headers, body)
            except (pydantic.ValidationError, ValueError) as error:
                self.refused.append(f"{route}: {error}")
                return _error(400, str(error))
            except Refused as refused:
                self.refused.append(f"{route}: {refused}")
                return _error(refused.status, str(refused))

    def _dispatch(
        self, method: str, route: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        if method == "GET":
            return self._get(route)
        if route == "/forward_backward":
            model_id, _, forward_only, request = forward_backward_request(
                body, headers.get("content-encoding")
            )
            self.calls.append(Call(method, route, request))
            return self._future(
                lambda: self.service.forward_backward(model_id, forward_only, request),
                model_id,
            )
        if route.startswith("/sessions/") and route.endswith("/finish"):
            fields = _plain(body, ("reason", "detail"))
            status = fields["reason"]["type"] if isinstance(fields["reason"], dict) else None
            if status not in ("success", "errored", "interrupted"):
                raise ValueError(f"finish reason {fields['reason']!r}; send {{'type': 'success'}}")
            self.calls.append(Call(method, route, fields))
            self.service.finish_session(route.split("/")[2], status)
            return 200, "application/json", b"null"
        if route in _PLAIN:
            fields = _plain(body, _PLAIN[route])
            self.calls.append(Call(method, route, fields))
            if route == "/weights_info":
                return _json(self.service.weights_info(fields["tinker_path"]))
            return 200, "application/json", b"null"  # /cancel_future: every future is done
        if route not in _TYPED:
            return _error(404, f"the Tinker stand-in does not answer POST {API}{route}")
        request = _TYPED[route].model_validate_json(body or b"{}")
        self.calls.append(Call(method, route, request))
        return self._post(route, request)

    def _get(self, route: str) -> tuple[int, str, bytes]:
        self.calls.append(Call("GET", route, None))
        if route.startswith("/samplers/"):
            return _json(self.service.sampler(route.removeprefix("/samplers/")))
        if route == "/healthz":
            return _json(types.HealthResponse(status="ok"))
        if route == "/get_server_capabilities":
            return _json(
                types.GetServerCapabilitiesResponse(
                    supported_models=[
                        {"model_name": name, "trainable": True} for name in self.service.models
                    ]
                )
            )
        return _error(404, f"the Tinker stand-in does not answer GET {API}{route}")

    def _post(self, route: str, request: Any) -> tuple[int, str, bytes]:
        service = self.service
        if route == "/client/config":
            return _json(self.client_config)
        if route == "/client/dynamic_config":
            return _json(types.ClientDynamicConfigResponse())
        if route == "/telemetry":
            return _json(types.TelemetryResponse(status="accepted"))
        if route == "/create_session":
            return _json(service.create_session(request))
        if route == "/session_heartbeat":
            return _json(service.heartbeat(request))
        if route == "/create_sampling_session":
            return _json(service.create_sampling_session(request))
        if route == "/retrieve_future":
            return self._retrieve(request.request_id)
        if route == "/create_model":
            service._session(request.session_id)
            return self._future(lambda: service.create_model(request))
        if route == "/optim_step":
            service.model(request.model_id)
            return self._future(lambda: service.optim_step(request), request.model_id)
        if route in ("/save_weights", "/save_weights_for_sampler"):
            service.model(request.model_id)
            return self._future(lambda: _saved(route, service.save(request)), request.model_id)
        if route == "/load_weights":
            return self._future(lambda: service.load_weights(request), request.model_id)
        # /asample: the result is computed now, so the promise can carry its sequence ids.
        response = service.sample(request)
        ids = [sequence.sequence_id for sequence in response.sequences]
        return self._future(lambda: response, sample_sequence_ids=ids)

    def _future(
        self,
        compute: Callable[[], Any],
        model_id: str | None = None,
        sample_sequence_ids: list[str] | None = None,
    ) -> tuple[int, str, bytes]:
        """Run ``compute`` now and keep its result for ``retrieve_future``; answer the promise."""
        request_id = f"future-{uuid.uuid4().hex}"
        try:
            result = compute()
        except Failed as failed:
            self.refused.append(str(failed))
            result = types.RequestFailedResponse(error=str(failed), category="user")
        self._futures[request_id] = _encoded(result)
        return _json(
            types.UntypedAPIFuture(
                request_id=request_id, model_id=model_id, sample_sequence_ids=sample_sequence_ids
            )
        )

    def _retrieve(self, request_id: str) -> tuple[int, str, bytes]:
        if request_id not in self._futures:
            raise Refused(404, f"future {request_id!r} does not exist")
        content_type, payload = self._futures[request_id]
        return 200, content_type, payload


#: The JSON routes and the SDK request type each body must validate as.
_TYPED: dict[str, type[pydantic.BaseModel]] = {
    "/client/config": types.ClientConfigRequest,
    "/client/dynamic_config": types.ClientConfigRequest,
    "/telemetry": types.TelemetrySendRequest,
    "/create_session": types.CreateSessionRequest,
    "/session_heartbeat": types.SessionHeartbeatRequest,
    "/create_sampling_session": types.CreateSamplingSessionRequest,
    "/retrieve_future": types.FutureRetrieveRequest,
    "/create_model": types.CreateModelRequest,
    "/optim_step": types.OptimStepRequest,
    "/save_weights": types.SaveWeightsRequest,
    "/save_weights_for_sampler": types.SaveWeightsForSamplerRequest,
    "/load_weights": types.LoadWeightsRequest,
    "/asample": types.SampleRequest,
}
#: The bodies the SDK writes as plain dicts, by the keys it writes (no SDK type exists).
_PLAIN: dict[str, tuple[str, ...]] = {
    "/weights_info": ("tinker_path",),
    "/cancel_future": ("request_id",),
}


def _plain(body: bytes, keys: tuple[str, ...]) -> dict[str, Any]:
    fields = json.loads(body or b"{}")
    if not isinstance(fields, dict) or set(fields) - set(keys) or keys[0] not in fields:
        raise ValueError(f"the body must be an object with keys {list(keys)}, got {fields!r}")
    return {key: fields.get(key) for key in keys}


def _saved(route: str, saved: tuple[str | None, str | None]) -> pydantic.BaseModel:
    path, sampler_id = saved
    if route == "/save_weights":
        return types.SaveWeightsResponse(path=path)
    return types.SaveWeightsForSamplerResponseInternal(path=path, sampling_session_id=sampler_id)


def _encoded(result: Any) -> tuple[str, bytes]:
    if isinstance(result, types.ForwardBackwardOutput):
        return PROTOBUF, forward_backward_output_bytes(result)
    if isinstance(result, types.SampleResponse):
        return PROTOBUF, sample_response_bytes(result)
    return "application/json", result.model_dump_json().encode()


def _json(model: pydantic.BaseModel) -> tuple[int, str, bytes]:
    return 200, "application/json", model.model_dump_json().encode()


def _error(status: int, message: str) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps({"detail": message}).encode()


class _Handler(BaseHTTPRequestHandler):
    stand_in: TinkerStandIn

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: the tests read TinkerStandIn.calls

    def do_GET(self) -> None:
        self._reply(self.stand_in.answer("GET", self.path, self._headers(), b""))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._reply(_error(413, f"body of {length} bytes; the limit is {MAX_BODY_BYTES}"))
            return
        body = self.rfile.read(length)
        self._reply(self.stand_in.answer("POST", self.path, self._headers(), body))

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _reply(self, answer: tuple[int, str, bytes]) -> None:
        status, content_type, payload = answer
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
