"""The judge on a Ray cluster gives the same verdicts as the local judge, and survives lost workers.

A real multi-node Ray cluster runs on this machine (`ray.cluster_utils.Cluster`: a head and two
worker nodes, one CPU each, each its own raylet). One worker node's PATH lacks bubblewrap: the
judge must refuse it by name and never use it. `python -m judges --ray ADDRESS` (the front)
and `python -m judges` (the local judge) serve the same problems: a generated Polyomino suite
(the built-in checker), and, when `../shared/data/frontiercs` is present, FrontierCS problem 1
(a testlib checker, on the cases shipped there) and problem 10 (interactive). Every program
gets the same record from both, field by field, except times and memory. Killing the Ray
worker process that runs a case (SIGKILL) does not change the verdict: Ray runs it again.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.cluster.node import NODE_DIR_ENV
from judges.problems.polyomino.generator import write_suite
from judges.service.process import JudgeProcess

ray_cluster = pytest.importorskip("ray.cluster_utils", reason="Ray is not installed (.[cluster])")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PROGRAMS = Path(__file__).parent / "programs"
FRONTIERCS = Path(__file__).resolve().parents[3] / "shared" / "data" / "frontiercs"
HAS_FRONTIERCS = (FRONTIERCS / "problems" / "1" / "chk.cc").is_file()
TREASURE_CASES = 3  # the cases ../shared ships (its config.yaml declares 36)
SUBMISSIONS = {
    "0": ["shelf_packer", "skyline_packer", "frontiercs/polyomino_pile"],
    "1": ["frontiercs/treasure_greedy", "frontiercs/treasure_nothing"],
    "10": ["frontiercs/tree_distance", "frontiercs/tree_distance_wrong"],
}
# The parts of a record that are a verdict (times and memory are measurements; timing and
# verdictCache describe how it was judged).
RECORD_FIELDS = ("status", "passed", "result", "score", "scoreUnbounded", "suite", "value", "error")
CASE_FIELDS = (
    "ok",
    "status",
    "msg",
    "output",
    "outputBytes",
    "outputSha256",
    "outputTruncated",
    "scoreRatio",
    "scoreRatioUnbounded",
    "runStatus",
    "checkerExitCode",
    "stderr",
    "value",
)
# The shelf packer after a third of a CPU second or so: a case long enough to be killed in.
SPIN = (
    "    volatile unsigned long spin = 0;\n    for (unsigned long i = 0; i < 2e8; ++i) spin += i;\n"
)
SLOW_SHELF = (
    (PROGRAMS / "shelf_packer.cpp")
    .read_text()
    .replace("int main() {\n", "int main() {\n" + SPIN, 1)
)


def submit(url: str, pid: str, code: str) -> int:
    files = {"code": ("solution.cpp", code.encode(), "text/x-c++src")}
    answer = httpx.post(f"{url}/submit", data={"pid": pid, "lang": "cpp"}, files=files, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["sid"]


def wait_final(url: str, sid: int, timeout: float = 600.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/result/{sid}", timeout=10).json()
        if answer["status"] != "queued":
            return answer
        time.sleep(0.2)
    raise AssertionError(f"submission {sid} not judged within {timeout} s")


def verdict(record: dict[str, Any]) -> dict[str, Any]:
    """What must agree between two judges: the record's verdict fields and each case's."""
    found = {name: record.get(name) for name in RECORD_FIELDS}
    found["cases"] = [
        {name: case.get(name) for name in CASE_FIELDS} for case in record.get("cases", [])
    ]
    return found


def without_bwrap(folder: Path) -> Path:
    """A PATH folder holding every program of this machine's PATH except bubblewrap."""
    folder.mkdir()
    for directory in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if name != "bwrap" and not (folder / name).exists():
                (folder / name).symlink_to(Path(directory) / name)
    return folder


def served_problems(root: Path) -> list[str]:
    """The judge flags serving the test problems from `root` (written here)."""
    write_suite(root / "0", seed=2, cases=4)
    if not HAS_FRONTIERCS:
        return ["--problems", str(root)]
    treasure = root / "1"
    (treasure / "testdata").mkdir(parents=True)
    shutil.copy(FRONTIERCS / "problems" / "1" / "chk.cc", treasure / "chk.cc")
    for number in range(1, TREASURE_CASES + 1):
        for suffix in ("in", "ans"):
            source = FRONTIERCS / "problems" / "1" / "testdata" / f"{number}.{suffix}"
            shutil.copy(source, treasure / "testdata" / source.name)
    config = (FRONTIERCS / "problems" / "1" / "config.yaml").read_text()
    (treasure / "config.yaml").write_text(
        re.sub(r"n_cases: \d+", f"n_cases: {TREASURE_CASES}", config)
    )
    shutil.copytree(FRONTIERCS / "problems" / "10", root / "10")
    return ["--problems", str(root), "--testlib", str(FRONTIERCS / "include")]


@dataclass
class Setup:
    """The cluster, both judges and the node folder the Ray nodes share."""

    cluster: Any
    front: JudgeProcess
    local: JudgeProcess
    node_dir: Path
    flags: list[str]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("ray-judge")
    # Under /tmp itself, as a node's default: the sandbox user must reach the scratch folders.
    node_dir = Path(tempfile.mkdtemp(prefix="guidance-ttt-judge-node-test-"))
    flags = served_problems(root / "problems")
    node_env = {NODE_DIR_ENV: str(node_dir)}
    cluster = ray_cluster.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "env_vars": node_env},
    )
    try:
        cluster.add_node(
            num_cpus=1, env_vars=node_env, resources={"judge": 1}, labels={"pool": "judge"}
        )
        no_bwrap = {**node_env, "PATH": str(without_bwrap(root / "path-without-bwrap"))}
        cluster.add_node(num_cpus=1, env_vars=no_bwrap)
        front = JudgeProcess(root / "front", *flags, "--ray", cluster.address, startup_timeout=300)
        local = JudgeProcess(root / "local", *flags, "--workers", "2")
        with front, local:
            yield Setup(cluster, front, local, node_dir, flags)
    finally:
        cluster.shutdown()
        shutil.rmtree(node_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def judged(setup: Setup) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """Every test program judged by the Ray front and by the local judge:
    (problem, program, front's record, local record)."""
    problems = ["0", "1", "10"] if HAS_FRONTIERCS else ["0"]
    programs = [
        (pid, name, (PROGRAMS / f"{name}.cpp").read_text())
        for pid in problems
        for name in SUBMISSIONS[pid]
    ]
    programs.append(("0", "compile error", "int main( {}\n"))
    sids = [
        (submit(setup.front.url, pid, code), submit(setup.local.url, pid, code))
        for pid, _, code in programs
    ]
    return [
        (pid, name, wait_final(setup.front.url, front), wait_final(setup.local.url, local))
        for (pid, name, _), (front, local) in zip(programs, sids, strict=True)
    ]


def health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/health", timeout=10).json()


def test_the_same_programs_get_the_same_records_with_and_without_ray(judged: list) -> None:
    for pid, name, front, local in judged:
        assert front["status"] == local["status"], (pid, name, front.get("error"))
        assert verdict(front) == verdict(local), (pid, name)
    statuses = {(pid, record["status"]) for pid, _, record, _ in judged}
    assert ("0", "error") in statuses and ("0", "done") in statuses
    if HAS_FRONTIERCS:
        scores = {name: record.get("score") for _, name, record, _ in judged}
        assert scores["frontiercs/tree_distance"] > scores["frontiercs/tree_distance_wrong"]
        checked = [case for pid, _, record, _ in judged if pid == "1" for case in record["cases"]]
        assert checked and all("checkerExitCode" in case and case["msg"] for case in checked)


def test_one_candidates_cases_spread_over_the_nodes(judged: list) -> None:
    spread = [record["timing"]["rayNodes"] for _, _, record, _ in judged if "timing" in record]
    assert max(spread) == 2  # both accepted nodes ran cases of one candidate
    assert all(count <= 2 for count in spread)  # never the refused node


@pytest.mark.skipif(not HAS_FRONTIERCS, reason="FrontierCS test data is absent")
def test_checkers_and_interactors_are_compiled_once_per_node(setup: Setup, judged: list) -> None:
    compiles = {pid: 0 for pid in ("1", "10")}
    for pid, _, record, _ in judged:
        if pid in compiles:
            compiles[pid] += record["timing"]["checkerCompiles"]
    # Both Ray nodes of this machine share one node folder: one compile each, for all cases.
    assert compiles == {"1": 1, "10": 1}
    assert len(list((setup.node_dir / "programs").glob("*/program"))) == 2


def test_a_node_without_bubblewrap_is_refused_by_name(setup: Setup) -> None:
    cluster = health(setup.front.url)["ray"]
    assert len(cluster["nodes"]) == 2
    (refused,) = cluster["refused"]
    assert "bwrap" in refused["refused"]
    assert refused["id"] not in {node["id"] for node in cluster["nodes"]}
    log = setup.front.log_path.read_text()
    named = rf"Ray node \S+ \({re.escape(refused['address'])}, node {refused['id'][:12]}\)"
    assert re.search(rf"{named} refused: not found on PATH: \['bwrap'\]", log)


def worker_running_a_case() -> int | None:
    """The pid of a Ray worker process (a descendant of this test) executing `run_cases`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::run_cases"):
            return int(entry.name)
    return None


def test_killing_a_worker_mid_case_does_not_change_the_verdict(setup: Setup) -> None:
    expected = wait_final(setup.local.url, submit(setup.local.url, "0", SLOW_SHELF))
    assert expected["status"] == "done"
    sid = submit(setup.front.url, "0", SLOW_SHELF)
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline:
        killed = worker_running_a_case()
        if killed is None:
            time.sleep(0.05)
    assert killed is not None, "no Ray worker ever ran a case"
    os.kill(killed, signal.SIGKILL)
    record = wait_final(setup.front.url, sid)
    assert record["status"] == "done", record.get("error")
    assert verdict(record) == verdict(expected)
    assert (
        not Path(f"/proc/{killed}").exists()
        or b"run_cases" not in Path(f"/proc/{killed}/cmdline").read_bytes()
    )


def test_a_custom_resource_or_a_label_selects_the_nodes(setup: Setup, tmp_path: Path) -> None:
    for selection in ("resource=judge", "label=pool=judge"):
        flags = [*setup.flags, "--ray", setup.cluster.address, "--ray-option", selection]
        name = selection.split("=")[0]
        with JudgeProcess(tmp_path / name, *flags, startup_timeout=300) as front:
            cluster = health(front.url)["ray"]
            assert len(cluster["nodes"]) == 1 and not cluster["refused"], selection
            record = wait_final(front.url, submit(front.url, "0", SLOW_SHELF + "//\n"))
            assert record["status"] == "done" and record["timing"]["rayNodes"] == 1


def test_without_ray_the_judge_does_not_import_it() -> None:
    code = (
        "import sys\n"
        "import judges.service.app, judges.service.setup, judges.service.engine\n"
        "import judges.verdicts.cache\n"
        "judges.service.app.build_parser().parse_args([])\n"
        "print('ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
