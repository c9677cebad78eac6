"""Start N ranks of one function, one process each, as ``torchrun`` would on one host.

``run_ranks(function, world_size, device, ...)`` spawns ``world_size`` processes
(``torch.multiprocessing``, start method ``spawn``, so CUDA works in them), each of which joins
one ``torch.distributed`` process group over ``tcp://127.0.0.1:<free port>`` — NCCL when
``device`` is ``cuda`` (rank *r* on GPU *r*), gloo on ``cpu`` — calls
``function(rank, world_size, device, **keywords)`` and writes what it returns (JSON) to a file
the parent reads back. The whole launch is bounded: past ``timeout_s`` every rank still running
is stopped and ``RankFailure`` names the ones that had not finished; a rank that raises stops
the others and ``RankFailure`` names every rank that raised and its error, the first one
first (the others usually fail because their peer left the group).

The environment the ranks start with keeps NVLink multicast off (``MULTICAST_OFF``): NCCL's
NVLS, torch's symmetric-memory multicast and NVSHMEM's NVLS.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

#: Set in every rank's environment (NVLink multicast is not to be used on the lent hosts).
MULTICAST_OFF: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

__all__ = ["MULTICAST_OFF", "RankFailure", "free_port", "probe", "run_ranks"]


class RankFailure(RuntimeError):
    """A rank raised, died or did not finish in time; the message names which and why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` while the ranks start (children copy it), then restored."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_ranks(
    function: Callable[..., Any],
    world_size: int,
    device: str,
    *,
    timeout_s: float = 600.0,
    keywords: Mapping[str, Any] | None = None,
) -> list[Any]:
    """Run ``function`` on ``world_size`` ranks; returns each rank's JSON result, rank order.

    ``function`` must be importable by name (a module-level function): spawned processes
    import it. Raises ``RankFailure`` when a rank raises, dies or runs past ``timeout_s``.
    """
    import torch
    import torch.multiprocessing as mp

    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and (visible := torch.cuda.device_count()) < world_size:
        raise ValueError(
            f"{world_size} ranks need {world_size} GPUs, {visible} visible: use a host with "
            f"{world_size} GPUs or device 'cpu' (gloo)"
        )
    init_method = f"tcp://127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="gpu-check-ranks-") as scratch:
        arguments = (function, world_size, device, init_method, scratch, dict(keywords or {}))
        arguments += (max(30.0, timeout_s / 2),)
        with _environment(MULTICAST_OFF):
            context = mp.start_processes(
                _rank_entry, args=arguments, nprocs=world_size, join=False, start_method="spawn"
            )
        _join(context, timeout_s, Path(scratch))
        return [_read_result(Path(scratch), rank) for rank in range(world_size)]


def _join(context: Any, timeout_s: float, scratch: Path) -> None:
    from torch.multiprocessing import ProcessExitedException, ProcessRaisedException

    deadline = time.monotonic() + timeout_s
    try:
        while not context.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                running = [rank for rank, p in enumerate(context.processes) if p.is_alive()]
                _stop(context, grace_s=0.0)
                raise RankFailure(
                    f"ranks {running} still running after {timeout_s:.0f} s: stopped them "
                    "(a collective waiting on a rank that never joined, or too small a timeout)"
                )
    except (ProcessRaisedException, ProcessExitedException) as error:
        # The other ranks usually fail next (their peer left the group): let them say so.
        _stop(context, grace_s=10.0)
        raise RankFailure(_failures(scratch) or f"rank {error.error_index}: {error}") from None


def _failures(scratch: Path) -> str:
    """Every rank's recorded error, the first written first (most likely the cause)."""
    errors = sorted(scratch.glob("rank-*.error"), key=lambda path: path.stat().st_mtime_ns)
    return "; ".join(
        f"{path.name.removesuffix('.error').replace('-', ' ')} raised {path.read_text()}"
        for path in errors
    )


def _stop(context: Any, grace_s: float) -> None:
    """Stop the ranks this launch started that are still running (after ``grace_s``)."""
    deadline = time.monotonic() + grace_s
    for process in context.processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in context.processes:
        if process.is_alive():
            process.terminate()
    for process in context.processes:
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


def _read_result(scratch: Path, rank: int) -> Any:
    path = scratch / f"rank-{rank}.json"
    if not path.exists():
        raise RankFailure(f"rank {rank} finished without writing its result")
    return json.loads(path.read_text())


def _rank_entry(
    rank: int,
    function: Callable[..., Any],
    world_size: int,
    device: str,
    init_method: str,
    scratch: str,
    keywords: dict[str, Any],
    collective_timeout_s: float,
) -> None:
    """One rank: join the process group, run ``function``, write its result, leave the group."""
    import torch
    import torch.distributed as dist

    from tttd.gpu_check import use_upstream_sources

    use_upstream_sources()
    options: dict[str, Any] = {}
    if device == "cuda":
        torch.cuda.set_device(rank)
        backend, options["device_id"] = "nccl", torch.device("cuda", rank)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
        backend = "gloo"
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=collective_timeout_s),
        **options,
    )
    try:
        result = function(rank, world_size, device, **keywords)
        dist.barrier()
    except BaseException as error:
        text = " ".join(f"{type(error).__name__}: {error}".split())
        (Path(scratch) / f"rank-{rank}.error").write_text(text[:400])
        raise
    finally:
        dist.destroy_process_group()
    temporary = Path(scratch) / f"rank-{rank}.json.part"
    temporary.write_text(json.dumps(result))
    temporary.rename(Path(scratch) / f"rank-{rank}.json")


def probe(rank: int, world_size: int, device: str) -> dict[str, Any]:
    """What one rank sees of the group: backend, world, the sum of all ranks, its environment."""
    import torch
    import torch.distributed as dist

    values = torch.tensor([float(rank)], device=device)
    dist.all_reduce(values)
    return {
        "rank": rank,
        "world_size": dist.get_world_size(),
        "backend": str(dist.get_backend()),
        "rank_sum": float(values.item()),
        "environment": {name: os.environ.get(name) for name in MULTICAST_OFF},
        "device": torch.cuda.get_device_name(rank) if device == "cuda" else "cpu",
    }
