"""GPU problems on a Ray cluster's GPU nodes: placement, the node's probe, one trial per task.

A GPU submission is one Ray task that takes one GPU of a node — Ray's `GPU` resource
(`num_gpus=1`; Ray gives the task a GPU id of its own) or one unit of a custom resource
(`--ray-option gpu-resource=NAME`, one unit per GPU) — on a node that carries the label
`--ray-option gpu-label=KEY=VALUE` where one is given. On the node the task runs the very trial the
local GPU judge runs (`judges.gpu.judge.GpuJudge._trial`: the trusted process, the candidate's
sandbox bound to that GPU's device nodes), after taking the GPU's lock in the node folder, so
that two tasks never judge on one GPU at once even where Ray's accounting would allow it (two
Ray nodes on one machine, or a custom resource that names no GPU). Each worker process checks
once what GPU judging needs (root, a cgroup, the interpreter, the device nodes:
`GpuJudge._probe`), as the local judge does at start; the front probes every GPU node that way
at start and refuses, by name and with the reason, a node that cannot, and no GPU node at all
is a start-up error naming the resource and label asked for.

A lost worker or node is an infrastructure fault: Ray runs the task again (`--ray-option
retries=N`), then the submission is a `judge` error — never a verdict, never a reward.

The package travels as its files (`GpuBundle`: config.yaml, the cases, the reference module),
written once per node under `<node dir>/gpu-problems/<digest>/<id>` and loaded there.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import threading
from dataclasses import dataclass
from typing import Any

from judges.cluster.bundles import node_lock
from judges.cluster.node import NodeSettings, node_root, node_state
from judges.gpu import devices
from judges.gpu.judge import GpuJudge, GpuOptions
from judges.gpu.package import GpuProblem, load_gpu_problem
from judges.problems.package import Suite, read_config
from judges.sandbox.runner import SandboxUnavailable
from judges.verdicts.fingerprints import judge_code

PACKAGE_BYTES = 64 << 20  # a GPU package's files, at most (they travel through the object store)


@dataclass(frozen=True)
class GpuPlacement:
    """Which nodes judge GPU problems, and how a task takes a GPU there."""

    resource: str = "GPU"  # Ray's GPU resource, or a custom one (one unit per GPU)
    label: tuple[str, str] | None = None

    def gpus(self, info: dict[str, Any]) -> int:
        """The GPUs a node offers for judging (0: not a GPU node of this placement)."""
        if self.label is not None and info.get("Labels", {}).get(self.label[0]) != self.label[1]:
            return 0
        return int(info.get("Resources", {}).get(self.resource, 0))

    def task_options(self) -> dict[str, Any]:
        if self.resource == "GPU":
            return {"num_cpus": 1, "num_gpus": 1}
        return {"num_cpus": 1, "resources": {self.resource: 1}}

    def describe(self) -> str:
        label = f" and the label {self.label[0]}={self.label[1]}" if self.label else ""
        return f"the resource {self.resource!r}{label}"


@dataclass(frozen=True)
class GpuBundle:
    """A GPU package's files, named by their content digest."""

    digest: str
    id: str
    files: tuple[tuple[str, bytes], ...]


def bundle_gpu_problem(problem: GpuProblem) -> GpuBundle:
    """The package's top-level regular files (config, cases, reference module)."""
    files, total = [], 0
    for path in sorted(problem.directory.iterdir()):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            total += len(data)
            files.append((path.name, data))
    if total > PACKAGE_BYTES:
        raise ValueError(
            f"GPU package {problem.directory} holds {total} bytes, over "
            f"{PACKAGE_BYTES}; keep only its config, cases and reference"
        )
    digest = hashlib.sha256(repr(files).encode()).hexdigest()[:32]
    return GpuBundle(digest, problem.id, tuple(files))


@dataclass(frozen=True)
class GpuNodeOptions:
    """How nodes run GPU trials: the GPU judge's flags, as the front was given them."""

    python: str
    sandbox_uid: int
    cpu_stand_in: bool = False


class _NodeGpu:
    """This worker process's GPU judge (probed once) and the node's copies of GPU packages."""

    def __init__(self, settings: NodeSettings, options: GpuNodeOptions, gpus: int) -> None:
        state = node_state(settings)  # the sandbox (runner, cgroup bound) of this process
        self.root = node_root()
        wanted = ",".join(str(i) for i in range(max(1, gpus))) if options.cpu_stand_in else "all"
        self.judge = GpuJudge(
            [],
            GpuOptions(wanted, options.python, options.sandbox_uid, options.cpu_stand_in),
            state.sandbox,
            self.root,
        )
        self.judge._probe()  # devices.NoGpu names what is missing
        self.problems: dict[str, GpuProblem] = {}
        self.lock = threading.Lock()

    def problem(self, bundle: GpuBundle) -> GpuProblem:
        with self.lock:
            if bundle.digest not in self.problems:
                folder = self.root / "gpu-problems" / bundle.digest / bundle.id
                with node_lock(self.root / "gpu-problems" / f".{bundle.digest}.lock"):
                    if not (folder / ".complete").exists():
                        folder.mkdir(parents=True, exist_ok=True)
                        for name, data in bundle.files:
                            (folder / name).write_bytes(data)
                        (folder / ".complete").write_bytes(b"")
                config, config_path = read_config(folder)  # the judge's own bounded reader
                suite = Suite("package", f"node copy of GPU problem {bundle.id}", True)
                loaded = load_gpu_problem(folder, config, str(config_path), suite)
                self.problems[bundle.digest] = loaded
            return self.problems[bundle.digest]

    def gpu(self, assigned: list[Any]) -> devices.Gpu:
        """The GPU Ray gave this task (by id), else the first of this node's."""
        if assigned:
            index = int(str(assigned[0]))
            for gpu in self.judge.gpus:
                if gpu.index == index:
                    return gpu
            if self.judge.gpus and self.judge.gpus[0].backend == "cpu":
                return devices.cpu_stand_ins(index + 1)[index]
            raise SandboxUnavailable(f"Ray gave GPU {index}, which this node does not list")
        return self.judge.gpus[0]


_NODE_GPU: dict[tuple[NodeSettings, GpuNodeOptions], _NodeGpu] = {}
_NODE_GPU_LOCK = threading.Lock()


def _node_gpu(settings: NodeSettings, options: GpuNodeOptions, gpus: int) -> _NodeGpu:
    with _NODE_GPU_LOCK:
        key = (settings, options)
        if key not in _NODE_GPU:
            _NODE_GPU[key] = _NodeGpu(settings, options, gpus)
        return _NODE_GPU[key]


def probe_gpu(settings: NodeSettings, options: GpuNodeOptions, gpus: int) -> dict[str, Any]:
    """Whether this node can judge GPU problems: its host, its GPUs, or the reason."""
    found: dict[str, Any] = {"host": socket.gethostname(), "code": judge_code()}
    try:
        node = _node_gpu(settings, options, gpus)
    except (SandboxUnavailable, devices.NoGpu, OSError, ValueError) as error:
        return {**found, "ok": False, "error": str(error)}
    return {**found, "ok": True, "error": "", "gpus": [gpu.describe() for gpu in node.judge.gpus]}


def judge_gpu(
    settings: NodeSettings, options: GpuNodeOptions, gpus: int, bundle: GpuBundle, code: str
) -> tuple[dict[str, Any], str]:
    """One GPU trial on this node (module docstring): (the record, this node's id)."""
    import ray  # only ever called in a Ray worker

    node = _node_gpu(settings, options, gpus)
    problem = node.problem(bundle)
    gpu = node.gpu(ray.get_gpu_ids())
    locks = node.root / "gpu-locks"
    locks.mkdir(parents=True, exist_ok=True)
    workdir = node.root / "gpu-work" / f"{os.getpid()}-{os.urandom(6).hex()}"
    with open(locks / f"gpu-{gpu.index}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one candidate per GPU on this machine
        try:
            record, finish = node.judge._trial(gpu, problem, code, workdir)
            finish()  # the GPU's lock is held until the trial's processes are gone
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    record.setdefault("timing", {})["rayNode"] = ray.get_runtime_context().get_node_id()
    return record, ray.get_runtime_context().get_node_id()
