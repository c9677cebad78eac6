"""The live progress display: plain lines without a terminal, a rich grid with one, and the
one-line step summary. Events are fed exactly as the rollout loop emits them; the terminal is a
real rich Console writing into a buffer (force_terminal=True)."""

from __future__ import annotations

import io
import logging
import re
import threading

import pytest
from rich.console import Console

from harness.observe.cost import CostEstimate, Price, PriceTable, StepUsage, Usage
from harness.observe.events import EventLog, Fanout, read_events
from harness.observe.progress import ProgressDisplay, format_duration, summary_line

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Clock:
    """A hand-driven monotonic clock, so elapsed and estimate are exact."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    colors = "standard" if terminal else None  # what rich picks for a tty / a pipe
    return Console(file=buffer, force_terminal=terminal, width=140, color_system=colors), buffer


def _finish(display: ProgressDisplay, step: int, g: int, r: int, status: str, score=None) -> None:
    for stage in ("guidance", "executor", "judge", "reported"):
        display.emit("rollout_stage", step=step, group=g, rollout=r, stage=stage)
    display.emit(
        "rollout_finished",
        step=step,
        group=g,
        rollout=r,
        status=status,
        reward=0.5 if status == "valid" else 0.0,
        raw_score=score,
        guidance_ok=status != "guidance_format_error",
        timings={"guidance_s": 2.0, "executor_s": 30.0, "judge_s": 8.0, "total_s": 40.0},
        usage={"prompt_tokens": 4000, "completion_tokens": 1000},
        guidance_usage={"prompt_tokens": 800, "completion_tokens": 200},
    )


SUMMARY = {
    "step": 0,
    "elapsed_s": 80.0,
    "sampled_rollouts": 8,
    "valid_rollouts": 6,
    "well_formed_guidance": 7,
    "nonconstant_groups": 2,
    "degenerate_step": False,
    "retained_trajectories": 8,
    "grad_norm": 0.4123,
    "best_raw_score": 31.5,
    "train_metrics": {},
    "recovered_commit": False,
}


def test_plain_lines_without_a_terminal_report_each_rollout_with_counts_and_estimate():
    console, buffer = _console(terminal=False)
    clock = Clock()
    display = ProgressDisplay(console, clock=clock, best_so_far=27.8105)
    assert display.plain
    display.emit("step_started", step=0, groups=2, rollouts=4, parents=["a", "b"], resumed_slots=[])
    clock.now += 40
    _finish(display, 0, 0, 0, "valid", 31.5)
    clock.now += 40
    _finish(display, 0, 1, 2, "invalid")
    display.emit("training_wait", step=0, phase="training", elapsed_s=12.0, missing_slots=[])
    display.emit("training_wait", step=0, phase="training", elapsed_s=14.0, missing_slots=[])
    display.emit("step_summary", **SUMMARY, usage=None)
    display.close()
    lines = buffer.getvalue().splitlines()
    assert "\x1b[" not in buffer.getvalue()  # no escape codes in a log
    assert lines[0] == "step 0: 2×4 rollouts"
    # 1 done after 40 s, 7 left: estimate 40 × 7 / 1 = 280 s.
    assert lines[1] == (
        "step 0 g0r0 valid 31.5000 (guidance 2.0s executor 30.0s judge 8.0s) "
        "[1/8, elapsed 0:40, eta 4:40]"
    )
    assert lines[2].startswith("step 0 g1r2 invalid - (") and lines[2].endswith(
        "[2/8, elapsed 1:20, eta 4:00]"
    )
    assert [line for line in lines if line.startswith("training")] == [
        "training step 0: training (0:12)"  # printed once per phase, not per poll
    ]
    assert lines[-1] == (
        "step 0 | valid 6/8 | well-formed 7/8 | step best 31.5000 | run best 31.5000 (+3.6895) | "
        "grad norm 0.4123 | tokens 12.0k (executor 10.0k, guidance 2.0k)"
    )


def test_terminal_draws_the_grid_of_stages_then_replaces_it_with_the_summary():
    console, buffer = _console(terminal=True)
    display = ProgressDisplay(console, refresh_per_second=20)
    assert not display.plain
    display.emit(
        "step_started", step=4, groups=2, rollouts=4, parents=["a", "b"], resumed_slots=[[1, 3]]
    )
    display.emit("rollout_stage", step=4, group=0, rollout=0, stage="guidance")
    display.emit("rollout_stage", step=4, group=0, rollout=1, stage="executor")
    display.emit("rollout_stage", step=4, group=0, rollout=2, stage="judge")
    _finish(display, 4, 1, 0, "valid", 40.0)
    _finish(display, 4, 1, 1, "parse_error")
    display.emit("rollout_stage", step=4, group=1, rollout=2, stage="failed")
    assert display.counts() == {
        "guidance": 1,
        "executor": 1,
        "judge": 1,
        "reported": 3,  # two finished + one resumed from the journal
        "failed": 1,
        "waiting": 1,
    }
    rendered = io.StringIO()
    Console(file=rendered, force_terminal=True, width=140).print(display._render())
    text = ANSI.sub("", rendered.getvalue())
    assert "g0 gej·" in text  # guidance, executor, judge, waiting
    assert "g1 ●○✗●" in text  # valid, candidate failure, failed, resumed
    # 1 valid + 1 candidate failure + 1 failed + 1 resumed: every done slot counted once
    assert "step 4 · 4/8 done · valid 1 · candidate failures 1 · failed 1 · resumed 1" in text
    display.emit("step_summary", **{**SUMMARY, "step": 4})
    display.close()
    output = buffer.getvalue()
    assert "\x1b[" in output  # drawn with escape codes on a terminal
    plain = ANSI.sub("", output)
    assert "step 4: 2×4 rollouts, 1 resumed from the journal" in plain
    # no run best known before the step: only the step's own best, never called the run's
    assert "step 4 | valid 6/8 | well-formed 7/8 | step best 31.5000 | grad norm 0.4123" in plain


def test_concurrent_events_from_worker_threads_are_all_counted():
    console, _ = _console(terminal=True)
    display = ProgressDisplay(console, refresh_per_second=50)
    display.emit("step_started", step=0, groups=8, rollouts=16, parents=[], resumed_slots=[])

    def worker(g: int) -> None:
        for r in range(16):
            _finish(display, 0, g, r, "valid", 1.0)

    threads = [threading.Thread(target=worker, args=(g,)) for g in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert display.counts() == {"reported": 128}
    display.close()


def test_a_broken_event_is_logged_and_never_raises_into_the_run(caplog):
    console, _ = _console(terminal=False)
    display = ProgressDisplay(console)
    display.emit("step_started", step=0, groups="two", rollouts=4)  # not an int
    display.emit("rollout_finished", step=0)  # no step started: ignored
    display.emit("unknown_kind", anything=1)
    assert "progress display failed on step_started" in caplog.text


def test_display_and_event_log_receive_the_same_events_through_fanout(tmp_path):
    console, buffer = _console(terminal=False)
    log = EventLog(tmp_path / "events.jsonl")
    sink = Fanout(log, ProgressDisplay(console))
    sink.emit("step_started", step=0, groups=1, rollouts=2, parents=["p"], resumed_slots=[])
    sink.emit("error", message="JudgeUnavailableError: down", where="step 0 g0r1")
    log.close()
    assert [e["event"] for e in read_events(tmp_path / "events.jsonl")] == [
        "step_started",
        "error",
    ]
    assert "error in step 0 g0r1: JudgeUnavailableError: down" in buffer.getvalue()


def test_closing_the_fanout_first_lets_late_rollouts_emit_nothing_into_a_closed_log(
    tmp_path, caplog
):
    """A signal stops a run while a step's rollouts still run on worker threads: the run closes
    its Fanout before the sinks, waiting for an event already on its way; later events are
    dropped, none reaches the closed log (no "I/O operation on closed file" logged)."""
    log = EventLog(tmp_path / "events.jsonl")
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def emit(self, kind, **fields):
            if kind == "rollout_stage":
                entered.set()
                release.wait(10)

    sink = Fanout(Slow(), log)
    worker = threading.Thread(
        target=sink.emit, args=("rollout_stage",), kwargs={"step": 1, "stage": "judge"}
    )
    worker.start()
    assert entered.wait(10)
    closing = threading.Thread(target=sink.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive(), "close returned while an event was still on its way"
    release.set()
    closing.join(10)
    worker.join(10)
    log.close()
    with caplog.at_level(logging.ERROR):
        for _ in range(3):  # rollouts still finishing after the stop
            sink.emit("rollout_finished", step=1, status="ok")
    assert [e["event"] for e in read_events(tmp_path / "events.jsonl")] == ["rollout_stage"]
    assert not caplog.records


def test_summary_line_shows_cost_and_a_degenerate_step():
    usage = StepUsage(2, Usage(1_500_000, 500_000, 128), Usage(100_000, 30_000, 128))
    prices = PriceTable({"exec": Price(0.6, 2.2), "guide": Price(0.0, 0.0)})
    cost = prices.estimate(usage.by_model("guide", "exec"))
    line = summary_line(
        {**SUMMARY, "step": 2, "grad_norm": None, "degenerate_step": True, "best_raw_score": 20.0},
        previous_best=25.0,
        direction="max",
        usage=usage,
        cost=cost,
    )
    assert "step best 20.0000 | run best 25.0000 (+0.0000)" in line  # a worse step: unchanged
    assert "grad norm -- (degenerate step)" in line
    assert "tokens 2.13M (executor 2.00M, guidance 130.0k)" in line
    assert line.endswith(f"cost ${0.6 * 1.5 + 2.2 * 0.5:,.2f}")
    low = summary_line({**SUMMARY, "best_raw_score": 900.0}, previous_best=1000.0, direction="min")
    assert "run best 900.0000 (-100.0000)" in low
    unpriced = CostEstimate(1.0, ("z-ai/glm-5.2",))
    unknown = "cost $1.00 + unknown (no price for z-ai/glm-5.2)"
    assert summary_line(SUMMARY, cost=unpriced).endswith(unknown)


def test_a_step_below_the_seed_is_never_called_the_runs_best():
    """The run's best before the first step is the seed's score, carried by `run_started`; a
    first step that stays below it shows as the step's best, and the run best stays the seed's.
    The final line rounds the score as every other line does."""
    console, buffer = _console(terminal=False)
    display = ProgressDisplay(console)
    display.emit(
        "run_started",
        state_dir="s",
        start_step=0,
        steps=2,
        groups=2,
        rollouts=4,
        best_raw_score=45.80666666666666,
    )
    display.emit("step_started", step=0, groups=2, rollouts=4, parents=["a", "b"], resumed_slots=[])
    display.emit("step_summary", **{**SUMMARY, "best_raw_score": 31.5}, usage=None)
    display.emit("step_started", step=1, groups=2, rollouts=4, parents=["a", "b"], resumed_slots=[])
    display.emit("step_summary", **{**SUMMARY, "step": 1, "best_raw_score": 50.25}, usage=None)
    display.emit("run_finished", next_step=2, best_raw_score=50.250000000000014)
    display.close()
    lines = buffer.getvalue().splitlines()
    first, second = (line for line in lines if line.startswith("step ") and " | " in line)
    assert "step best 31.5000 | run best 45.8067 (+0.0000)" in first
    assert "step best 50.2500 | run best 50.2500 (+4.4433)" in second
    assert lines[-1] == "run finished: 2 steps committed; run best 50.2500"


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "--"), (5, "0:05"), (3725, "1:02:05"), (-3, "0:00")]
)
def test_durations_read_as_clock_times(seconds, text):
    assert format_duration(seconds) == text
