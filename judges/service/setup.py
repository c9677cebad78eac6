"""The judge service's optional parts and their flags: the verdict cache and Ray workers.

    --verdict-cache-mb MB     bound of the verdict cache in the state directory (0: no cache)
    --ray [ADDRESS]           compile and run cases as tasks on a Ray cluster (`judges.cluster`)
    --ray-resource NAME       only nodes offering custom resource NAME (one unit per task)
    --ray-label KEY=VALUE     only nodes with this node label
    --ray-in-flight N         tasks submitted at once (default: twice the nodes' capacity)
    --ray-cases-per-task N    cases one task judges (default: four tasks per CPU, at most 8)
    --ray-retries N           runs again of a task whose worker or node was lost (default 3)
    --ray-gpu-resource NAME   GPU problems: the resource a trial takes one unit of (default GPU)
    --ray-gpu-label KEY=VALUE GPU problems: only GPU nodes with this node label

Ray is imported only when `--ray` is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from judges.cgroups.groups import CgroupBound
from judges.problems.package import Problem
from judges.service.engine import EngineSettings
from judges.verdicts.cache import (
    CACHE_FILE,
    DEFAULT_LIMIT_MB,
    VerdictCache,
    VerdictStore,
    settings_context,
)
from judges.verdicts.fingerprints import judge_code, toolchain

# EngineSettings fields that do not change a record (how much runs at once, the queue bound).
_NOT_IN_RECORDS = frozenset({"workers", "max_queue", "dispatchers"})


def add_extra_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the verdict cache's and the Ray workers' flags."""
    parser.add_argument(
        "--verdict-cache-mb", type=float, default=DEFAULT_LIMIT_MB, metavar="MB",
        help="size bound of the verdict cache (compressed records, least recently used out) "
        f"in <state-dir>/{CACHE_FILE}; 0 turns it off (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--ray", nargs="?", const="", default=None, metavar="ADDRESS",
        help="compile and run cases as tasks on a Ray cluster: ADDRESS of its head, `auto` "
        "(a cluster started on this host) or `local` (start a private one here); without "
        "ADDRESS, $RAY_ADDRESS, else auto (default: off, judge on this host)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-resource", metavar="NAME",
        help="with --ray, use only nodes offering the custom resource NAME; each compile or "
        "case takes one unit of it and one CPU (default: every node with a CPU)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-label", metavar="KEY=VALUE",
        help="with --ray, use only nodes carrying this node label (default: any label)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-in-flight", type=int, metavar="N",
        help="with --ray, compile and case tasks submitted at once (default: twice the "
        "accepted nodes' capacity)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-cases-per-task", type=int, metavar="N",
        help="with --ray, cases one task judges one after another (default: enough tasks for "
        "four per accepted CPU, at most 8 cases in one)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-retries", type=int, default=3, metavar="N",
        help="with --ray, times a task whose worker or node was lost is run again before it "
        "is a judge error (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-gpu-resource", default="GPU", metavar="NAME",
        help="with --ray, GPU problems: each trial takes one unit of this resource, one GPU "
        "(default: Ray's %(default)s; a custom resource counts a node's judging GPUs)",
    )  # fmt: skip
    parser.add_argument(
        "--ray-gpu-label", metavar="KEY=VALUE",
        help="with --ray, GPU problems only on GPU nodes carrying this label (default: any)",
    )  # fmt: skip


def open_verdict_cache(
    args: argparse.Namespace,
    problems: dict[str, Problem],
    settings: EngineSettings,
    bound: CgroupBound | None,
) -> VerdictCache | None:
    """The verdict cache the flags ask for (None with --verdict-cache-mb 0), its problems
    fingerprinted. Blocking. Its keys include the judge's code, the toolchain, the settings
    that shape records and how runs are bounded, so a change of any gives other keys."""
    if args.verdict_cache_mb < 0:
        raise ValueError(f"--verdict-cache-mb {args.verdict_cache_mb:g} must be 0 or more")
    if args.verdict_cache_mb == 0:
        return None
    shaping = {
        name: value
        for name, value in dataclasses.asdict(settings).items()
        if name not in _NOT_IN_RECORDS
    }
    if args.ray is not None:
        bounded = f"ray nodes: --cgroup {args.cgroup}, rlimits {args.accept_per_process_limits}"
    else:
        bounded = "per-process rlimits"
        if bound is not None:
            bounded = f"cgroup v{bound.version}, cpu {'bounded' if bound.cpu else 'unbounded'}"
    context = settings_context(judge_code(), toolchain(), repr(sorted(shaping.items())), bounded)
    store = VerdictStore(args.state_dir / CACHE_FILE, int(args.verdict_cache_mb * (1 << 20)))
    cache = VerdictCache(store, context)
    cache.prepare(problems)
    return cache


def start_remote(args: argparse.Namespace, problems: dict[str, Problem]) -> Any:
    """The Ray judge the --ray flags ask for, connected, its nodes checked (blocking)."""
    # Ray's own SIGTERM handler would print a stack trace over the service's clean stop.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    from judges.cluster.front import RayJudge, Selection  # imports Ray
    from judges.cluster.node import NodeSettings
    from judges.problems.package import parse_memory_limit
    from judges.verdicts.judging import CompileLimits

    gpu = None
    if any(problem.kind == "gpu" for problem in problems.values()):
        from judges.cluster.gpu import GpuNodeOptions, GpuPlacement

        placement = GpuPlacement(
            args.ray_gpu_resource, _label(args.ray_gpu_label, "--ray-gpu-label")
        )
        gpu = (
            placement,
            GpuNodeOptions(args.gpu_python, args.gpu_sandbox_uid, args.gpu_cpu_stand_in),
        )
    if args.ray_in_flight is not None and args.ray_in_flight < 1:
        raise ValueError(f"--ray-in-flight {args.ray_in_flight} must be at least 1")
    if args.ray_cases_per_task is not None and args.ray_cases_per_task < 1:
        raise ValueError(f"--ray-cases-per-task {args.ray_cases_per_task} must be at least 1")
    if args.ray_retries < 0:
        raise ValueError(f"--ray-retries {args.ray_retries} must be 0 or more")
    label = _label(args.ray_label, "--ray-label")
    settings = NodeSettings(
        cgroup=args.cgroup,
        accept_per_process_limits=args.accept_per_process_limits,
        sandbox_uid=args.sandbox_uid,
        compile_limits=CompileLimits(
            cpu_seconds=args.compile_time,
            memory_bytes=parse_memory_limit(args.compile_memory, "--compile-memory"),
        ),
        output_field_bytes=args.output_field_bytes,
        needs_python=any(p.language == "python" or p.kind == "verifier" for p in problems.values()),
    )
    address = args.ray or os.environ.get("RAY_ADDRESS") or "auto"
    return RayJudge.start(
        address,
        settings,
        problems,
        selection=Selection(args.ray_resource, label),
        retries=args.ray_retries,
        in_flight=args.ray_in_flight,
        cases_per_task=args.ray_cases_per_task,
        gpu=gpu,
    )


def _label(text: str | None, flag: str) -> tuple[str, str] | None:
    if text is None:
        return None
    key, equals, value = text.partition("=")
    if not equals or not key or not value:
        raise ValueError(f"{flag} {text!r} must be KEY=VALUE")
    return key, value
