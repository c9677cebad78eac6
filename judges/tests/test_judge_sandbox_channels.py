"""What one case can leave for the next (judges/tests/programs/channel_probe.cpp), against the real
bubblewrap, runner and cgroups: a submission's kept sandbox (judges/sandbox/session.py) removes
the extended attributes and ACLs of /tmp (also the working directory), sets its times anew and
refuses every run the kernel's keyrings; a sandbox per run gives every case the same start; the
memory of a case's extended attributes is released when the case ends, in either."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.cgroups.groups import CgroupBound, detect
from judges.sandbox.outcome import ACCEPTED, Limits
from judges.sandbox.runner import Sandbox
from judges.sandbox.session import SessionPool
from judges.service.process import cgroup_missing

PROBE = Path(__file__).parent / "programs" / "channel_probe.cpp"
CGROUP_MISSING = cgroup_missing()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}"),
]
LIMITS = Limits(2, 4, 256 << 20, 16, 1 << 20, 8 << 20, address_space=False)
HOARD_MIB = 32  # extended attributes on /tmp per case
IDLE_SLACK = 8 << 20  # what the judge's group may hold above its idle figure after a case
EPERM = 1


@pytest.fixture(scope="module")
def box() -> Iterator[dict]:
    scratch = Path(tempfile.mkdtemp(prefix="gtj-channels-"))  # reachable by the sandbox user
    scratch.chmod(0o755)
    subprocess.run(["g++", "-O1", "-o", str(scratch / "probe"), str(PROBE)], check=True)
    bound = detect("auto")
    sandbox = Sandbox(scratch / "box", uid=64126, bound=bound)
    try:
        yield {
            "sandbox": sandbox,
            "bound": bound,
            "scratch": scratch,
            "binds": [("ro", scratch / "probe", "/box/p")],
        }
    finally:
        sandbox.close()
        bound.close()
        subprocess.run(["rm", "-rf", str(scratch)], check=False)


def run(box: dict, runner: Sandbox | SessionPool, *args: str) -> str:
    out, err = box["scratch"] / "out.txt", box["scratch"] / "err.txt"
    outcome = runner.execute(
        ["/box/p", *args], limits=LIMITS, stdin=None, stdout=out, stderr=err, binds=box["binds"]
    )
    assert outcome.status == ACCEPTED, (outcome, err.read_text())
    return out.read_text()


def fields(line: str) -> dict[str, int]:
    return {name: int(value) for name, value in (word.split("=") for word in line.split())}


def test_the_kept_sandbox_removes_xattrs_and_acls_resets_times_and_refuses_keyrings(
    box: dict,
) -> None:
    pool = SessionPool(box["sandbox"], box["binds"])
    try:
        before = fields(run(box, pool, "read"))
        run(box, pool, "write")
        after = fields(run(box, pool, "read"))
        assert pool.started == 1  # one sandbox all along: put back as it was, each time
    finally:
        pool.close()
    cleared = {
        "tmp_xattr": -1,
        "cwd_xattr": -1,
        "tmp_xattr_names": 0,
        "acl": -1,
        "user_key": 0,
        "session_key": 0,
        "add_key_errno": EPERM,
        "compat_keyctl": -EPERM,
        "tmp_time_kept": 0,
    }
    assert {name: before[name] for name in cleared} == cleared
    assert {name: after[name] for name in cleared} == cleared
    # What it does not put back (judges/MEASUREMENTS.md): the counters go on from where the
    # writing case left them, which is why the judge starts a sandbox per run.
    assert after["pid"] > before["pid"] + 40
    assert after["inode"] > before["inode"] + 40
    assert after["shm_id"] > before["shm_id"]
    assert after["loopback_bytes"] > before["loopback_bytes"]


def test_a_sandbox_per_run_gives_every_case_the_same_start(box: dict) -> None:
    before = run(box, box["sandbox"], "read")
    run(box, box["sandbox"], "write")
    assert run(box, box["sandbox"], "read") == before
    assert fields(before)["add_key_errno"] == EPERM
    assert fields(before)["compat_keyctl"] == -EPERM  # the i386 entry is filtered too


def judge_memory(bound: CgroupBound) -> int:
    """What the judge's own memory group holds now (its runs' groups are below it)."""
    for parent in bound.parents:
        for name in ("memory.usage_in_bytes", "memory.current"):
            if (parent / name).is_file():
                return int((parent / name).read_text())
    raise AssertionError(f"no memory group among {bound.parents}")


@pytest.mark.parametrize("kept", [True, False], ids=["kept-sandbox", "sandbox-per-run"])
def test_a_cases_extended_attributes_are_released_when_it_ends(box: dict, kept: bool) -> None:
    runner = SessionPool(box["sandbox"], box["binds"]) if kept else box["sandbox"]
    try:
        for _ in range(2):  # the probe's pages and the sandbox's first files are in by then
            run(box, runner, "read")
        idle = judge_memory(box["bound"])
        held = []
        for case in range(12):
            hoarded = run(box, runner, "hoard", str(HOARD_MIB), f"case{case}")
            assert hoarded == f"hoarded {HOARD_MIB} MiB\n"
            held.append(judge_memory(box["bound"]) - idle)
        if kept:
            assert runner.started == 1
    finally:
        if kept:
            runner.close()
    assert max(held) < IDLE_SLACK, [round(h / (1 << 20), 1) for h in held]
