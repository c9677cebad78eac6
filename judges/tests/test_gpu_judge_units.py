"""The GPU judge's parts that need no GPU: timing rule, record, task check of a record,
shared-memory layout, control block, channel, the charged probe waits, the sandbox command line
and GPU discovery. (The recipe's geometric-mean verdict on such a record is tested with the
recipe: tests/harness/test_trimul_task_with_the_judge.py.)

Plain functions and real sockets, memory files and folders; the only stand-in is
`test_probing_charges_only_waits_beyond_the_slack`'s probe timings, which stand for a GPU that
is busy with another process's work (they are a list of durations, not a GPU).
"""

from __future__ import annotations

import gc
import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from gpu_records import (
    CASES,
    REPO,
    SUITE,
    TASK,
    events,
    failing_events,
    load_module,
    score_check,
)

from judges.gpu import case_calibration, devices
from judges.gpu.judge import _ended, _until_ended
from judges.gpu.launch import LaunchSpec, gpu_bwrap_argv
from judges.gpu.package import GpuCase
from judges.gpu.record import NOT_RUN, build_record, read_lines
from judges.gpu.sandboxed import control, layout
from judges.gpu.sandboxed.channel import Channel
from judges.gpu.session import IdleProbe, charged_waits
from judges.gpu.timing import StoppingRule, combine_seed, geometric_mean, stats


def test_stats_are_gpu_modes_with_the_sample_standard_deviation() -> None:
    summary = stats([1.0, 2.0, 3.0, 6.0])
    assert summary.mean == 3.0 and summary.best == 1.0 and summary.worst == 6.0
    assert summary.std == pytest.approx(math.sqrt(14 / 3))
    assert summary.err == pytest.approx(summary.std / 2)
    assert stats([5.0]).std == 0.0
    assert summary.to_json()["meanUs"] == pytest.approx(3e-3)


def test_the_stopping_rule_needs_three_and_stops_on_error_budget_wall_or_a_hundred() -> None:
    rule = StoppingRule(3, 100, 1e-3, time_budget_ns=30e9, wall_budget_ns=120e9)
    steady = [1000.0, 1000.0]
    assert not rule.done(steady, 0) and rule.done([*steady, 1000.0], 0)
    noisy = [1000.0, 2000.0, 1500.0]
    assert not rule.done(noisy, 0)
    assert rule.done(noisy, 121e9)  # the benchmark's wall clock
    assert StoppingRule(3, 100, 1e-3, time_budget_ns=4000).done(noisy, 0)  # 3 x 1500 > 4000
    assert rule.done([1000.0 + (i % 7) * 100 for i in range(100)], 0)
    assert not rule.done([1000.0 + (i % 7) * 100 for i in range(99)], 0)


def test_geometric_mean_and_gpu_modes_seed_combination() -> None:
    assert geometric_mean([1.0, 100.0]) == pytest.approx(10.0)
    with pytest.raises(ValueError, match="positive finite"):
        geometric_mean([1.0, 0.0])
    assert combine_seed(3, 4) == 3 + 7 * 8 // 2


def test_a_passing_trial_becomes_a_record_whose_value_is_the_geometric_mean() -> None:
    record = build_record(CASES, events(), SUITE)
    assert record["status"] == "done" and record["passed"] and record["score"] == 100.0
    assert record["valueMean"] == "geometric"
    assert record["value"] == pytest.approx(math.sqrt(100.25 * 400.0))
    bench = record["cases"][2]
    assert bench["value"] == 100.25 and bench["timing"]["runs"] == 4
    assert bench["timing"]["lateUs"] == 2.0 and bench["status"] == "Correct"
    assert bench["msg"].startswith("pass: benchmark 1 (seqlen: 256; seed: 3): mean 100.250000 us")
    assert (
        record["cases"][0]["msg"] == "pass: test 1 (seqlen: 32; seed: 1): max abs error 1.000e-04"
    )
    assert record["gpu"]["healthyAfter"] is True and record["warmup"]["calls"] == 5
    assert all(score_check.check_case(case) is None for case in record["cases"])


def test_a_failing_call_ends_the_trial_and_the_rest_is_not_run() -> None:
    record = build_record(CASES, failing_events(), SUITE)
    assert not record["passed"] and "value" not in record
    statuses = [case["runStatus"] for case in record["cases"]]
    assert statuses == ["Accepted", "Wrong Answer", "Not Run", "Not Run"]
    assert record["cases"][1]["msg"].startswith("Wrong Answer: test 2 (seqlen: 64; seed: 2): 3 of")
    assert record["cases"][3]["msg"] == NOT_RUN and record["score"] == 25.0


def test_a_trial_without_its_end_is_the_judges_fault() -> None:
    assert build_record(CASES, events(end=False), SUITE)["errorKind"] == "judge"
    failed = [*events(end=False), {"event": "end", "status": "judge_error", "error": "boom"}]
    record = build_record(CASES, failed, SUITE)
    assert record == {
        "status": "error",
        "error": "Error: judge failure: boom",
        "errorKind": "judge",
    }
    assert read_lines('{"event": "end"}\n{"torn') == [{"event": "end"}]


def test_a_candidate_that_does_not_import_fails_the_first_case() -> None:
    found = [
        {"event": "startup", "status": "Runtime Error", "detail": "SyntaxError"},
        {"event": "end", "status": "done"},
    ]
    record = build_record(CASES, found, SUITE)
    assert [c["runStatus"] for c in record["cases"]][:2] == ["Runtime Error", "Not Run"]
    assert "the candidate did not start: SyntaxError" in record["cases"][0]["msg"]


def test_the_task_check_refuses_a_forged_or_inconsistent_case() -> None:
    record = build_record(CASES, events(), SUITE)
    bench = dict(record["cases"][2])
    assert score_check.check_case({**bench, "value": 50.0}) is not None
    assert score_check.check_case({**bench, "msg": "Ratio: 1"}) is not None
    test = dict(record["cases"][0])
    assert score_check.check_case({**test, "value": 1.0}) is not None
    assert score_check.check_case({**test, "scoreRatio": 0.0, "msg": "anything"}) is None


def test_the_in_container_verifier_agrees_with_the_harness_on_a_timing_record(
    tmp_path: Path,
) -> None:
    verify = load_module(TASK / "tests" / "verify.py", "trimul_verify")
    record = build_record(CASES, events(), SUITE)
    verify.judge = lambda *args, **kwargs: record  # the judge's answer, without a judge
    solution = tmp_path / "solution.py"
    solution.write_text("def custom_kernel(data): ...\n")
    reward, _reason, details = verify.score(solution, {})
    assert reward == pytest.approx(1 / record["value"]) and details["raw_score"] == record["value"]
    verify.judge = lambda *args, **kwargs: {**record, "value": 2 * record["value"]}
    assert verify.score(solution, {})[0] == 0.0


def test_the_layout_round_trips_nested_data_through_one_pool() -> None:
    weights = {"w": torch.ones(5, dtype=torch.bfloat16), "b": torch.zeros(())}
    data = (torch.arange(6.0).view(2, 3), torch.tensor([1, 0]), weights, {"dim": 3})
    tree, tensors, nbytes = layout.flatten(data)
    assert nbytes % layout.ALIGN == 0 and json.loads(json.dumps(tree)) == tree
    pool = torch.zeros(nbytes, dtype=torch.uint8)
    layout.pack(pool, tree, tensors)
    again = layout.rebuild(tree, pool)
    assert isinstance(again, tuple) and again[3] == {"dim": 3}
    assert torch.equal(again[0], data[0]) and torch.equal(again[1], data[1])
    assert torch.equal(again[2]["w"], data[2]["w"]) and again[2]["b"].shape == ()
    assert again[0].untyped_storage().data_ptr() == pool.untyped_storage().data_ptr()
    with pytest.raises(ValueError, match="cannot be shared"):
        layout.flatten((object(),))
    # the null entry copies the largest input: the most bytes, not the most elements
    assert layout.largest(again) is again[0] and layout.largest({"n": 3}) is None
    wide = (torch.ones(6, dtype=torch.int8), [torch.ones(2, dtype=torch.float64)])
    assert layout.largest(wide) is wide[1][0]


def test_flattening_leaves_no_cycle_that_keeps_a_calls_tensors_alive() -> None:
    # a call's inputs (gigabytes on the GPU) must go when the call is done, not at the
    # collector's next run: on the H200 that wait once filled the GPU (112 GiB) mid-judging
    gc.disable()
    try:
        tensor = torch.ones(4)
        gone = weakref.ref(tensor)
        layout.flatten((tensor, {"w": [tensor]}, 3))
        assert layout.largest([tensor]) is tensor
        del tensor
        assert gone() is None
    finally:
        gc.enable()


def test_the_control_block_is_shared_and_its_descriptor_checked() -> None:
    block = control.Control.create()
    other = control.Control(os.dup(block.fd))
    block.set(control.GO, 7)
    assert other.get(control.GO) == 7 and other.wait(control.GO, 7, 1.0)
    assert not other.wait(control.DONE, 1, 0.01)
    output = control.OutputDescriptor(b"h" * 64, 256, 4096, "bfloat16", (2, 3), (3, 1))
    other.write_output(output)
    assert block.read_output() == output
    other.set(control.OUTPUT_OFFSET // 8 + 10, 99)  # the dtype code slot: not a known dtype
    with pytest.raises(ValueError, match="malformed output descriptor"):
        block.read_output()


def test_the_channel_carries_messages_and_descriptors() -> None:
    ours, theirs_socket = Channel.pair()
    theirs = Channel(theirs_socket)
    read, write = os.pipe()
    ours.send({"op": "case", "layout": {"value": 1}}, [write])
    message, fds = theirs.receive(1.0)
    assert message == {"op": "case", "layout": {"value": 1}} and len(fds) == 1
    os.write(fds[0], b"x")
    assert os.read(read, 1) == b"x"
    with pytest.raises(TimeoutError):
        theirs.receive(0.01)
    ours.close()
    with pytest.raises(ConnectionError):
        theirs.receive(1.0)


def test_the_channel_polls_awake_until_a_message_or_the_close_waits() -> None:
    ours, theirs_socket = Channel.pair()
    theirs = Channel(theirs_socket)
    assert not theirs.poll(0.01)
    ours.send({"op": "arm", "seq": 1})
    assert theirs.poll(60.0) and theirs.poll(60.0)  # waiting, and left for `receive`
    assert theirs.receive(0)[0] == {"op": "arm", "seq": 1}
    ours.close()
    assert theirs.poll(60.0)
    # Polling never sleeps (the worker waits so, to keep its host path warm): in a process of
    # one thread, where nothing else wants the interpreter, no voluntary context switch.
    script = """
import resource, sys
sys.path.insert(0, sys.argv[1])
from judges.gpu.sandboxed.channel import Channel
channel, other_end = Channel.pair()  # kept open: nothing arrives
channel.poll(0.001)
before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
found = channel.poll(0.05)
print(found, resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before)
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(Path(__file__).resolve().parents[2])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["False", "0"]


def test_probing_charges_only_waits_beyond_the_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = IdleProbe("cpu", lambda: None)
    probe.median_ns = 20_000
    durations = iter([400_000, 90_000, 30_000, 20_000])  # busy (other work), then on time
    monkeypatch.setattr(probe, "once", lambda: next(durations))
    assert probe.until_idle(1.0) == 380_000 + 70_000  # 30 us is within the probe's slack
    assert probe.busy_ns(44_000) == 0 and probe.busy_ns(46_000) == 26_000
    assert charged_waits(1_000_000, 20_000, 20_000) == 0  # within 25 us
    assert charged_waits(1_000_000, 125_000, 0) == 95_000  # slack: 3 % of 1 ms = 30 us
    assert charged_waits(10_000_000, 250_000, 300_000) == 0  # within 3 % of a 10 ms call
    assert charged_waits(10_000_000, 0, 1_300_000) == 1_000_000


def test_the_gpu_sandbox_has_no_network_one_gpu_and_keeps_the_host_pid_namespace() -> None:
    spec = LaunchSpec(
        bwrap="bwrap",
        runner="/judge-runner",
        python="/opt/py/bin/python3",
        box="/scratch/box",
        backend="cuda",
        entry="custom_kernel",
        device_nodes=("/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm"),
        python_dirs=("/opt/py",),
        tmpfs_bytes=1 << 30,
        cgroup_dirs=("/sys/fs/cgroup/x",),
        uid=64003,
        env={"CUDA_VISIBLE_DEVICES": "GPU-abc"},
    )
    argv = gpu_bwrap_argv(spec, 5, 6)
    assert {"--unshare-user", "--unshare-net", "--unshare-ipc", "--disable-userns"} <= set(argv)
    assert "--unshare-pid" not in argv and "--unshare-all" not in argv
    pairs = list(itertools.pairwise(argv))
    assert ("--dev-bind", "/dev/nvidia3") in pairs and "/dev/nvidia0" not in argv
    assert ("--ro-bind", "/opt/py") in pairs and ("--ro-bind", "/scratch/box") in pairs
    assert argv[argv.index("--size") + 1] == str(1 << 30)
    # The interpreter is bound after the private /tmp, so a venv under the host's /tmp (a
    # checkout there) is not hidden by it (a fresh clone under /tmp failed every case so).
    assert argv.index("--tmpfs") < argv.index("/opt/py")
    command = ["/opt/py/bin/python3", "-I", "-B", "/box/judge/worker.py", "5", "6", "cuda"]
    assert argv[-8:] == [*command, "custom_kernel"] and argv[-9] == "--"
    settings = {argv[i + 1]: argv[i + 2] for i, word in enumerate(argv) if word == "--setenv"}
    assert settings["CUDA_VISIBLE_DEVICES"] == "GPU-abc" and settings["NCCL_NVLS_ENABLE"] == "0"


def test_gpus_are_read_from_the_driver_in_bus_order_and_selected_by_number(
    tmp_path: Path,
) -> None:
    for bus, minor, uuid in (("0000:81:00.0", 3, "GPU-b"), ("0000:01:00.0", 0, "GPU-a")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(
            f"Model: \t\t NVIDIA H200\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n"
            "Bus Location: \t 0000:00:00.0\n"
        )
    found = devices.discover(tmp_path)
    assert [(g.index, g.uuid, g.nodes[0]) for g in found] == [
        (0, "GPU-a", "/dev/nvidia0"),
        (1, "GPU-b", "/dev/nvidia3"),
    ]
    assert devices.select(found, "1") == [found[1]] and devices.select(found, "all") == found
    with pytest.raises(ValueError, match="there is no GPU 3"):
        devices.select(found, "0,3")
    with pytest.raises(devices.NoGpu, match="no NVIDIA driver here"):
        devices.discover(tmp_path / "absent")


def test_the_sandbox_never_binds_a_folder_holding_the_judges_files(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "site").mkdir(parents=True)
    facts = {"dirs": [str(venv), str(venv / "site"), "/usr"]}
    assert devices.sandbox_dirs(facts, [tmp_path / "state"]) == [str(venv.resolve())]
    with pytest.raises(devices.NoGpu, match="must not see"):
        devices.sandbox_dirs({"dirs": [str(tmp_path)]}, [tmp_path / "state"])


def test_the_done_to_described_window_is_charged_beyond_its_slack_and_not_twice() -> None:
    # 1 ms call: slack 30 us; the window (already less its calibrated allowance) and the late
    # probes overlap, so the larger of the two is charged, once.
    assert charged_waits(1_000_000, 0, 0, 20_000) == 0
    assert charged_waits(1_000_000, 0, 0, 530_000) == 500_000
    assert charged_waits(1_000_000, 0, 230_000, 530_000) == 500_000
    assert charged_waits(1_000_000, 0, 630_000, 530_000) == 600_000
    assert charged_waits(1_000_000, 130_000, 0, 530_000) == 100_000 + 500_000


def test_the_hardware_floor_is_the_slower_of_bytes_at_peak_bandwidth_and_flops_at_peak() -> None:
    from judges.gpu.limits import Peaks, choose, peaks_from

    # An H100 SXM's driver attributes: 1980 MHz boost, 132 SMs, HBM3 at 2619 MHz on 5120 bits.
    h100 = peaks_from(
        {
            "clock_khz": 1_980_000,
            "sms": 132,
            "memory_clock_khz": 2_619_000,
            "bus_width_bits": 5120,
            "major": 9,
            "minor": 0,
        }
    )
    assert h100.bandwidth == pytest.approx(3.352e12, rel=1e-3)  # 2 x 2619 MHz x 640 bytes
    assert h100.flops == pytest.approx(132 * 1.98e9 * 8192)  # FP8 dense, ~2.14 PFLOP/s
    assert h100.floor_ns({"bytes": 3.352e9, "flops": 0}) == pytest.approx(1e6, rel=1e-3)
    assert h100.floor_ns({"bytes": 0, "flops": 2.14e12}) == pytest.approx(1e6, rel=2e-3)
    assert h100.floor_ns(None) == 0.0 and Peaks().floor_ns({"bytes": 1e12}) == 0.0
    unknown = peaks_from(
        {
            "clock_khz": 1_000_000,
            "sms": 10,
            "memory_clock_khz": 1,
            "bus_width_bits": 8,
            "major": 12,
            "minor": 0,
        }
    )
    assert unknown.flops == 10 * 1e9 * 8192  # an unknown architecture: the largest per-cycle
    chosen = choose(Peaks(), 1000.0, None)
    assert (chosen.bandwidth, chosen.flops, chosen.source) == (1000.0, 0.0, "package")
    assert choose(h100, None, None) is h100


def test_trimuls_minimum_work_is_below_what_its_reference_does() -> None:
    reference = load_module(TASK / "judge" / "trimul" / "reference.py", "trimul_reference_units")
    work = reference.minimum_work(
        seqlen=1024, bs=1, dim=384, hiddendim=128, seed=1, nomask=True, distribution="normal"
    )
    elements = 1024 * 1024 * 384
    assert work["bytes"] == 6 * elements  # the float32 input read, the output at 2 bytes
    assert work["flops"] == 2 * 1024**3 * 128  # the triangle contraction alone
    # On an H200 (4.8 TB/s, ~2 PFLOP/s FP8) that is ~0.5 ms, against ~20 ms for fast_bf16.
    assert work["bytes"] / 4.8e12 < 0.6e-3


def test_each_task_verifier_uses_its_own_score_check_whatever_was_loaded_before() -> None:
    # The full suite loads every task's verifier in one process; a plain `import score_check`
    # gave the second one the first one's module (the CI failure of 2026-12-01).
    loaded = {
        task.name: load_module(task / "tests" / "verify.py", f"verify_{task.name}")
        for task in sorted((REPO / "harbor").iterdir())
        if (task / "tests" / "verify.py").is_file()
    }
    assert len(loaded) >= 2
    for name, verify in loaded.items():
        source = Path(verify.check_case.__code__.co_filename).resolve()
        assert source == REPO / "harbor" / name / "tests" / "score_check.py"


def test_the_trial_is_over_at_its_end_line_not_at_the_processs_exit(tmp_path: Path) -> None:
    """The service reads the record once the trusted process wrote its whole `end` line (a
    process that lingers afterwards does not hold it back), and a torn end line is not an end."""
    results = tmp_path / "results.jsonl"
    writer = (
        "import json, sys, time\n"
        "f = open(sys.argv[1], 'a')\n"
        "f.write(json.dumps({'event': 'case'}) + '\\n'); f.flush()\n"
        "f.write(json.dumps({'event': 'end', 'status': 'done'}) + '\\n'); f.flush()\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", writer, str(results)], start_new_session=True)
    try:
        text, timed_out = _until_ended(process, results, limit=50)
        assert not timed_out and process.poll() is None  # still running: not waited for
        assert [e["event"] for e in read_lines(text)] == ["case", "end"]
    finally:
        process.kill()
        process.wait()
    assert not _ended('{"event": "case"}\n{"event": "end", "sta')
    assert _ended('{"event": "case"}\n{"event": "end", "status": "done"}\n')


FUSED_AGAINST_TORCH = r"""
import json, sys
import torch
from judges.gpu import fused_compare
from judges.gpu.compare import _counts

torch.manual_seed(int(sys.argv[1]))
rtol = atol = 2e-2
found = []
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    expected = torch.randn(30011) * 3
    got = expected + 1e-2 * torch.randn(30011)
    tol = atol + rtol * expected.abs()
    got[:200] = expected[:200] + tol[:200]            # on the tolerance, as fp32 rounds it
    got[200:400] = expected[200:400] - tol[200:400]
    got[400:420] = torch.nextafter(got[400:420], torch.tensor(float("inf")))
    special = [float("nan"), float("inf"), float("-inf"), 0.0, 1e38, -1e38]
    index = torch.randint(0, 30011, (600,))
    got[index[:300]] = torch.tensor(special)[torch.randint(0, 6, (300,))]
    expected[index[300:]] = torch.tensor(special)[torch.randint(0, 6, (300,))]
    got = got.to(dtype)
    found.append([list(fused_compare._launch(got, expected, rtol, atol)),
                  list(_counts(got, expected, rtol, atol))])
print(json.dumps(found))
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_the_fused_comparison_counts_exactly_as_the_torch_rule(seed: int) -> None:
    """The Triton kernel, run by Triton's interpreter on the CPU, against the torch rule on
    outputs with elements on the tolerance, one ulp past it, NaN, ±inf and huge values planted
    on either side, in float32, bfloat16 and float16 (the H200 run checks the compiled one)."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", FUSED_AGAINST_TORCH, str(seed)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for fused, torch_rule in json.loads(done.stdout.splitlines()[-1]):
        assert fused == torch_rule
        assert fused[0] > 0


def test_handing_a_submission_to_a_spare_that_just_ended_is_an_oserror(tmp_path: Path) -> None:
    """`TrialProcess.begin` on a spare whose process ended after it was taken raises OSError
    (a closed pipe), which `GpuJudge._trial` answers with a cold start."""
    from judges.gpu.trial_process import TrialProcess

    class Group:
        def remove(self) -> None:
            pass

    process = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)
    process.wait()
    box = tmp_path / "box"
    box.mkdir()
    spare = TrialProcess(
        process,
        Group(),
        tmp_path,
        box,
        tmp_path / "results.jsonl",
        "trimul",
        spare=True,
        owns_workdir=False,
    )
    with pytest.raises(OSError):
        spare.begin("def custom_kernel(data):\n    return data\n" * 2000, time.time())
    spare.end(grace=1.0)


def _session(rtol: float = 0.02, atol: float = 0.02, probe: Any = None) -> Any:
    """A Session with only what its verdict and offset arithmetic read (no sandbox)."""
    from judges.gpu.session import Session

    session = Session.__new__(Session)
    Session.__init__(session, None, None, None, None, probe, 1.0, rtol, atol)
    return session


def test_each_benchmark_gets_the_plain_offsets_plus_how_much_more_its_null_calls_took() -> None:
    from judges.gpu.session import Null

    class Probe:
        gpu_ns = 20_000.0

    session = _session(probe=Probe())
    session.null = Null(200_000, 30_000, 180_000)
    session.case_deltas = {1: Null(60_000, 5_000, -10_000), 2: Null(-250_000, -40_000, 0)}
    session.use_case(1)
    assert (session.clock_offset_ns, session.late_allowance_ns, session.window_allowance_ns) == (
        240_000,
        35_000,
        170_000,
    )
    session.use_case(2)  # never below zero
    assert (session.clock_offset_ns, session.late_allowance_ns) == (0, 0)
    session.use_case(None)
    assert session.clock_offset_ns == 180_000
    assert session.case_offsets()["1"]["clockOffsetUs"] == 240.0
    assert session.clock_offset_ns == 180_000  # back to the plain offsets
    from judges.gpu.session import ACCEPTED, CallOutcome

    calls = [
        CallOutcome(ACCEPTED, "", clock_ns=c, late_ns=c // 2, window_ns=c + 5)
        for c in (260_000, 240_000, 900_000, 250_000)
    ]  # one slow moment: 900 us
    assert Null.lowest(calls) == Null(240_000, 120_000, 240_005)
    assert Null.median(calls) == Null(255_000, 127_500, 255_005)
    without_probe = _session()
    without_probe.null, without_probe.case_deltas = session.null, session.case_deltas
    without_probe.use_case(1)
    assert without_probe.clock_offset_ns == 0  # the stand-in: no offset without a probe


def test_a_gpu_trials_sandbox_gets_its_gpus_share_of_the_hosts_cpus(tmp_path: Path) -> None:
    """One CPU for a CPU run, the GPU's share of the host's CPUs for a GPU trial's sandbox
    (written into the real cgroup's cpu.max), and the throttling its cpu.stat reports."""
    from judges.cgroups.groups import CgroupUnavailable, detect
    from judges.gpu.judge import cpu_share, throttling

    available = len(os.sched_getaffinity(0))
    assert cpu_share(1) == available and cpu_share(10**6) == 1
    assert cpu_share(2) == max(1, available // 2)
    stat = tmp_path / "cpu.stat"
    stat.write_text("usage_usec 900\nnr_periods 12\nnr_throttled 4\nthrottled_usec 123\n")
    assert throttling(stat) == {"throttled": 4, "throttledUs": 123}
    assert throttling(None) == {} and throttling(tmp_path / "cpuacct.usage") == {}
    if os.geteuid() != 0:
        pytest.skip("creating a cgroup needs root")
    try:
        bound = detect("auto")
    except CgroupUnavailable as error:
        pytest.skip(f"no cgroup bound here: {error}")
    try:
        if bound.cpu is None:
            pytest.skip(f"no CPU bound here: {bound.cpu_missing}")
        for cpus in (1, 3):
            group = bound.create(1 << 30, 64, cpus)
            try:
                directory = bound.cpu.parent / group.directories[0].name
                if bound.cpu.version == 2:
                    assert (directory / "cpu.max").read_text().split() == [
                        str(cpus * 100_000),
                        "100000",
                    ]
                    assert throttling(group.cpu_path) == {"throttled": 0, "throttledUs": 0}
                else:
                    assert (directory / "cpu.cfs_quota_us").read_text().strip() == str(
                        cpus * 100_000
                    )
            finally:
                group.remove()
    finally:
        bound.close()


def _startup(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"event": "startup", "calibration": {"calls": 30, "cases": entries}}


def test_only_a_trials_own_whole_benchmark_calibration_is_kept_for_the_next() -> None:
    """`case_calibration.kept_from_startup`: what the service keeps from a trial's `startup`
    line — every benchmark measured (`deltaNs`), none failed, none itself handed on."""
    measured = {
        "1": {
            "calls": 7,
            "copyKernelUs": 0.0,
            "moreThanPlainUs": 2.5,
            "deltaNs": [2500, -10, 40],
            "measuredAt": 100.0,
            "clockOffsetUs": 9.0,
        },
        "2": {
            "calls": 7,
            "copyKernelUs": 0.0,
            "moreThanPlainUs": 1.0,
            "deltaNs": [1000, 0, 5],
            "measuredAt": 101.5,
        },
    }
    kept = case_calibration.kept_from_startup(_startup(measured))
    assert kept is not None and kept.measured_at == 100.0
    assert "clockOffsetUs" not in kept.entries["1"]  # the trial's own offsets stay its own
    cases = [
        GpuCase("test", 1, {"seed": 1}),
        GpuCase("benchmark", 1, {"seed": 2}),
        GpuCase("benchmark", 2, {"seed": 3}),
    ]
    assert kept.covers(cases) and not kept.covers(cases[:2])
    again = case_calibration.Kept.from_spec(json.loads(json.dumps(kept.to_spec())))
    assert again == kept and kept.age(now=160.0) == 60.0
    handed_on = {k: {**v, "kept": True, "measuredAgoS": 3.0} for k, v in measured.items()}
    failed = {**measured, "2": {"failed": "the worker ended"}}
    unmeasured = {"1": measured["1"], "2": {"calls": 7, "moreThanPlainUs": 1.0}}
    for entries in (handed_on, failed, unmeasured, {}):
        assert case_calibration.kept_from_startup(_startup(entries)) is None, entries
    assert case_calibration.kept_from_startup({"event": "startup", "status": "Error"}) is None
    broken = case_calibration.Kept({"1": {"deltaNs": [1, 2]}, "2": {"deltaNs": [1, 2, True]}}, 0)
    assert not broken.covers(cases)
    for spec in (
        None,
        [],
        {"entries": {}},
        {"entries": [], "measuredAt": 1.0},
        {"entries": {}, "measuredAt": True},
    ):
        assert case_calibration.Kept.from_spec(spec) is None, spec


def test_a_spare_waits_for_its_go_line_until_its_kept_calibration_expires(monkeypatch) -> None:
    """`trusted._wait_go`: the go line; "" once the service closed the pipe; None when the
    timeout (the kept calibration's remaining life) passed first."""
    from judges.gpu import trusted

    read, write = os.pipe()
    with open(read) as stdin, open(write, "w") as writer:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert trusted._wait_go(0.0) is None
        writer.write('{"secret": 5}\n')
        writer.flush()
        assert trusted._wait_go(30.0) == '{"secret": 5}\n'
        writer.close()
        assert trusted._wait_go(None) == ""


def test_the_benchmarks_gpu_clocks_are_medians_of_busy_samples_inside_a_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No GPU here: a stand-in for `nvidia-smi --query-gpu=... --loop-ms=N`, printing the CSV lines
    # it would (utilization, SM clock, temperature, power), idle ones and an "[N/A]" among them,
    # then waiting to be terminated as the real one loops.
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import sys, time\n"
        "assert {'--format=csv,noheader,nounits', '--loop-ms=200'} <= set(sys.argv) and any(\n"
        "    a.startswith('--query-gpu=utilization.gpu,clocks.sm,') for a in sys.argv)\n"
        "for line in ('0, 345, 30, 70', '90, 1980, 41, [N/A]', '[N/A], 1, 1, 1',\n"
        "             '80, 1755, 45, 600', '100, 1830, 44, 650'):\n"
        "    print(line, flush=True)\n"
        "time.sleep(600)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    spec = importlib.util.spec_from_file_location(
        "gpu_clocks", Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_clocks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    started = time.time()
    with module.GpuClocks() as clocks:
        deadline = time.monotonic() + 60
        while len(clocks.samples) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        figures = clocks.during(started, time.time())
        assert clocks.during(0.0, started - 1.0)["smClockMHz"] is None  # no sample in it
    assert clocks.process.returncode is not None  # the sampler ends with the block
    assert figures == {"samples": 3, "utilizationPct": 90.0, "smClockMHz": 1830.0,
                       "temperatureC": 44.0, "powerW": 625.0}  # fmt: skip
