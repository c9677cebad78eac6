"""A call's data as one block of bytes: the structure as JSON, every tensor at an offset.

The trusted process flattens the generator's data — tuples, lists, dicts with string keys,
tensors, and plain numbers, strings, booleans or None — into a layout (JSON) and the list of its
tensors, each placed at a 256-byte-aligned offset of one pool. It writes the tensors' bytes into
the pool before every call; the worker rebuilds the same structure with tensors that are views
of the pool, new objects on every call.
"""

from __future__ import annotations

from typing import Any

import torch

ALIGN = 256
DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float32",
        "float16",
        "bfloat16",
        "float64",
        "int64",
        "int32",
        "int8",
        "uint8",
        "bool",
    )
}


def dtype_name(dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"tensors of dtype {dtype} cannot be shared with the candidate")
    return name


def flatten(data: Any) -> tuple[dict[str, Any], list[torch.Tensor], int]:
    """(layout, tensors in layout order, pool bytes needed). Plain recursion, no closure: a
    nested function that calls itself is a reference cycle, and the tensors it holds would
    then wait for the garbage collector (on the GPU, a call's inputs of up to gigabytes)."""
    tensors: list[torch.Tensor] = []
    offsets = [0]
    layout = _walk(data, tensors, offsets)
    return layout, tensors, max(offsets[0], ALIGN)


def _walk(item: Any, tensors: list[torch.Tensor], offset: list[int]) -> dict[str, Any]:
    if isinstance(item, torch.Tensor):
        nbytes = item.numel() * item.element_size()
        entry = {
            "tensor": len(tensors),
            "offset": offset[0],
            "dtype": dtype_name(item.dtype),
            "shape": list(item.shape),
        }
        tensors.append(item)
        offset[0] += -(-max(nbytes, 1) // ALIGN) * ALIGN
        return entry
    if isinstance(item, tuple):
        return {"tuple": [_walk(part, tensors, offset) for part in item]}
    if isinstance(item, list):
        return {"list": [_walk(part, tensors, offset) for part in item]}
    if isinstance(item, dict):
        if not all(isinstance(key, str) for key in item):
            raise ValueError("only dicts with string keys can be shared with the candidate")
        return {"dict": [[key, _walk(value, tensors, offset)] for key, value in item.items()]}
    if item is None or isinstance(item, bool | int | float | str):
        return {"value": item}
    raise ValueError(f"a {type(item).__name__} cannot be shared with the candidate")


def entries(layout: dict[str, Any]) -> list[dict[str, Any]]:
    """The tensor entries of a layout, in order."""
    found: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        if "tensor" in node:
            found.append(node)
        for key in ("tuple", "list"):
            for part in node.get(key, ()):
                walk(part)
        for _, value in node.get("dict", ()):
            walk(value)

    walk(layout)
    return found


def pack(pool: torch.Tensor, layout: dict[str, Any], tensors: list[torch.Tensor]) -> None:
    """Write every tensor's bytes at its offset of `pool` (a flat uint8 tensor)."""
    for entry, tensor in zip(entries(layout), tensors, strict=True):
        view = _view(pool, entry)
        view.copy_(tensor.reshape(view.shape))


def rebuild(layout: dict[str, Any], pool: torch.Tensor) -> Any:
    """The data structure again, its tensors fresh views of `pool`."""
    if "tensor" in layout:
        return _view(pool, layout)
    if "tuple" in layout:
        return tuple(rebuild(part, pool) for part in layout["tuple"])
    if "list" in layout:
        return [rebuild(part, pool) for part in layout["list"]]
    if "dict" in layout:
        return {key: rebuild(value, pool) for key, value in layout["dict"]}
    return layout["value"]


def largest(data: Any) -> torch.Tensor | None:
    """The tensor of `data` (a structure as `flatten` takes it) with the most bytes, if any."""
    if isinstance(data, torch.Tensor):
        return data
    parts = (
        data.values() if isinstance(data, dict) else data if isinstance(data, tuple | list) else ()
    )
    found = [tensor for tensor in map(largest, parts) if tensor is not None]
    return max(found, key=lambda tensor: tensor.numel() * tensor.element_size(), default=None)


def _view(pool: torch.Tensor, entry: dict[str, Any]) -> torch.Tensor:
    dtype = DTYPES[entry["dtype"]]
    shape = [int(size) for size in entry["shape"]]
    count = 1
    for size in shape:
        count *= size
    size = torch.empty((), dtype=dtype).element_size()
    start = int(entry["offset"])
    return pool[start : start + count * size].view(dtype).view(shape)
