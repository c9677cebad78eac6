"""Sharing GPU memory between the trusted process and the candidate's: CUDA IPC, or its stand-in.

`CudaTransport` uses the CUDA driver's legacy IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle,
through ctypes on libcuda): the trusted process allocates each case's input pool with cuMemAlloc
— an allocation of its own, so nothing else of the trusted process shares it — and exports it;
the worker maps it once per case. The worker exports the allocation that holds the candidate's
output (found with cuMemGetAddressRange) and the trusted process maps it to copy the output out.
An allocation the worker did not make (a view of the judge's input) cannot be exported. Legacy
IPC needs both processes in one PID namespace (the driver names the exporter by its PID), which
is why the candidate's sandbox keeps the host's PID namespace and runs under a uid of its own
(judges/README.md).

`CpuTransport` stands for it where there is no GPU (CPU tests of the whole protocol): CPU
tensors in memory files shared by descriptor passing; the worker copies the candidate's output
into an arena the trusted process reads. It tests everything but the GPU itself.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any

import torch

if __package__:
    from .control import OutputDescriptor
else:  # staged into the sandbox beside the worker, imported as a top-level module
    from control import OutputDescriptor  # type: ignore[import-not-found,no-redef]

_ARENA = b"cpu-arena".ljust(64, b"\0")


class TransportError(RuntimeError):
    """Memory could not be shared; the message says why (the candidate's output, usually)."""


class _Handle(ctypes.Structure):
    # unsigned bytes: a c_char array would be read back only up to its first zero byte
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


class CudaDriver:
    """The few driver API calls IPC needs, each raising TransportError with its error name."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        ptr = ctypes.c_uint64
        size = ctypes.c_size_t
        self._sig("cuMemAlloc_v2", ctypes.POINTER(ptr), size)
        self._sig("cuMemFree_v2", ptr)
        self._sig("cuMemGetAddressRange_v2", ctypes.POINTER(ptr), ctypes.POINTER(size), ptr)
        self._sig("cuIpcGetMemHandle", ctypes.POINTER(_Handle), ptr)
        self._sig("cuIpcOpenMemHandle_v2", ctypes.POINTER(ptr), _Handle, ctypes.c_uint)
        self._sig("cuIpcCloseMemHandle", ptr)
        self._sig("cuGetErrorName", ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
        self._sig("cuPointerGetAttribute", ctypes.c_void_p, ctypes.c_int, ptr)

    def _sig(self, name: str, *argtypes: Any) -> None:
        function = getattr(self.lib, name)
        function.argtypes = list(argtypes)
        function.restype = ctypes.c_int

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(code, ctypes.byref(text))
            name = text.value.decode() if text.value else f"error {code}"
            raise TransportError(f"{what} failed: {name}")

    def alloc(self, nbytes: int) -> int:
        pointer = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(pointer), nbytes), "cuMemAlloc")
        return pointer.value

    def free(self, pointer: int) -> None:
        self._check(self.lib.cuMemFree_v2(pointer), "cuMemFree")

    def address_range(self, pointer: int) -> tuple[int, int]:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        code = self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), pointer)
        self._check(code, "cuMemGetAddressRange")
        return base.value, size.value

    def buffer_id(self, pointer: int) -> int:
        """The driver's process-wide unique id of the allocation holding `pointer`."""
        value = ctypes.c_uint64()
        code = self.lib.cuPointerGetAttribute(ctypes.byref(value), 7, pointer)  # BUFFER_ID
        self._check(code, "cuPointerGetAttribute")
        return value.value

    def export(self, base: int) -> bytes:
        handle = _Handle()
        self._check(self.lib.cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
        return bytes(handle.reserved)

    def open(self, handle: bytes) -> int:
        pointer = ctypes.c_uint64()
        raw = _Handle()
        ctypes.memmove(ctypes.byref(raw), handle, 64)
        code = self.lib.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), raw, 1)
        self._check(code, "cuIpcOpenMemHandle")
        return pointer.value

    def close(self, pointer: int) -> None:
        self._check(self.lib.cuIpcCloseMemHandle(pointer), "cuIpcCloseMemHandle")


class _CudaBytes:
    """A device range as `__cuda_array_interface__`, so torch can view it without copying."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 3,
            "strides": None,
        }


def device_bytes(pointer: int, nbytes: int) -> torch.Tensor:
    """A flat uint8 CUDA tensor over `nbytes` at `pointer` (not owning the memory)."""
    return torch.as_tensor(_CudaBytes(pointer, nbytes), device="cuda")


def strided_view(flat: torch.Tensor, output: OutputDescriptor) -> torch.Tensor:
    """The output tensor inside a mapped allocation, after checking that the descriptor's
    geometry stays inside it (the descriptor comes from the candidate's process)."""
    dtype = getattr(torch, output.dtype)
    size = torch.empty((), dtype=dtype).element_size()
    if output.offset < 0 or output.offset % size or any(s < 0 for s in output.strides):
        raise TransportError(f"output descriptor out of range: offset {output.offset}")
    if len(output.shape) != len(output.strides) or any(n < 0 for n in output.shape):
        raise TransportError("output descriptor has mismatched shape and strides")
    extent = 1 + sum((n - 1) * s for n, s in zip(output.shape, output.strides, strict=True))
    if 0 in output.shape:
        extent = 0
    end = output.offset + extent * size
    if end > flat.numel():
        raise TransportError(
            f"the output reaches byte {end} of an allocation of {flat.numel()} bytes"
        )
    count = max(extent, 1)
    window = flat[output.offset : output.offset + count * size]
    if window.numel() < count * size:
        raise TransportError("output descriptor out of range")
    return torch.as_strided(window.view(dtype), output.shape, output.strides)


class CudaTransport:
    """CUDA IPC between the trusted process and the worker (see the module docstring)."""

    device = "cuda"

    def __init__(self) -> None:
        torch.cuda.init()
        torch.empty(1, device="cuda")  # makes the primary context current on this thread
        self.driver = CudaDriver()
        self._opened: dict[bytes, tuple[int, torch.Tensor]] = {}
        self._exported: dict[tuple[int, int], bytes] = {}  # (base, buffer id) -> handle

    @staticmethod
    def synchronize() -> None:
        torch.cuda.synchronize()

    # trusted side
    def make_pool(self, nbytes: int) -> tuple[torch.Tensor, dict[str, Any], list[int], Any]:
        """A pool of our own: (flat tensor, descriptor for the worker, fds to send, token)."""
        pointer = self.driver.alloc(nbytes)
        handle = self.driver.export(pointer)
        return device_bytes(pointer, nbytes), {"handle": handle.hex(), "bytes": nbytes}, [], pointer

    def free_pool(self, token: Any) -> None:
        self.synchronize()
        self.driver.free(token)

    def open_output(self, output: OutputDescriptor) -> torch.Tensor:
        """The candidate's output, mapped (cached by handle: the same allocation is mapped
        once; at most a few are kept)."""
        if output.handle not in self._opened:
            pointer = self.driver.open(output.handle)
            _, size = self.driver.address_range(pointer)
            if len(self._opened) >= 8:
                self.close_outputs()
            self._opened[output.handle] = (pointer, device_bytes(pointer, size))
        return strided_view(self._opened[output.handle][1], output)

    def close_outputs(self) -> None:
        for pointer, _ in self._opened.values():
            self.driver.close(pointer)
        self._opened.clear()

    # worker side
    def open_pool(self, descriptor: dict[str, Any], fds: list[int]) -> tuple[torch.Tensor, Any]:
        pointer = self.driver.open(bytes.fromhex(descriptor["handle"]))
        return device_bytes(pointer, int(descriptor["bytes"])), pointer

    def close_pool(self, token: Any) -> None:
        self.synchronize()
        self.driver.close(token)

    def export_output(self, output: Any, pool: torch.Tensor) -> OutputDescriptor:
        """The descriptor of the candidate's output; TransportError when it is not a CUDA
        tensor of the candidate's own memory."""
        tensor = _checked_tensor(output, "cuda")
        pointer = tensor.data_ptr()
        start = pool.data_ptr()
        if start <= pointer < start + pool.numel():
            raise TransportError("the output lies in the judge's input memory (a view of an input)")
        base, size = self.driver.address_range(pointer)
        # Exporting takes the driver a while; an allocation keeps its handle, and the buffer id
        # tells a new allocation at the same address from the old one.
        key = (base, self.driver.buffer_id(base))
        if key not in self._exported:
            if len(self._exported) >= 64:
                self._exported.clear()
            self._exported[key] = self.driver.export(base)
        handle = self._exported[key]
        return OutputDescriptor(
            handle,
            pointer - base,
            size,
            _dtype(tensor),
            tuple(tensor.shape),
            tuple(tensor.stride()),
        )


class CpuTransport:
    """The CPU stand-in for `CudaTransport` (module docstring): memory files, no GPU."""

    device = "cpu"

    def __init__(self) -> None:
        self._maps: list[mmap.mmap] = []
        self._arena: torch.Tensor | None = None

    @staticmethod
    def synchronize() -> None:
        return None

    def _shared(self, nbytes: int, fd: int | None = None) -> tuple[torch.Tensor, int]:
        if fd is None:
            fd = os.memfd_create("gpu-judge-pool", 0)
            os.ftruncate(fd, nbytes)
        block = mmap.mmap(fd, nbytes)
        self._maps.append(block)
        return torch.frombuffer(block, dtype=torch.uint8), fd

    def make_pool(self, nbytes: int) -> tuple[torch.Tensor, dict[str, Any], list[int], Any]:
        pool, pool_fd = self._shared(nbytes)
        arena, arena_fd = self._shared(nbytes)
        self._arena = arena
        return pool, {"bytes": nbytes}, [pool_fd, arena_fd], (pool_fd, arena_fd)

    def free_pool(self, token: Any) -> None:
        for fd in token:
            os.close(fd)

    def open_output(self, output: OutputDescriptor) -> torch.Tensor:
        if output.handle != _ARENA or self._arena is None:
            raise TransportError("the output descriptor names no memory of this case")
        return strided_view(self._arena, output)

    def close_outputs(self) -> None:
        return None

    def open_pool(self, descriptor: dict[str, Any], fds: list[int]) -> tuple[torch.Tensor, Any]:
        nbytes = int(descriptor["bytes"])
        pool, _ = self._shared(nbytes, fds[0])
        self._arena, _ = self._shared(nbytes, fds[1])
        return pool, tuple(fds)

    def close_pool(self, token: Any) -> None:
        for fd in token:
            os.close(fd)

    def export_output(self, output: Any, pool: torch.Tensor) -> OutputDescriptor:
        tensor = _checked_tensor(output, "cpu")
        if tensor.untyped_storage().data_ptr() == pool.untyped_storage().data_ptr():
            raise TransportError("the output lies in the judge's input memory (a view of an input)")
        assert self._arena is not None
        flat = tensor.contiguous().reshape(-1).view(torch.uint8)
        if flat.numel() > self._arena.numel():
            raise TransportError("the output is larger than this stand-in's arena")
        self._arena[: flat.numel()].copy_(flat)
        strides, running = [], 1
        for size in reversed(tensor.shape):
            strides.insert(0, running)
            running *= size
        return OutputDescriptor(
            _ARENA, 0, self._arena.numel(), _dtype(tensor), tuple(tensor.shape), tuple(strides)
        )


def _checked_tensor(output: Any, device: str) -> torch.Tensor:
    if not isinstance(output, torch.Tensor):
        raise TransportError(f"custom_kernel returned a {type(output).__name__}, not a tensor")
    if output.device.type != device:
        raise TransportError(f"the output is on {output.device}, not on the GPU it was given")
    return output


def _dtype(tensor: torch.Tensor) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in ("float32", "float16", "bfloat16", "float64"):
        raise TransportError(f"the output's dtype {tensor.dtype} is not a floating dtype")
    return name


def make(backend: str) -> CudaTransport | CpuTransport:
    """The transport of a backend name: `cuda`, or `cpu` (the stand-in)."""
    if backend == "cuda":
        return CudaTransport()
    if backend == "cpu":
        return CpuTransport()
    raise ValueError(f"unknown backend {backend!r} (cuda or cpu)")
