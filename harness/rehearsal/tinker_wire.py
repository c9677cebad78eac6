"""Tinker's protobuf wire format, read and written by the SDK's own types (for the stand-in).

The Tinker SDK (``tinker`` 0.33.1, the version reef-infra's ``[tinker]`` extra pins) sends one
request as protobuf, ``POST /api/v1/forward_backward`` (``tinker.proto.request_conv``), and asks
for two results as protobuf (``Accept: application/x-protobuf``): ``ForwardBackwardOutput`` and
``SampleResponse`` (``tinker.proto.response_conv``). It only encodes the first and only decodes
the other two, so the stand-in needs the other direction of each:

- :func:`forward_backward_request` parses the request with the SDK's message class
  (``tinker_public_pb2``), rebuilds its fields as plain values, and validates them with the SDK's
  own pydantic request models (``tinker.types._pydantic_types.ForwardBackwardInput``, ``Datum``,
  ``ModelInput``, ``TensorData``: the pydantic twins of the dataclasses the client builds). A
  value the SDK's models refuse raises their ``ValidationError``.
- :func:`forward_backward_output_bytes` and :func:`sample_response_bytes` write the SDK's response
  dataclasses as the messages ``response_conv`` reads back; a result the SDK could not decode is
  a bug here, and the tests decode every one with the SDK.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import zstandard
from tinker.proto import tinker_public_pb2 as public_pb
from tinker.types import ForwardBackwardOutput, SampleResponse, TensorData
from tinker.types._pydantic_types.forward_backward_input import ForwardBackwardInput

#: The content type of a protobuf body, as the SDK writes and accepts it.
PROTOBUF = "application/x-protobuf"

_DTYPES = {public_pb.DTYPE_FLOAT32: "float32", public_pb.DTYPE_INT64: "int64"}
_NUMPY = {"float32": np.float32, "int64": np.int64}
_PROTO_DTYPE = {"float32": public_pb.DTYPE_FLOAT32, "int64": public_pb.DTYPE_INT64}
_STOP = {"stop": public_pb.STOP_REASON_STOP, "length": public_pb.STOP_REASON_LENGTH}


def forward_backward_request(
    body: bytes, content_encoding: str | None = None
) -> tuple[str, int, bool, ForwardBackwardInput]:
    """``(model_id, seq_id, forward_only, input)`` of a ``/forward_backward`` body.

    ``content_encoding`` ``zstd`` is undone first, as Tinker's server does when the client
    config sets ``proto_compress_fwdbwd``. Raises ``ValueError`` for bytes that are not the
    message (``google.protobuf.message.DecodeError`` is one) and pydantic's ``ValidationError``
    for a message the SDK's request models refuse.
    """
    if content_encoding == "zstd":
        body = zstandard.ZstdDecompressor().decompress(body)
    message = public_pb.ForwardBackwardRequest()
    message.ParseFromString(body)
    config: dict[str, float | str] = {key: value for key, value in message.loss_fn_config.items()}
    for key, value in message.loss_fn_config_v2.items():
        config[key] = value.text if value.WhichOneof("value") == "text" else value.number
    fields = {
        "data": [_datum(datum) for datum in message.data],
        "loss_fn": message.loss_fn,
        "loss_fn_config": config or None,
    }
    return (
        message.model_id,
        message.seq_id,
        message.forward_only,
        ForwardBackwardInput.model_validate(fields),
    )


def _datum(message: Any) -> dict[str, Any]:
    if message.model_input_spans or message.loss_fn_input_spans:
        raise ValueError("the Tinker stand-in does not model provenance spans; send none")
    chunks = []
    for chunk in message.model_input:
        kind = chunk.WhichOneof("chunk")
        if kind != "encoded_text":
            # Image and audio chunks carry no tokens the stand-in could score.
            raise ValueError(f"the Tinker stand-in takes token chunks only, got a {kind} chunk")
        tokens = np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32)
        chunks.append({"type": "encoded_text", "tokens": tokens.tolist()})
    return {
        "model_input": {"chunks": chunks},
        "loss_fn_inputs": {
            name: _tensor(tensor) for name, tensor in message.loss_fn_inputs.items()
        },
    }


def _tensor(message: Any) -> dict[str, Any]:
    dtype = _DTYPES.get(message.dtype)
    if dtype is None:
        raise ValueError(f"tensor dtype {message.dtype} is not on Tinker's public wire")
    if message.HasField("sparse_csr"):
        csr = message.sparse_csr
        return {
            "data": np.frombuffer(csr.values, dtype=_NUMPY[dtype]).tolist(),
            "dtype": dtype,
            "shape": list(message.shape),
            "sparse_crow_indices": np.frombuffer(csr.crow_indices, dtype=np.int64).tolist(),
            "sparse_col_indices": np.frombuffer(csr.col_indices, dtype=np.int64).tolist(),
        }
    values = np.frombuffer(message.dense, dtype=_NUMPY[dtype]).tolist()
    return {"data": values, "dtype": dtype, "shape": list(message.shape) or None}


def forward_backward_output_bytes(output: ForwardBackwardOutput) -> bytes:
    """``output`` as the protobuf ``ForwardBackwardOutput`` the SDK decodes: one ``ArrayRecord``
    whose fields are the per-datum tensors, concatenated, with their byte offsets."""
    message = public_pb.ForwardBackwardOutput(loss_fn_output_type=output.loss_fn_output_type)
    for name, value in output.metrics.items():
        message.metrics[name] = value
    if output.loss_fn_outputs:
        record = message.loss_fn_outputs.add(num_datums=len(output.loss_fn_outputs))
        for name in output.loss_fn_outputs[0]:
            record.fields[name].CopyFrom(
                _batched([datum[name] for datum in output.loss_fn_outputs])
            )
    return message.SerializeToString()


def _batched(tensors: Sequence[TensorData]) -> Any:
    dtype = tensors[0].dtype
    arrays = [np.asarray(tensor.tolist(), dtype=_NUMPY[dtype]).reshape(-1) for tensor in tensors]
    offsets = np.cumsum([0] + [array.nbytes for array in arrays], dtype=np.int64)
    return public_pb.BatchedTensor(
        data=b"".join(array.tobytes() for array in arrays),
        offsets=offsets.tobytes(),
        dtype=_PROTO_DTYPE[dtype],
        trailing_shape=[],
    )


def sample_response_bytes(response: SampleResponse) -> bytes:
    """``response`` as the protobuf ``SampleResponse`` the SDK decodes (tokens as int32,
    log-probs as float32, NaN where a prompt position has none)."""
    message = public_pb.SampleResponse()
    for sequence in response.sequences:
        item = message.sequences.add(
            stop_reason=_STOP[sequence.stop_reason],
            tokens=np.asarray(sequence.tokens, dtype=np.int32).tobytes(),
        )
        if sequence.logprobs is not None:
            item.logprobs = np.asarray(sequence.logprobs, dtype=np.float32).tobytes()
    if response.prompt_logprobs is not None:
        values = [np.nan if value is None else value for value in response.prompt_logprobs]
        message.prompt_logprobs = np.asarray(values, dtype=np.float32).tobytes()
    return message.SerializeToString()
