"""The barrier's `training_wait` events: emitted exactly when the progress line is logged, with
the bridge phase and the slots Reef's status page still misses. Real status server, real
`events.jsonl`, the training-bridge fake (no GPU training here), and the live display reading
the same events."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from bridge_fake import BridgeFaults, status_page
from rich.console import Console
from test_run_controller import LOG, MIXED, SCENARIO, Rig, outcome, rig

from harness.observe.events import EventLog, read_events
from harness.observe.progress import ProgressDisplay
from harness.run.controller import TrainingTimeoutError

__all__ = ["rig"]  # the fixture, from test_run_controller.py

WAITING = "waiting for Reef training"


def _waits(path: Path) -> list[dict[str, Any]]:
    return [e for e in read_events(path) if e["event"] == "training_wait"]


def test_wait_through_awaiting_commit_emits_phase_and_missing_slot(
    rig: Rig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Slot g1r3 arrives late: Reef's status lists it for the first three reads, then Reef trains
    the step through every phase. Each logged progress line has its event, in order."""

    def page() -> dict[str, Any]:
        late = rig.server.requests <= 3  # counts this request
        return status_page(SCENARIO, open_steps={0: [(1, 3)]} if late else {})

    rig.server.page = page
    rig.new_bridge(
        polls_per_phase=2, reports_source=lambda step: MIXED if rig.server.requests > 3 else None
    )
    log_path = tmp_path / "events.jsonl"
    sink = EventLog(log_path)
    controller = rig.controller(events=sink)
    controller.begin()
    with caplog.at_level(logging.INFO, logger=LOG):
        controller.complete_step(outcome(0))
    sink.close()

    waits = _waits(log_path)
    assert [(e["phase"], e["missing_slots"]) for e in waits] == [
        ("serving", [[1, 3]]),  # the bridge is idle: Reef has not got the whole grid yet
        ("serving", []),
        ("training", []),
        ("checkpointing", []),
        ("publishing", []),
        ("awaiting_commit", []),
    ]
    assert {e["step"] for e in waits} == {0}
    elapsed = [e["elapsed_s"] for e in waits]
    assert all(isinstance(x, float) for x in elapsed) and elapsed == sorted(elapsed)
    logged = [r.getMessage() for r in caplog.records if WAITING in r.getMessage()]
    assert len(logged) == len(waits), "one event per logged progress line"
    assert "missing slots: g1r3" in logged[0] and "phase awaiting_commit" in logged[-1]
    assert rig.commits[0]["step"] == 0

    # The live display reads the same field names the controller writes.
    buffer = io.StringIO()
    display = ProgressDisplay(Console(file=buffer, force_terminal=False, width=140))
    for event in waits:
        display.emit(
            "training_wait", **{k: v for k, v in event.items() if k not in ("ts", "event")}
        )
    shown = buffer.getvalue().splitlines()
    waited = r"\(\d+:\d\d\)"  # format_duration of elapsed_s
    assert re.fullmatch(rf"training step 0: serving {waited}, Reef misses 1 slots", shown[0])
    assert re.fullmatch(rf"training step 0: awaiting_commit {waited}", shown[-1])


def test_training_wait_follows_the_log_throttle_on_an_unchanged_wait(
    rig: Rig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With an unchanged progress note the line (and the event) repeats only every
    `log_every_s`; at 0 s that is every poll, until the deadline."""
    bridge = rig.new_bridge(faults=BridgeFaults(stall_in="checkpointing"))
    bridge.submit_step(0, MIXED)
    log_path = tmp_path / "events.jsonl"
    sink = EventLog(log_path)
    controller = rig.controller(events=sink, deadline_s=1.0, log_every_s=0.0)
    controller.begin()
    with caplog.at_level(logging.INFO, logger=LOG), pytest.raises(TrainingTimeoutError):
        controller.complete_step(outcome(0))
    sink.close()

    waits = _waits(log_path)
    logged = [r for r in caplog.records if WAITING in r.getMessage()]
    assert len(waits) == len(logged) > 5  # more than one per phase: repeated by the clock
    assert waits[-1]["phase"] == "checkpointing" and waits[-1]["missing_slots"] == []
    assert waits[-1]["elapsed_s"] >= 0.8
