"""The judge service's optional parts: the verdict cache and Ray workers, and Ray's flags.

    --ray [ADDRESS]               compile and run cases as tasks on a Ray cluster (`judges.cluster`)
    --ray-option resource=NAME    only nodes offering custom resource NAME (one unit per task)
    --ray-option label=KEY=VALUE  only nodes with this node label
    --ray-option in-flight=N      tasks submitted at once (default: twice the nodes' capacity)
    --ray-option cases-per-task=N cases one task judges (default: four tasks per CPU, at most 8)
    --ray-option retries=N        runs again of a task whose worker or node was lost (default 3)
    --ray-option gpu-resource=NAME  GPU problems: the resource a trial takes (default GPU)
    --ray-option gpu-label=KEY=VALUE  GPU problems: only GPU nodes with this node label

The verdict cache's bound is `--limit verdict-cache-mb=MB` (`judges.service.app.LIMITS`). Ray
is imported only when `--ray` is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from judges.cgroups.groups import CgroupBound
from judges.problems.package import Problem
from judges.service.engine import EngineSettings
from judges.service.named_flags import Named, add_named_flag
from judges.service.testing import Switches
from judges.verdicts.cache import CACHE_FILE, VerdictCache, VerdictStore, settings_context
from judges.verdicts.fingerprints import judge_code, toolchain

# EngineSettings fields that do not change a record (how much runs at once, the queue bound).
_NOT_IN_RECORDS = frozenset({"workers", "max_queue", "dispatchers"})


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `--ray` and `--ray-option NAME=VALUE` (`RAY_OPTIONS`)."""
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="compile and run cases as tasks on a Ray cluster: ADDRESS of its head, `auto` "
        "(a cluster started on this host) or `local` (start a private one here); without "
        "ADDRESS, $RAY_ADDRESS, else auto (default: off, judge on this host)",
    )
    add_named_flag(parser, "--ray-option", RAY_OPTIONS, "with --ray, how it uses the cluster")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{value} is not at least 1")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"{value} is below 0")
    return value


def _label(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key or not value:
        raise ValueError(f"{text!r} is not KEY=VALUE")
    return key, value


# `--ray-option NAME=VALUE`: which nodes judge, and how tasks are cut and retried
RAY_OPTIONS = {
    "resource": Named(
        "ray_resource",
        str,
        None,
        "only nodes offering this custom resource; each compile or "
        "case takes one unit of it and one CPU",
        "NAME",
        "every node with a CPU",
    ),
    "label": Named(
        "ray_label", _label, None, "only nodes carrying this node label", "KEY=VALUE", "any"
    ),
    "in-flight": Named(
        "ray_in_flight",
        _positive,
        None,
        "compile and case tasks submitted at once",
        shown="twice the accepted nodes' capacity",
    ),
    "cases-per-task": Named(
        "ray_cases_per_task",
        _positive,
        None,
        "cases one task judges one after another",
        shown="enough tasks for four per accepted CPU, at most 8 cases in one",
    ),
    "retries": Named(
        "ray_retries",
        _count,
        3,
        "times a task whose worker or node was lost is run again before it is a judge error",
    ),
    "gpu-resource": Named(
        "ray_gpu_resource",
        str,
        "GPU",
        "GPU problems: each trial takes one unit of this "
        "resource (a custom resource counts a node's judging GPUs)",
        "NAME",
    ),
    "gpu-label": Named(
        "ray_gpu_label",
        _label,
        None,
        "GPU problems only on GPU nodes carrying this label",
        "KEY=VALUE",
        "any",
    ),
}


def open_verdict_cache(
    args: argparse.Namespace,
    problems: dict[str, Problem],
    settings: EngineSettings,
    bound: CgroupBound | None,
    cgroup: str = "auto",
) -> VerdictCache | None:
    """The verdict cache the flags ask for (None with --limit verdict-cache-mb=0), its problems
    fingerprinted. Blocking. Its keys include the judge's code, the toolchain, the settings
    that shape records and how runs are bounded (`cgroup`: the mode Ray nodes are asked for),
    so a change of any gives other keys."""
    if args.verdict_cache_mb < 0:
        raise ValueError(f"--limit verdict-cache-mb={args.verdict_cache_mb:g} must be 0 or more")
    if args.verdict_cache_mb == 0:
        return None
    shaping = {
        name: value
        for name, value in dataclasses.asdict(settings).items()
        if name not in _NOT_IN_RECORDS
    }
    if args.ray is not None:
        bounded = f"ray nodes: cgroup {cgroup}, rlimits {args.accept_per_process_limits}"
    else:
        bounded = "per-process rlimits"
        if bound is not None:
            bounded = f"cgroup v{bound.version}, cpu {'bounded' if bound.cpu else 'unbounded'}"
    context = settings_context(judge_code(), toolchain(), repr(sorted(shaping.items())), bounded)
    store = VerdictStore(args.state_dir / CACHE_FILE, int(args.verdict_cache_mb * (1 << 20)))
    cache = VerdictCache(store, context)
    cache.prepare(problems)
    return cache


def start_remote(args: argparse.Namespace, problems: dict[str, Problem], switches: Switches) -> Any:
    """The Ray judge `--ray` and `--ray-option` ask for, connected, its nodes checked
    (blocking); the test switches (`judges.service.testing`) go to every node."""
    # Ray's own SIGTERM handler would print a stack trace over the service's clean stop.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    from judges.cluster.front import RayJudge, Selection  # imports Ray
    from judges.cluster.node import NodeSettings
    from judges.problems.package import parse_memory_limit
    from judges.verdicts.judging import CompileLimits

    gpu = None
    if any(problem.kind == "gpu" for problem in problems.values()):
        from judges.cluster.gpu import GpuNodeOptions, GpuPlacement

        placement = GpuPlacement(args.ray_gpu_resource, args.ray_gpu_label)
        gpu = (
            placement,
            GpuNodeOptions(args.gpu_python, args.gpu_sandbox_uid, switches.gpu_cpu_stand_in),
        )
    settings = NodeSettings(
        cgroup=switches.cgroup,
        accept_per_process_limits=args.accept_per_process_limits,
        sandbox_uid=args.sandbox_uid,
        compile_limits=CompileLimits(
            cpu_seconds=args.compile_time,
            memory_bytes=parse_memory_limit(args.compile_memory, "--limit compile-memory"),
        ),
        output_field_bytes=args.output_field_bytes,
        needs_python=any(p.language == "python" or p.kind == "verifier" for p in problems.values()),
    )
    address = args.ray or os.environ.get("RAY_ADDRESS") or "auto"
    return RayJudge.start(
        address,
        settings,
        problems,
        selection=Selection(args.ray_resource, args.ray_label),
        retries=args.ray_retries,
        in_flight=args.ray_in_flight,
        cases_per_task=args.ray_cases_per_task,
        gpu=gpu,
    )
