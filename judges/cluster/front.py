"""The front's side of the Ray judge: connect, check the nodes, run compiles and cases as tasks.

`RayJudge.start` connects to the cluster (shipping the `judges` package to every node through
the job's runtime environment, so the nodes judge with exactly the front's code), lists the
nodes the selection allows — every alive node with a CPU, or those offering a custom resource
(`--ray-option resource=NAME`) or carrying a label (`--ray-option label=KEY=VALUE`) — and runs a
probe on each: the node sets up and tries its sandbox (`judges.cluster.node.probe`). A node that
cannot is refused, by host, address and id, with the reason, and no task is ever scheduled there:
every task's label selector lists the accepted node ids. Nodes that join later are probed within
REFRESH_S.

`judge` runs the candidate's compile as one task and its cases as tasks of a few cases each
(`cases_per_task`; by default enough tasks for four per accepted CPU, at most
MAX_CASES_PER_TASK cases in one), so one candidate's cases spread over the cluster; Ray
schedules them (one CPU each, and one unit of the resource; an interactive problem's take two
where a node has two, since the candidate and its interactor run at once).
At most `in_flight` tasks are submitted at once (default twice the accepted capacity), in
submission order. A task whose worker process or node is lost is run again by Ray, elsewhere if
the node is gone (`retries` times); past that it is a `judge` error (an infrastructure fault,
never a verdict). The cases' records are aggregated here exactly as locally.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from judges.cluster import connect, node
from judges.cluster.bundles import ProblemBundle, bundle_problem
from judges.cluster.gpu_front import GpuNodes
from judges.cluster.probes import first_line, read_probe
from judges.gpu.package import GpuProblem
from judges.problems.package import Problem
from judges.sandbox.runner import SandboxUnavailable
from judges.verdicts.judging import JudgeFailure, aggregate, error_record

log = logging.getLogger("judges.cluster")

NODE_ID_LABEL = "ray.io/node-id"
PROBE_TIMEOUT_S = 60.0
REFRESH_S = 60.0
MAX_CASES_PER_TASK = 8
JUDGES_PACKAGE = Path(__file__).resolve().parents[1]

_probe = ray.remote(node.probe)
_compile = ray.remote(num_returns=2)(node.compile_program)
_cases = ray.remote(node.run_cases)


@dataclass(frozen=True)
class Selection:
    """Which nodes may judge: all with a CPU, or those with a custom resource or a label."""

    resource: str | None = None
    label: tuple[str, str] | None = None

    def capacity(self, info: dict[str, Any]) -> int:
        """Tasks the node runs at once (0 when it is not selected)."""
        resources = info.get("Resources", {})
        cpus = int(resources.get("CPU", 0))
        if self.resource is not None:
            cpus = min(cpus, int(resources.get(self.resource, 0)))
        if self.label is not None and info.get("Labels", {}).get(self.label[0]) != self.label[1]:
            return 0
        return cpus


@dataclass
class NodeRecord:
    """A node the front probed: id, address, host name, capacity, and why it was refused."""

    id: str
    address: str
    host: str
    capacity: int
    refused: str = ""

    def name(self) -> str:
        return f"{self.host} ({self.address}, node {self.id[:12]})"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"id": self.id, "address": self.address, "host": self.host}
        if self.refused:
            return {**found, "refused": self.refused}
        return {**found, "capacity": self.capacity}


class RayJudge:
    """Judges problems on a Ray cluster's nodes (see the module docstring)."""

    def __init__(
        self,
        address: str,
        settings: node.NodeSettings,
        selection: Selection | None = None,
        retries: int = 3,
        in_flight: int | None = None,
        cases_per_task: int | None = None,
        gpu: tuple[Any, Any] | None = None,
    ) -> None:
        self.address = address
        self.cases_per_task = cases_per_task
        self.settings = settings
        self.selection = selection or Selection()
        self.retries = retries
        self.in_flight = in_flight
        self.nodes: dict[str, NodeRecord] = {}
        self._bundles: dict[str, tuple[ProblemBundle, Any]] = {}
        self._checked = 0.0
        self._refresh = threading.Lock()
        self._slots: asyncio.Semaphore | None = None
        self.gpu_nodes: GpuNodes | None = None
        if gpu is not None:  # (GpuPlacement, GpuNodeOptions): GPU problems on GPU nodes
            self.gpu_nodes = GpuNodes(gpu[0], gpu[1], settings, retries, NodeRecord)

    @classmethod
    def start(
        cls, address: str, settings: node.NodeSettings, problems: dict[str, Problem], **options: Any
    ) -> RayJudge:
        """Connect, probe the nodes (SandboxUnavailable when none can judge) and publish the
        problems to the object store. Blocking."""
        judge = cls(address, settings, **options)
        _connect(address)
        try:
            judge.check_nodes()
            if not judge.accepted():
                refused = "; ".join(f"{n.name()}: {n.refused}" for n in judge.nodes.values())
                raise SandboxUnavailable(
                    f"no node of the Ray cluster at {address} can judge ("
                    f"{refused or 'no node is selected: check --ray-option resource= and label='})"
                )
            gpu_problems = [p for p in problems.values() if isinstance(p, GpuProblem)]
            for pid, problem in problems.items():
                if not isinstance(problem, GpuProblem):
                    bundle = bundle_problem(problem)
                    judge._bundles[pid] = (bundle, ray.put(bundle))
            if gpu_problems:
                if judge.gpu_nodes is None:
                    raise SandboxUnavailable(
                        "GPU problems need the GPU placement (--ray-option gpu-resource=NAME)"
                    )
                judge.gpu_nodes.publish(gpu_problems)
                judge.gpu_nodes.check()
            else:
                judge.gpu_nodes = None
        except BaseException:
            ray.shutdown()
            raise
        capacity = sum(n.capacity for n in judge.accepted())
        judge.in_flight = judge.in_flight or max(2, 2 * capacity)
        judge._slots = asyncio.Semaphore(judge.in_flight)
        log.info(
            "judging on %d Ray nodes (%d tasks at once, %d submitted at most): %s",
            len(judge.accepted()),
            capacity,
            judge.in_flight,
            ", ".join(n.name() for n in judge.accepted()),
        )
        return judge

    @property
    def dispatchers(self) -> int:
        """Submissions the engine should judge at once to keep the nodes busy (every CPU
        slot and every GPU)."""
        gpus = self.gpu_nodes.capacity() if self.gpu_nodes is not None else 0
        return max(2, sum(n.capacity for n in self.accepted())) + gpus

    def accepted(self) -> list[NodeRecord]:
        return [record for record in self.nodes.values() if not record.refused]

    def check_nodes(self) -> None:
        """Probe every selected alive node not probed yet; log each refusal by name. (A refused
        node is not probed again before the judge restarts.)"""
        if not self._refresh.acquire(blocking=False):
            return
        try:
            self._checked = time.monotonic()
            fresh = [
                info
                for info in ray.nodes()
                if info.get("Alive")
                and info["NodeID"] not in self.nodes
                and self.selection.capacity(info) > 0
            ]
            probes = {}
            for info in fresh:
                record = NodeRecord(
                    info["NodeID"],
                    info.get("NodeManagerAddress", "?"),
                    info.get("NodeManagerHostname", "?"),
                    self.selection.capacity(info),
                )
                pinned = {**self._base_options(), "label_selector": self._label(record.id)}
                probes[_probe.options(**pinned).remote(self.settings)] = record
            if not probes:
                return
            done, pending = ray.wait(list(probes), num_returns=len(probes), timeout=PROBE_TIMEOUT_S)
            for ref in pending:
                ray.cancel(ref, force=True)
                probes[ref].refused = f"did not answer a probe within {PROBE_TIMEOUT_S:g} s"
            for ref in done:
                read_probe(probes[ref], ref)
            for record in probes.values():
                self.nodes[record.id] = record
                if record.refused:
                    log.warning("Ray node %s refused: %s", record.name(), record.refused)
        finally:
            self._refresh.release()

    def _label(self, node_id: str | None = None) -> dict[str, str]:
        ids = node_id or ",".join(sorted(record.id for record in self.accepted()))
        selector = {NODE_ID_LABEL: ids if node_id else f"in({ids})"}
        if self.selection.label is not None:
            selector[self.selection.label[0]] = self.selection.label[1]
        return selector

    def _base_options(self, cpus: int = 1) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_cpus": cpus,
            "max_retries": self.retries,
            "retry_exceptions": False,
        }
        if self.selection.resource is not None:
            options["resources"] = {self.selection.resource: cpus}
        return options

    def _options(self, cpus: int = 1) -> dict[str, Any]:
        if time.monotonic() - self._checked > REFRESH_S:
            self._checked = time.monotonic()  # one look at a time
            threading.Thread(target=self._check_quietly, daemon=True).start()
        return {**self._base_options(cpus), "label_selector": self._label()}

    def _check_quietly(self) -> None:
        try:
            self.check_nodes()
        except Exception as error:  # a failed refresh keeps the nodes already accepted
            log.warning("could not look for new Ray nodes: %s", error)

    async def judge(self, problem: Problem, code: str, language: str) -> dict[str, Any]:
        """Compile on a node, then judge every case as its own task; the aggregated record.
        A GPU problem is one trial on a GPU node (`judges.cluster.gpu_front`)."""
        if isinstance(problem, GpuProblem) and self.gpu_nodes is not None:
            return await self.gpu_nodes.judge(problem, code)
        if problem.id not in self._bundles:
            raise JudgeFailure(f"problem {problem.id} was not published to the Ray nodes")
        bundle, bundle_ref = self._bundles[problem.id]
        started = time.monotonic()
        async with self._semaphore():
            status, program = _compile.options(**self._options()).remote(
                self.settings, code, language
            )
            error = await self._wait(status, "compile")
        if error:
            return error_record(error, "compile")
        prepared = time.monotonic()
        numbers = [case.number for case in problem.cases]
        size = self.cases_per_task or self._auto_cases_per_task(len(numbers))
        # An interactive case runs the candidate and its interactor at once: two CPUs where a
        # node has them, as the local judge holds two slots (one where it has only one).
        widest = max((record.capacity for record in self.accepted()), default=1)
        cpus = min(2, widest) if problem.kind == "interactive" else 1
        runs = [
            self._run_cases(
                bundle.digest, bundle_ref, program, tuple(numbers[at : at + size]), cpus
            )
            for at in range(0, len(numbers), size)
        ]
        outcomes = await asyncio.gather(*runs, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        cases = [case for records, _, _ in outcomes for case in records]
        record = aggregate(cases, problem.suite.to_json())
        record["timing"] = {
            "compileSeconds": round(prepared - started, 3),
            "checkerSeconds": 0.0,  # each node prepares it with its first case
            "checkerCache": "node",
            "checkerCompiles": sum(origin == "compiled" for _, _, origin in outcomes),
            "casesSeconds": round(time.monotonic() - prepared, 3),
            "rayTasks": len(outcomes),
            "rayNodes": len({where for _, where, _ in outcomes}),
        }
        return record

    def _auto_cases_per_task(self, cases: int) -> int:
        """Cases per task: enough tasks for four per accepted CPU, at most MAX_CASES_PER_TASK
        cases in one (fewer tasks cost less Ray overhead; smaller ones spread and retry finer)."""
        capacity = max(1, sum(record.capacity for record in self.accepted()))
        return max(1, min(MAX_CASES_PER_TASK, math.ceil(cases / (4 * capacity))))

    async def _run_cases(
        self, digest: str, bundle: Any, program: Any, numbers: tuple[int, ...], cpus: int
    ) -> Any:
        async with self._semaphore():
            ref = _cases.options(**self._options(cpus)).remote(
                self.settings, digest, [bundle], program, numbers
            )
            what = (
                f"case {numbers[0]}" if len(numbers) == 1 else f"cases {numbers[0]}-{numbers[-1]}"
            )
            return await self._wait(ref, what)

    def _semaphore(self) -> asyncio.Semaphore:
        assert self._slots is not None, "RayJudge.start sets the task bound"
        return self._slots

    async def _wait(self, ref: Any, what: str) -> Any:
        """The task's value; its own failure as the judge's, a lost worker or node (past
        Ray's retries) as a JudgeFailure saying so."""
        try:
            return await ref
        except asyncio.CancelledError:
            ray.cancel(ref, force=True)
            raise
        except RayTaskError as error:
            cause = error.cause
            if isinstance(cause, JudgeFailure | OSError):
                raise cause from None
            raise JudgeFailure(
                f"{what} failed on a Ray node: {type(cause).__name__}: {first_line(cause)}"
            ) from None
        except RayError as error:
            raise JudgeFailure(
                f"{what}: its Ray worker or node was lost {self.retries + 1} times "
                f"({type(error).__name__}: {first_line(error)}); an infrastructure fault"
            ) from None

    def describe(self) -> dict[str, Any]:
        """The `/health` entry: the cluster, accepted and refused nodes, the task bound."""
        found = {
            "address": self.address,
            "inFlight": self.in_flight,
            "nodes": [record.to_json() for record in self.accepted()],
            "refused": [record.to_json() for record in self.nodes.values() if record.refused],
        }
        if self.gpu_nodes is not None:
            found.update(self.gpu_nodes.describe())
        return found

    def close(self) -> None:
        """Disconnect (a cluster started with `local` is stopped)."""
        ray.shutdown()


def _connect(address: str) -> None:
    """Join the cluster at `address` (`local`: start a private one on this host, loopback
    only), shipping the `judges` package to its workers (`judges.cluster.connect`)."""
    connect.join(address, {"py_modules": [str(JUDGES_PACKAGE)]})
