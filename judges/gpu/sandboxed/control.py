"""The control block: one page of host memory shared by the trusted process and the worker.

The timed path avoids system calls: the trusted process starts the clock and writes GO; the
worker, spinning on GO, calls the candidate, synchronises the device and writes DONE; the
trusted process, spinning on DONE, stops the clock. Then the worker exports the output's memory,
writes its descriptor and STATUS, then DESCRIBED. Both sides are x86-64 processes, whose stores
are seen in program order, so a reader that sees DESCRIBED also sees what was written before.

Slots (little-endian int64 at 8-byte offsets): ARMED (the worker is spinning for the call the
trusted side armed), GO, DONE, STATUS and DESCRIBED (of that call), and three durations the
worker measured itself (the candidate's call, the device synchronisation, the export: reported
for diagnosis only, never trusted). The output descriptor is a fixed struct at OUTPUT_OFFSET: an
opaque 64-byte memory handle, the byte offset of the tensor's first element from the
allocation's start, the allocation's size, a dtype code, the rank, then up to 8 sizes and 8
strides (in elements)."""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass

PAGE = 4096
ARMED, GO, DONE, STATUS, DESCRIBED = 1, 2, 3, 4, 5
CALL_NS, SYNC_NS, EXPORT_NS = 6, 7, 8
OK, FAILED = 0, 1
OUTPUT_OFFSET = 256
MAX_RANK = 8
_SLOT = struct.Struct("<q")
_OUTPUT = struct.Struct(f"<64sqqqq{MAX_RANK}q{MAX_RANK}q")
#: The output dtypes the judge accepts (it compares after conversion to float32).
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3}
DTYPE_NAMES = {code: name for name, code in DTYPE_CODES.items()}


@dataclass(frozen=True)
class OutputDescriptor:
    """Where a call's output lies: which allocation, where in it, and its dtype and geometry."""

    handle: bytes
    offset: int
    allocation_bytes: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]


class Control:
    """The mapped control block (`create` on the trusted side, `attach` in the worker)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, PAGE)

    @classmethod
    def create(cls) -> Control:
        """A fresh zeroed block in an anonymous memory file (its fd is inherited by the
        worker's sandbox)."""
        fd = os.memfd_create("gpu-judge-control", 0)
        os.ftruncate(fd, PAGE)
        return cls(fd)

    def get(self, slot: int) -> int:
        return _SLOT.unpack_from(self._map, 8 * slot)[0]

    def set(self, slot: int, value: int) -> None:
        _SLOT.pack_into(self._map, 8 * slot, value)

    def wait(self, slot: int, value: int, timeout: float, alive: object = None) -> bool:
        """Spin until `slot` holds `value`; False after `timeout` seconds or once `alive()`
        (checked every few thousand spins) returns False."""
        deadline = time.monotonic() + timeout
        unpack, block, where = _SLOT.unpack_from, self._map, 8 * slot
        spins = 0
        while unpack(block, where)[0] != value:
            spins += 1
            if spins & 0xFFF == 0:
                if time.monotonic() > deadline:
                    return False
                if alive is not None and not alive():  # type: ignore[operator]
                    return unpack(block, where)[0] == value
        return True

    def write_output(self, output: OutputDescriptor) -> None:
        rank = len(output.shape)
        if rank > MAX_RANK:
            raise ValueError(f"the output has rank {rank}; at most {MAX_RANK} is supported")
        pad = (0,) * (MAX_RANK - rank)
        _OUTPUT.pack_into(
            self._map,
            OUTPUT_OFFSET,
            output.handle,
            output.offset,
            output.allocation_bytes,
            DTYPE_CODES[output.dtype],
            rank,
            *output.shape,
            *pad,
            *output.strides,
            *pad,
        )

    def read_output(self) -> OutputDescriptor:
        """The descriptor the worker wrote; ValueError when it is not a well-formed one (the
        block is writable by the candidate's process, so nothing in it is trusted)."""
        fields = _OUTPUT.unpack_from(self._map, OUTPUT_OFFSET)
        handle, offset, size, code, rank = fields[:5]
        if code not in DTYPE_NAMES or not 0 <= rank <= MAX_RANK:
            raise ValueError(f"malformed output descriptor (dtype code {code}, rank {rank})")
        shape = tuple(fields[5 : 5 + rank])
        strides = tuple(fields[5 + MAX_RANK : 5 + MAX_RANK + rank])
        return OutputDescriptor(handle, offset, size, DTYPE_NAMES[code], shape, strides)

    def close(self) -> None:
        self._map.close()
