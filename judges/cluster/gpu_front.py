"""The front's side of GPU problems on Ray: find and probe the GPU nodes, submit one task per trial.

`GpuNodes.check` lists the alive nodes that offer the placement's resource (and label), runs
`judges.cluster.gpu.probe_gpu` pinned to each (taking one of its GPUs, as a trial would) and
keeps those that can judge; the others are refused by host, address and id with the reason,
in the log and in `/health` (`ray.gpuRefused`). `judge` submits `judge_gpu` with the placement's
resource and a label selector listing the accepted GPU nodes, so a GPU trial never lands on a
refused node or a CPU-only one. A lost worker or node is retried by Ray (`retries`), then it is
a JudgeFailure (the service's `judge` error).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from judges.cluster import gpu as node_gpu
from judges.cluster.node import NodeSettings
from judges.cluster.probes import read_probe
from judges.gpu.package import GpuProblem
from judges.sandbox.runner import SandboxUnavailable
from judges.verdicts.judging import JudgeFailure

log = logging.getLogger("judges.cluster")

NODE_ID_LABEL = "ray.io/node-id"
PROBE_TIMEOUT_S = 300.0  # a GPU probe imports torch and makes a CUDA context on the node

_probe = ray.remote(node_gpu.probe_gpu)
_trial = ray.remote(node_gpu.judge_gpu)


class GpuNodes:
    """The cluster's GPU nodes for GPU problems (module docstring)."""

    def __init__(
        self,
        placement: node_gpu.GpuPlacement,
        options: node_gpu.GpuNodeOptions,
        settings: NodeSettings,
        retries: int,
        record_type: Any,
    ) -> None:
        self.placement, self.options, self.settings = placement, options, settings
        self.retries = retries
        self.record_type = record_type  # judges.cluster.front.NodeRecord
        self.nodes: dict[str, Any] = {}
        self.bundles: dict[str, tuple[node_gpu.GpuBundle, Any]] = {}

    def publish(self, problems: list[GpuProblem]) -> None:
        for problem in problems:
            bundle = node_gpu.bundle_gpu_problem(problem)
            self.bundles[problem.id] = (bundle, ray.put(bundle))

    def accepted(self) -> list[Any]:
        return [record for record in self.nodes.values() if not record.refused]

    def check(self) -> None:
        """Probe every GPU node not probed yet; SandboxUnavailable when none can judge."""
        fresh = [
            info
            for info in ray.nodes()
            if info.get("Alive")
            and info["NodeID"] not in self.nodes
            and self.placement.gpus(info) > 0
        ]
        probes = {}
        for info in fresh:
            record = self.record_type(
                info["NodeID"],
                info.get("NodeManagerAddress", "?"),
                info.get("NodeManagerHostname", "?"),
                self.placement.gpus(info),
            )
            options = {
                **self.placement.task_options(),
                "max_retries": 0,
                "label_selector": {NODE_ID_LABEL: record.id},
            }
            ref = _probe.options(**options).remote(self.settings, self.options, record.capacity)
            probes[ref] = record
        if probes:
            done, pending = ray.wait(list(probes), num_returns=len(probes), timeout=PROBE_TIMEOUT_S)
            for ref in pending:
                ray.cancel(ref, force=True)
                probes[ref].refused = f"did not answer a GPU probe within {PROBE_TIMEOUT_S:g} s"
            for ref in done:
                read_probe(probes[ref], ref, "GPU probe")
            for record in probes.values():
                self.nodes[record.id] = record
                if record.refused:
                    log.warning("Ray GPU node %s refused: %s", record.name(), record.refused)
        if not self.accepted():
            refused = "; ".join(f"{n.name()}: {n.refused}" for n in self.nodes.values())
            raise SandboxUnavailable(
                f"no Ray node can judge the GPU problems {sorted(self.bundles)}: none offers "
                f"{self.placement.describe()}"
                + (f" and can judge ({refused})" if refused else "")
                + "; start GPU nodes with `ray start --num-gpus N` (or the custom resource), or "
                "serve the GPU problems from a judge on a GPU host"
            )
        log.info(
            "GPU problems on %d Ray GPU nodes: %s",
            len(self.accepted()),
            ", ".join(f"{n.name()} ({n.capacity} GPUs)" for n in self.accepted()),
        )

    def capacity(self) -> int:
        return sum(record.capacity for record in self.accepted())

    async def judge(self, problem: GpuProblem, code: str) -> dict[str, Any]:
        """One trial as a Ray task on an accepted GPU node; the node's record."""
        _, bundle_ref = self.bundles[problem.id]
        ids = ",".join(sorted(record.id for record in self.accepted()))
        options = {
            **self.placement.task_options(),
            "max_retries": self.retries,
            "retry_exceptions": False,
            "label_selector": {NODE_ID_LABEL: f"in({ids})"},
        }
        gpus = max((record.capacity for record in self.accepted()), default=1)
        ref = _trial.options(**options).remote(self.settings, self.options, gpus, bundle_ref, code)
        try:
            record, _ = await ref
        except asyncio.CancelledError:
            ray.cancel(ref, force=True)
            raise
        except RayTaskError as error:
            cause = error.cause
            if isinstance(cause, JudgeFailure):
                raise cause from None
            raise JudgeFailure(
                f"a GPU trial failed on a Ray node: {type(cause).__name__}: {str(cause)[:300]}"
            ) from None
        except RayError as error:
            raise JudgeFailure(
                f"a GPU trial's Ray worker or node was lost {self.retries + 1} times "
                f"({type(error).__name__}: {str(error)[:300]}); an infrastructure fault"
            ) from None
        return record

    def describe(self) -> dict[str, Any]:
        return {
            "gpuPlacement": self.placement.describe(),
            "gpuNodes": [record.to_json() for record in self.accepted()],
            "gpuRefused": [r.to_json() for r in self.nodes.values() if r.refused],
        }
