"""GPU problems on a Ray cluster's GPU nodes, with the GPU judge's CPU stand-in.

A real multi-node Ray cluster runs on this machine (`ray.cluster_utils.Cluster`): a head
without GPUs and two worker nodes offering Ray's `GPU` resource twice each (Ray's own resource
accounting: these GPUs are names, which the CPU stand-in of the GPU judge turns into stand-in
devices on the node, the test mode `gpu-cpu-stand-in`), one of them labelled `pool=gpu`. The front
(`python -m judges --ray ADDRESS`) serves the small TriMul package. A submission is judged on
a GPU node with the local judge's very trial; a placement no node offers is refused at start,
by name; a label narrows the nodes; and a Ray worker killed mid-trial is run again (a verdict),
or, with no retries left, is a `judge` error (never a reward).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpu_judge_support import (
    PROGRAMS,
    first_failure,
    judge_program,
    small_package,
    stand_in_missing,
    submit_program,
    verdict,
    wait_record,
)

from judges.cluster.node import NODE_DIR_ENV
from judges.service.process import JudgeProcess

ray_cluster = pytest.importorskip("ray.cluster_utils", reason="Ray is not installed (.[cluster])")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

HONEST = (PROGRAMS / "honest.py").read_text()


class Setup:
    def __init__(self, cluster: Any, flags: list[str], root: Path) -> None:
        self.cluster, self.flags, self.root = cluster, flags, root

    def front(self, name: str, *extra: str) -> JudgeProcess:
        return JudgeProcess(
            self.root / name,
            *self.flags,
            "--ray",
            self.cluster.address,
            *extra,
            startup_timeout=600,
            test_mode=("gpu-cpu-stand-in",),
        )


def start_cluster(node_env: dict[str, str], attempts: int = 3) -> Any:
    """The head without GPUs; Ray gives a starting node a fixed 30 s to register, which a
    loaded test host can exceed, so the start is tried a few times."""
    for attempt in range(attempts):
        try:
            return ray_cluster.Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "num_gpus": 0,
                    "include_dashboard": False,
                    "env_vars": node_env,
                },
            )
        except Exception as error:  # Ray raises a bare Exception for the timeout
            if "timed out during startup" not in str(error) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    missing = stand_in_missing()
    if missing is not None:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("ray-gpu")
    packages = small_package(root / "packages", call_timeout="8s")
    node_dir = Path(tempfile.mkdtemp(prefix="guidance-ttt-judge-node-gpu-test-"))
    node_env = {NODE_DIR_ENV: str(node_dir)}
    cluster = start_cluster(node_env)
    try:
        cluster.add_node(num_cpus=2, num_gpus=2, env_vars=node_env, labels={"pool": "gpu"})
        cluster.add_node(num_cpus=2, num_gpus=2, env_vars=node_env)
        flags = ["--problems", str(packages)]
        yield Setup(cluster, flags, root)
    finally:
        cluster.shutdown()
        shutil.rmtree(node_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def front(setup: Setup) -> Iterator[JudgeProcess]:
    with setup.front("front") as judge:
        yield judge


def health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/health", timeout=10).json()


def test_a_gpu_problem_is_judged_on_a_gpu_node(setup: Setup, front: JudgeProcess) -> None:
    cluster = health(front.url)["ray"]
    assert len(cluster["gpuNodes"]) == 2 and not cluster["gpuRefused"], cluster
    assert all(node["capacity"] == 2 for node in cluster["gpuNodes"])
    accepted = {node["id"] for node in cluster["gpuNodes"]}
    head = setup.cluster.head_node.node_id
    assert head not in accepted
    records = [
        wait_record(front.url, sid)
        for sid in [submit_program(front.url, f"{HONEST}\n# {n}\n") for n in range(3)]
    ]
    for record in records:
        assert verdict(record) == "valid", first_failure(record) or record.get("error")
        assert record["timing"]["rayNode"] in accepted
        assert record["cases"][3]["timing"]["runs"] >= 3


def test_a_placement_no_node_offers_is_refused_by_name(setup: Setup) -> None:
    for option, named in (
        ("gpu-resource=H200", "the resource 'H200'"),
        ("gpu-label=pool=none", "the label pool=none"),
    ):
        with pytest.raises(RuntimeError) as failure:
            setup.front(f"refused-{option.split('=')[0]}", "--ray-option", option).start()
        assert "no Ray node can judge the GPU problems ['trimul']" in str(failure.value)
        assert named in str(failure.value)


def test_a_label_narrows_the_gpu_nodes(setup: Setup) -> None:
    with setup.front("labelled", "--ray-option", "gpu-label=pool=gpu") as judge:
        (node,) = health(judge.url)["ray"]["gpuNodes"]
        record = judge_program(judge.url, f"{HONEST}\n# labelled\n")
    assert verdict(record) == "valid", first_failure(record) or record.get("error")
    assert record["timing"]["rayNode"] == node["id"]


def worker_running_a_trial() -> int | None:
    """The pid of a Ray worker process executing `judge_gpu` (its process title says so)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::judge_gpu"):
            return int(entry.name)
    return None


def kill_a_trial(url: str, code: str) -> tuple[int, int]:
    """Submit `code`, SIGKILL the Ray worker judging it once it has started; (sid, pid)."""
    sid = submit_program(url, code)
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and time.monotonic() < deadline:
        killed = worker_running_a_trial()
        if killed is None:
            time.sleep(0.05)  # polling, bounded by the deadline
    assert killed is not None, "no Ray worker ever ran a GPU trial"
    os.kill(killed, signal.SIGKILL)
    return sid, killed


def test_a_lost_worker_is_run_again_then_is_a_judge_error(
    setup: Setup, front: JudgeProcess
) -> None:
    sid, _ = kill_a_trial(front.url, f"{HONEST}\n# killed once\n")
    record = wait_record(front.url, sid)
    assert verdict(record) == "valid", first_failure(record) or record.get("error")
    with setup.front("no-retries", "--ray-option", "retries=0") as judge:
        sid, _ = kill_a_trial(judge.url, f"{HONEST}\n# killed, no retry\n")
        record = wait_record(judge.url, sid)
    assert record["status"] == "error" and record["errorKind"] == "judge", record
    assert "lost 1 times" in record["error"] and "infrastructure fault" in record["error"]
    assert "score" not in record
