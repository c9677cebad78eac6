"""Live progress of a run: an `EventSink` (see `harness.observe.events`) that shows the step under
way.

On a terminal it draws, with rich, the G×R grid of the step with each rollout's stage —
`·` waiting, `g` guidance, `e` executor, `j` judge, `●` reported valid, `○` reported with a
candidate failure (reward 0), `✗` failed before reporting — above a line of counts, elapsed
time and an estimate of the time left. When the step's summary arrives the grid is replaced
by one line:

    step 3 | valid 121/128 | well-formed 128/128 | step best 87.9021 |
    run best 88.1183 (+1.3537) | grad norm 0.412 | tokens 1.23M (executor 1.10M, guidance
    0.13M) | cost $3.21

`step best` is the best valid score of that step alone; `run best` is the best of the whole run
(the seed included) after it, shown only when the run's best before the step is known (the
`run_started` event carries it), so a step worse than the seed is never called the best.

Not attached to a terminal (a log file, CI), it prints plain lines instead: one per finished
rollout, one per training phase change, errors, and the same summary line. The estimate is
throughput-based: elapsed × remaining / finished, which holds for a bounded worker pool.

Slightly over the project's ~400 lines: the terminal grid and the plain-line form read the same
events and share their state, so they stay one sink.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from harness.observe.cost import CostEstimate, PriceTable, StepUsage, Usage

log = logging.getLogger(__name__)

STAGES = ("guidance", "executor", "judge", "reported", "failed")
_GLYPHS = {
    None: ("·", "dim"),
    "guidance": ("g", "cyan"),
    "executor": ("e", "blue"),
    "judge": ("j", "magenta"),
    "failed": ("✗", "bold red"),
}


def format_duration(seconds: float | None) -> str:
    """`1:02:03`, `4:05` or `--` (unknown)."""
    if seconds is None:
        return "--"
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def counted(count: int, noun: str) -> str:
    """`1 step`, `2 steps`: a count with its noun, singular for one."""
    return f"{count} {noun if count == 1 else noun + 's'}"


def format_tokens(count: int) -> str:
    """`950`, `12.3k`, `1.23M`."""
    if count >= 1_000_000:
        return f"{count / 1e6:.2f}M"
    return f"{count / 1e3:.1f}k" if count >= 1000 else str(count)


def run_best(direction: str, previous: float | None, step_best: float | None) -> float | None:
    """The run's best score after a step: the better of the best before it and the step's own."""
    if previous is None or step_best is None:
        return step_best if previous is None else previous
    return max(previous, step_best) if direction == "max" else min(previous, step_best)


def summary_line(
    summary: Mapping[str, Any],
    *,
    previous_best: float | None = None,
    direction: str = "max",
    usage: StepUsage | None = None,
    cost: CostEstimate | None = None,
) -> str:
    """The one-line step summary from a `step_summary` event (keys in docs/observability.md;
    `step_best_raw_score` is the step's own best, `best_raw_score` the archive's). It
    shows the step's best, and the run's best after
    the step with its change from `previous_best` (the run's best before it, the seed included)
    when that is known; tokens by role and `cost` when given."""
    sampled = summary.get("sampled_rollouts", 0)
    parts = [
        f"step {summary.get('step')}",
        f"valid {summary.get('valid_rollouts')}/{sampled}",
        f"well-formed {summary.get('well_formed_guidance')}/{sampled}",
    ]
    step_best = summary.get("step_best_raw_score", summary.get("best_raw_score"))
    parts.append("step best --" if step_best is None else f"step best {step_best:.4f}")
    if previous_best is not None:
        best = run_best(direction, previous_best, step_best)
        parts.append(f"run best {best:.4f} ({best - previous_best:+.4f})")
    arm = summary.get("arm")
    if arm in ("unguided", "best-of-n"):
        parts.append(f"arm {arm} (no guidance model)")
    elif summary.get("mode") == "frozen":
        parts.append("frozen guidance (nothing trained)")
    else:
        grad = summary.get("grad_norm")
        degenerate = " (degenerate step)" if summary.get("degenerate_step") else ""
        parts.append(f"grad norm {'--' if grad is None else f'{grad:.4g}'}{degenerate}")
    if usage is not None:
        executor, guidance = usage.executor.total_tokens, usage.guidance.total_tokens
        guide = format_tokens(guidance) if usage.guidance.calls else "n/a"
        parts.append(
            f"tokens {format_tokens(executor + guidance)} "
            f"(executor {format_tokens(executor)}, guidance {guide})"
        )
    if cost is not None:
        parts.append(f"cost {cost.describe()}")
    return " | ".join(parts)


def _usage_from(raw: Any) -> Usage:
    return Usage.from_openai(raw) or Usage()


@dataclass
class _Step:
    step: int
    groups: int
    rollouts: int
    started: float
    stages: dict[tuple[int, int], str] = field(default_factory=dict)
    statuses: dict[tuple[int, int], str] = field(default_factory=dict)
    resumed: int = 0
    executor: Usage = field(default_factory=Usage)
    guidance: Usage = field(default_factory=Usage)
    training: str | None = None

    @property
    def total(self) -> int:
        return self.groups * self.rollouts

    def finished(self) -> int:
        return sum(1 for s in self.stages.values() if s in ("reported", "failed"))


class ProgressDisplay:
    """An event sink that renders progress (rich `Live` on a terminal, plain lines otherwise).

    `prices` and `models` ((guidance model, executor model)) let it estimate a step's cost when
    the `step_summary` event does not carry one; `best_so_far` (the archive's best when the run
    starts) and the score `direction` let it show how each step moved the run's best.
    Thread-safe; the `Fanout` sink keeps a rendering error from reaching the run. Call `close()`
    at the end of the run.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        plain: bool | None = None,
        prices: PriceTable | None = None,
        models: tuple[str, str] | None = None,
        best_so_far: float | None = None,
        direction: str = "max",
        clock: Callable[[], float] = time.monotonic,
        refresh_per_second: float = 4.0,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.plain = (not self.console.is_terminal) if plain is None else plain
        self._prices, self._models, self._clock = prices, models, clock
        self._refresh = refresh_per_second
        self._lock = threading.RLock()
        self._step: _Step | None = None
        self._live: Live | None = None
        self._best = best_so_far
        self._direction = direction

    # --- the sink -------------------------------------------------------------------------

    def emit(self, kind: str, **fields: Any) -> None:
        """Update the display for one event (unknown kinds are ignored)."""
        handler = getattr(self, f"_on_{kind}", None)
        if handler is None:
            return
        try:
            with self._lock:
                handler(fields)
        except Exception:  # an observer must never lose a rollout (events.py contract)
            log.exception("progress display failed on %s %s", kind, fields)

    def close(self) -> None:
        """Stop the live display, leaving the last frame on screen."""
        with self._lock:
            self._stop_live()

    # --- handlers ---------------------------------------------------------------------------

    def _on_run_started(self, f: dict[str, Any]) -> None:
        start_best = f.get("best_raw_score")
        if self._best is None and isinstance(start_best, int | float):
            self._best = float(start_best)
        self._line(
            f"run: steps {f.get('start_step')}..{(f.get('steps') or 1) - 1}, "
            f"{f.get('groups')}×{f.get('rollouts')} rollouts per step, state {f.get('state_dir')}"
        )

    def _on_step_started(self, f: dict[str, Any]) -> None:
        self._stop_live()
        step = _Step(int(f["step"]), int(f["groups"]), int(f["rollouts"]), self._clock())
        for g, r in (tuple(s) for s in f.get("resumed_slots") or ()):
            step.stages[(g, r)] = "reported"
            step.statuses[(g, r)] = "resumed"
            step.resumed += 1
        self._step = step
        resumed = f", {step.resumed} resumed from the journal" if step.resumed else ""
        self._line(f"step {step.step}: {step.groups}×{step.rollouts} rollouts{resumed}")
        if not self.plain:
            self._live = Live(
                console=self.console,
                get_renderable=self._render,
                refresh_per_second=self._refresh,
                transient=True,
            )
            self._live.start()

    def _on_rollout_stage(self, f: dict[str, Any]) -> None:
        step = self._current(f)
        if step is not None and f.get("stage") in STAGES:
            step.stages[(int(f["group"]), int(f["rollout"]))] = f["stage"]
            if f["stage"] == "failed":
                self._line(f"step {step.step} g{f['group']}r{f['rollout']}: failed", "red")

    def _on_rollout_finished(self, f: dict[str, Any]) -> None:
        step = self._current(f)
        if step is None:
            return
        slot = (int(f["group"]), int(f["rollout"]))
        step.statuses[slot] = str(f.get("status"))
        step.executor = step.executor + _usage_from(f.get("usage"))
        step.guidance = step.guidance + _usage_from(f.get("guidance_usage"))
        if not self.plain:
            return
        timings = f.get("timings") or {}
        score = f.get("raw_score")
        shown = f"{score:.4f}" if isinstance(score, int | float) else "-"
        spent = " ".join(
            f"{k.removesuffix('_s')} {v:.1f}s"
            for k, v in timings.items()
            if k != "total_s" and isinstance(v, int | float)
        )
        done = len(step.statuses)
        self._line(
            f"step {step.step} g{slot[0]}r{slot[1]} {f.get('status')} {shown} ({spent}) "
            f"[{done}/{step.total}, elapsed {format_duration(self._elapsed(step))}, "
            f"eta {format_duration(self._eta(step, done))}]"
        )

    def _on_training_wait(self, f: dict[str, Any]) -> None:
        step = self._step
        waited = format_duration(f.get("elapsed_s"))
        note = f"training step {f.get('step')}: {f.get('phase')} ({waited})"
        missing = f.get("missing_slots") or []
        if missing:
            note += f", Reef misses {len(missing)} slots"
        phase_changed = step is None or step.training != f.get("phase")
        if step is not None:
            step.training = str(f.get("phase"))
        if self.plain and phase_changed:
            self._line(note)

    def _on_step_summary(self, f: dict[str, Any]) -> None:
        self._stop_live()
        step = self._step if self._step and self._step.step == f.get("step") else None
        usage = _summary_usage(f, step)
        cost = _summary_cost(f)
        if cost is None and usage is not None and self._prices and self._models:
            cost = self._prices.estimate(usage.by_model(*self._models))
        before = f.get("previous_best_raw_score")  # the archive's, when the runner says it
        if isinstance(before, int | float) and not isinstance(before, bool):
            self._best = float(before)
        line = summary_line(
            f, previous_best=self._best, direction=self._direction, usage=usage, cost=cost
        )
        self.console.print(Text(line, style="bold"), soft_wrap=True)
        step_best = f.get("step_best_raw_score", f.get("best_raw_score"))
        self._best = run_best(
            self._direction, self._best, float(step_best) if step_best is not None else None
        )

    def _on_spend_warning(self, f: dict[str, Any]) -> None:
        maximum, value = f.get("maximum"), f.get("value")
        shown = (
            f"${value:,.4f} of ${maximum:,.4f}"
            if f.get("limit") == "max_cost_usd"
            else f"{int(value or 0):,} of {int(maximum or 0):,} tokens"
        )
        self._line(
            f"spend warning: {round(100 * float(f.get('fraction') or 0))} % of "
            f"{f.get('limit')} spent ({shown}); the run stops at the step boundary where it "
            "is reached",
            "bold yellow",
        )

    def _on_spend_limit_reached(self, f: dict[str, Any]) -> None:
        self._line(
            f"spend limit {f.get('limit')} reached before step {f.get('step')}: the run stops "
            "here; raise the limit in serve.yaml and run again to resume",
            "bold red",
        )

    def _on_step_committed(self, f: dict[str, Any]) -> None:
        self._line(f"step {f.get('step')} committed; next step {f.get('next_step')}", "green")

    def _on_run_finished(self, f: dict[str, Any]) -> None:
        self._stop_live()
        best = f.get("best_raw_score")
        shown = f"{best:.4f}" if isinstance(best, int | float) else "--"
        steps = f.get("next_step")
        done = counted(steps, "step") if isinstance(steps, int) else f"{steps} steps"
        self._line(f"run finished: {done} committed; run best {shown}")

    def _on_error(self, f: dict[str, Any]) -> None:
        self._line(f"error in {f.get('where')}: {f.get('message')}", "bold red")

    # --- rendering --------------------------------------------------------------------------

    def _current(self, f: Mapping[str, Any]) -> _Step | None:
        step = self._step
        return step if step is not None and step.step == f.get("step") else None

    def _elapsed(self, step: _Step) -> float:
        return self._clock() - step.started

    def _eta(self, step: _Step, done: int) -> float | None:
        fresh = done - step.resumed
        if fresh <= 0:
            return None
        return self._elapsed(step) * (step.total - done) / fresh

    def _line(self, text: str, style: str | None = None) -> None:
        if self._live is not None:
            self._live.console.print(Text(text, style=style or ""))
        else:
            self.console.print(Text(text, style=style or ""), soft_wrap=True)

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def counts(self) -> Counter[str]:
        """Rollouts of the current step per stage (`waiting` for those not started)."""
        with self._lock:
            step = self._step
            if step is None:
                return Counter()
            counts = Counter(
                step.stages.get((g, r), "waiting")
                for g in range(step.groups)
                for r in range(step.rollouts)
            )
            return counts

    def _render(self) -> Group:
        with self._lock:
            step = self._step
            if step is None:
                return Group(Text("waiting for a step"))
            grid = Table.grid(padding=(0, 1))
            grid.add_column(justify="right", style="dim")
            grid.add_column()
            for g in range(step.groups):
                row = Text()
                for r in range(step.rollouts):
                    row.append(*self._glyph(step, (g, r)))
                grid.add_row(f"g{g}", row)
            counts = self.counts()
            done = step.finished()
            reported = Counter(
                step.statuses.get(slot)
                for slot, stage in step.stages.items()
                if stage == "reported"
            )
            candidate_failures = sum(
                n for status, n in reported.items() if status not in (None, "valid", "resumed")
            )
            resumed = f" · resumed {step.resumed}" if step.resumed else ""
            flight = ", ".join(f"{k} {counts[k]}" for k in ("guidance", "executor", "judge"))
            header = Text(
                f"step {step.step} · {done}/{step.total} done · valid {reported['valid']} · "
                f"candidate failures {candidate_failures} · failed {counts['failed']}{resumed} · "
                f"in flight: {flight} · "
                f"elapsed {format_duration(self._elapsed(step))} · "
                f"eta {format_duration(self._eta(step, done))}"
            )
            parts: list[Any] = [header, grid]
            if step.training:
                parts.append(Text(f"training: {step.training}", style="yellow"))
            return Group(*parts)

    @staticmethod
    def _glyph(step: _Step, slot: tuple[int, int]) -> tuple[str, str]:
        stage = step.stages.get(slot)
        if stage == "reported":
            status = step.statuses.get(slot)
            return ("●", "green") if status in ("valid", "resumed") else ("○", "yellow")
        return _GLYPHS.get(stage, _GLYPHS[None])


def _summary_usage(f: Mapping[str, Any], step: _Step | None) -> StepUsage | None:
    """The step's usage by role: the summary's own `usage` block (the loop builds it from the
    step's entries with `harness.observe.cost.usage_by_step`), else what the rollout events
    reported."""
    raw = f.get("usage")
    if isinstance(raw, Mapping):
        return StepUsage(
            int(f.get("step", -1)),
            _usage_from(raw.get("executor")),
            _usage_from(raw.get("guidance")),
        )
    if step is not None:
        return StepUsage(step.step, step.executor, step.guidance)
    return None


def _summary_cost(f: Mapping[str, Any]) -> CostEstimate | None:
    raw = f.get("cost")
    if not isinstance(raw, Mapping):
        return None
    priced = raw.get("usd") if raw.get("usd") is not None else raw.get("priced_usd")
    if isinstance(priced, int | float):
        return CostEstimate(float(priced), tuple(raw.get("unpriced_models") or ()))
    return None
