"""What the read-only `guidance-ttt` commands show: the status report and its table, the
inspect tables (the plots are `harness.cli.plots`).

`status_report` gathers plain data (it probes Reef and the judge over HTTP but never raises for a
service that is down); the `render_*` functions only print. Argument
parsing and dispatch live in `harness.cli.entry`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import results
from harness.adapters.reef.status import ReefStatusClient, format_slots, read_step_status
from harness.observe.cost import PriceTable, Usage
from harness.observe.progress import format_duration, format_tokens
from harness.observe.terminal import escape_terminal

HEALTH_TIMEOUT_S = 3.0
#: Where a missing price is set (docs/observability.md, "What did it cost?"), by run mode.
PRICING_KEYS = {
    "trained": "training.config.harness.pricing",
    "frozen": "recipe.config.guidance-ttt.harness.pricing",
}


def price_hint(models: Any, mode: str, settings_file: str | Path | None) -> str:
    """`set recipe.config.guidance-ttt.harness.pricing.M: {input_per_mtok: …, …} in FILE (or
    --pricing FILE)`: the exact key for the run's own settings file and its mode."""
    key = PRICING_KEYS.get(mode, PRICING_KEYS["trained"])
    where = Path(settings_file).name if settings_file else "the run's settings file"
    listed = ", ".join(f"{key}.{m}" for m in models) or key
    return (
        f"set {listed}: {{input_per_mtok: USD, output_per_mtok: USD}} in {where} "
        "(or --pricing FILE)"
    )


# --- where the services are ---------------------------------------------------------------------


@dataclass(frozen=True)
class Services:
    """Where Reef and the judge listen, the Reef token and scenario (from serve.yaml or flags)."""

    reef_url: str
    judge_url: str
    token: str | None
    scenario: str | None
    config: Path | None


def probe(url: str, token: str | None = None, timeout_s: float = HEALTH_TIMEOUT_S) -> str:
    """`ok` when GET `url` answers 200 within `timeout_s`, else `unreachable (...)` or
    `unhealthy (HTTP n)`; never raises."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"unreachable ({type(exc).__name__})"
    return "ok" if response.status_code == 200 else f"unhealthy (HTTP {response.status_code})"


# --- status ------------------------------------------------------------------------------------


def status_report(
    view: results.RunView,
    services: Services,
    prices: PriceTable,
    *,
    timeout_s: float = HEALTH_TIMEOUT_S,
    guidance: dict[str, Usage] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Everything `status` shows, as plain data: where the run is, its best score, the health of
    Reef and the judge, the missing slots of the open step, the tokens and the cost so far."""
    direction = view.direction
    rows = results.trajectory(view.archive, "run", view.committed_step)
    started = view.events_of("run_started")
    steps_total = started[-1].get("steps") if started else None
    summaries = list(view.resume.step_summaries) if view.resume else []
    last_event = view.events[-1] if view.events else None
    reef = probe(services.reef_url.rstrip("/") + "/healthz", services.token, timeout_s)
    reef_missing = None
    if reef == "ok" and services.scenario:
        client = ReefStatusClient(services.reef_url, token=services.token, timeout_s=timeout_s)
        try:
            page = client.fetch()
            slots = read_step_status(page, services.scenario, view.next_step).missing_slots
            reef_missing = None if slots is None else [list(s) for s in slots]
        except Exception as exc:  # a status page we cannot read degrades the report only
            reef = f"ok (status page unreadable: {exc})"
        finally:
            client.close()
    usage, cost = results.run_cost(view, prices, guidance)
    committed = view.committed_step + 1
    projection = None
    if committed >= 1 and isinstance(steps_total, int) and steps_total > committed:
        spent, spent_cost = results.run_cost(view, prices, guidance, in_flight=False)
        factor = steps_total / committed
        projection = {
            "steps": steps_total,
            "from_steps": committed,
            "tokens": round((spent.executor.total_tokens + spent.guidance.total_tokens) * factor),
            "usd": None if spent_cost.unpriced else round(spent_cost.usd * factor, 6),
        }
    finished = not view.in_flight and (
        (isinstance(steps_total, int) and committed >= steps_total)
        or any(e.get("next_step") == view.next_step for e in view.events_of("run_finished"))
    )
    judge = probe(services.judge_url.rstrip("/") + "/health", None, timeout_s)
    if finished:  # a finished run's services are expected to be gone
        reef, judge = (_after_the_run(health) for health in (reef, judge))
    return {
        "state_dir": str(view.state_dir),
        "mode": results.run_mode(view),
        "task_text": results.run_task_text(view),
        "arm": results.run_arm(view),
        "run_seed": results.run_seed(view),
        "requests": results.run_requests(view),
        "suite": results.run_suite(view),
        "seed_rescored_from": results.seed_rescored(view),
        "next_step": view.next_step,
        "committed_steps": committed,
        "steps_total": steps_total,
        "finished": finished,
        "grid": [view.archive.config.groups_per_batch, view.archive.config.rollout_n],
        "score_direction": direction,
        "seed_score": rows[0].cumulative_best,
        "best_score": rows[-1].cumulative_best,
        "best_step": results.best_step(rows, direction),
        "last_step": summaries[-1] if summaries else None,
        "in_flight": {
            "step": view.next_step,
            "journaled": len(view.in_flight),
            "missing_slots": [list(s) for s in view.missing_slots()] if view.in_flight else None,
        },
        "reef": {"url": services.reef_url, "health": reef, "missing_slots": reef_missing},
        "judge": {"url": services.judge_url, "health": judge},
        "last_event": None
        if last_event is None
        else {
            "event": last_event.get("event"),
            "age_s": (now or time.time()) - float(last_event.get("ts", 0.0)),
        },
        "usage": usage.to_dict(),
        "cost": cost.to_dict(),
        "cost_text": cost.describe(),
        "settings_file": (started[-1].get("settings_file") if started else None)
        or (str(services.config) if services.config else None),
        "projected_total": projection,
    }


def _after_the_run(health: str) -> str:
    """A finished run's service health: "not running (the run is finished)" for one that no
    longer answers, as it should not."""
    return health if health.startswith("ok") else "not running (the run is finished)"


def render_status(report: dict[str, Any], console: Console) -> None:
    """Print a `status_report` as a two-column table: run, step, best score, last step, open
    step, the health of Reef and the judge, the last event, tokens and cost. Rows whose data
    the report lacks (no step summary yet, no open step, no event) are left out."""
    table = Table(box=None, show_header=False, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")

    def add_row(name: str, value: str) -> None:  # text, never markup; controls escaped
        table.add_row(name, Text(escape_terminal(value, multiline=False)))

    g, r = report["grid"]
    add_row("run", f"{report['state_dir']} ({report.get('mode', 'trained')})")
    add_row("suite", suite_text(report.get("suite"), report.get("seed_rescored_from")))
    add_row("task text", str(report.get("task_text", "full")))
    if report.get("arm"):
        seed = report.get("run_seed")
        add_row("arm", f"{report['arm']}" + ("" if seed is None else f", run seed {seed}"))
    requests = report.get("requests") or {}
    if any(requests.values()):
        shown = [f"{who} {how}" for who, how in requests.items() if how]
        add_row("requests", "; ".join(shown))
    add_row("step", step_text(report))
    add_row("best score", best_text(report))
    last = report["last_step"]
    if last:
        grad = last.get("grad_norm")
        trained = (
            "not trained (frozen)"
            if report.get("mode") == "frozen"
            else f"grad norm {'--' if grad is None else f'{grad:.4g}'}"
        )
        add_row(
            "last step",
            f"step {last['step']}: valid {last['valid_rollouts']}/{last['sampled_rollouts']}, "
            f"well-formed {last['well_formed_guidance']}/{last['sampled_rollouts']}, {trained}, "
            f"{format_duration(last['elapsed_s'])}",
        )
    flight = report["in_flight"]
    if flight["missing_slots"] is not None:
        missing = format_slots(tuple(tuple(s) for s in flight["missing_slots"]))
        add_row(
            "open step",
            f"step {flight['step']}: {flight['journaled']}/{g * r} journaled; missing {missing}",
        )
    reef = report["reef"]
    reef_note = reef["health"]
    if reef["missing_slots"] is not None:
        reef_note += f"; Reef still misses {format_slots(tuple(map(tuple, reef['missing_slots'])))}"
    add_row("reef", f"{reef['url']} {reef_note}")
    add_row("judge", f"{report['judge']['url']} {report['judge']['health']}")
    if report["last_event"]:
        age = format_duration(report["last_event"]["age_s"])
        add_row("last event", f"{report['last_event']['event']}, {age} ago")
    usage = report["usage"]
    guide = usage["guidance"]
    guide_text = (
        f"guidance {format_tokens(guide['prompt_tokens'] + guide['completion_tokens'])} "
        f"({guide['calls']} calls)"
        if guide["calls"]
        else "guidance not recorded (add --reef-records to read Reef's records)"
    )
    executor = usage["executor"]
    add_row(
        "tokens",
        f"executor {format_tokens(executor['prompt_tokens'] + executor['completion_tokens'])} "
        f"({executor['calls']} calls), {guide_text}",
    )
    cost_text = report["cost_text"]
    if report["cost"]["unpriced_models"]:
        unpriced = report["cost"]["unpriced_models"]
        hint = price_hint(unpriced, report.get("mode", "trained"), report.get("settings_file"))
        cost_text += f"; {hint}"
    add_row("cost so far", cost_text)
    projected = report.get("projected_total")
    if projected:
        usd = "cost unknown" if projected["usd"] is None else f"${projected['usd']:,.2f}"
        add_row(
            "projected",
            f"total {format_tokens(projected['tokens'])} tokens, {usd} at "
            f"{projected['steps']} steps (what {projected['from_steps']} committed steps "
            "spent, scaled)",
        )
    console.print(table)


def step_text(report: dict[str, Any]) -> str:
    """The `step` row: `finished, 2 of 2 steps committed, 2×4`, `3 in progress (…)` or
    `3 next to run (…)`."""
    total, committed = report["steps_total"], report["committed_steps"]
    g, r = report["grid"]
    of_total = f" of {total}" if total else ""
    if report.get("finished"):
        noun = "step" if (total or committed) == 1 else "steps"
        return f"finished, {committed}{of_total} {noun} committed, {g}×{r}"
    state = "in progress" if report["in_flight"]["journaled"] else "next to run"
    return f"{report['next_step']} {state} ({committed}{of_total} committed), {g}×{r}"


def best_text(report: dict[str, Any]) -> str:
    """The `best score` row: the best, the step that reached it (or the seed), the seed's score
    and the gain over it, and the score direction."""
    best, seed, direction = report["best_score"], report["seed_score"], report["score_direction"]
    better = "higher" if direction == "max" else "lower"
    if report["best_step"] is None:
        return f"{best:.4f}, the seed's (no step beat it yet); {better} is better"
    step = report["best_step"]
    return f"{best:.4f} at step {step}; seed {seed:.4f} ({best - seed:+.4f}); {better} is better"


# --- inspect -----------------------------------------------------------------------------------


#: The most of one summary or guidance an inspect table shows (wrapped, never cut mid-table).
CELL_LIMIT = 600


def _cell(text: str, limit: int = CELL_LIMIT) -> Text:
    """Model-written text for a table cell: whitespace flattened, bounded, escaped, never markup."""
    flat = " ".join(escape_terminal(text, multiline=False).split())
    return Text(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _step_label(entry: Any) -> str:
    return "seed" if entry.timestep == 0 else str(entry.timestep - 1)


def suite_text(suite: str | None, rescored_from: dict[str, Any] | None) -> str:
    """One line naming the suite every score of the run was measured on."""
    if suite is None:
        return "not recorded (a run from before suites were recorded)"
    if rescored_from:
        return (
            f"{suite} (seed re-scored at start; seed file: "
            f"{rescored_from.get('score', 0.0):.4f} on {rescored_from.get('suite')})"
        )
    return suite


def inspect_report(view: results.RunView, top: int, cases: int) -> dict[str, Any]:
    """Everything `inspect` shows, as plain data (`inspect --json`), ids in full. The best
    candidates are the run's (`harness.archive.best`: entries, whether or not they became
    archive nodes), so a best-of-n run lists what it found."""
    archive = view.archive

    def entry_row(entry: Any) -> dict[str, Any]:
        node = results.node_of(archive, entry)
        parent = results.parent_score(archive, entry) if entry.timestep else None
        return {
            "score": entry.verifier_raw_score,
            "step": None if entry.timestep == 0 else entry.timestep - 1,
            "entry_id": entry.id,
            "node_id": None if node is None else node.id,
            "parent_score": parent,
            "summary": entry.summary,
            "guidance": entry.guidance,
        }

    best = results.best_entries(archive, top)
    return {
        "state_dir": str(view.state_dir),
        "mode": results.run_mode(view),
        "suite": results.run_suite(view),
        "seed_rescored_from": results.seed_rescored(view),
        "score_direction": view.direction,
        "best": [entry_row(entry) for entry in best],
        "lineage_of_best": [entry_row(e) for e in results.entry_lineage(archive, best[0])]
        if best
        else [],
        "outcomes_per_step": {
            str(step): dict(counts) for step, counts in results.failure_modes(archive).items()
        },
        "case_studies": [
            {
                "step": case.update - 1,
                "entry_id": case.entry.id,
                "node_id": case.node_id,
                "parent_score": case.parent_score,
                "candidate_score": case.candidate_score,
                "gain": case.gain,
                "guidance": case.entry.guidance,
                "summary": case.entry.summary,
            }
            for case in results.case_studies(archive, cases)
        ],
    }


def render_inspect(view: results.RunView, console: Console, top: int, cases: int) -> None:
    """Print what a run found: the `top` best candidates, the lineage of the best one with the
    guidance behind each generation, the outcome counts per step, and `cases` case studies of
    the largest parent-to-child gains (only children that improved on their parent). Steps are
    numbered as `status` and the progress display number them; every id is an entry id (what
    `show` opens), shortened to 8 characters in tables, in full in the case studies. Summaries
    and guidance wrap in their column; model text is shown escaped."""
    archive = view.archive
    suite = suite_text(results.run_suite(view), results.seed_rescored(view))
    console.print(Text(f"{results.run_mode(view)} run; scores on suite {suite}"))
    seed = results.run_seed(view)
    console.print(f"arm {results.run_arm(view)}" + ("" if seed is None else f", run seed {seed}"))
    table = Table(title="Best candidates", box=box.SIMPLE_HEAD, expand=True)
    for column in ("#", "score", "step", "entry", "parent"):
        table.add_column(column, no_wrap=True)
    table.add_column("summary", overflow="fold", ratio=1)
    best = results.best_entries(archive, top)
    for rank, entry in enumerate(best, 1):
        parent = results.parent_score(archive, entry) if entry.timestep else None
        table.add_row(
            str(rank),
            f"{entry.verifier_raw_score:.4f}",
            _step_label(entry),
            entry.id[:8],
            "-" if parent is None else f"{parent:.4f}",
            _cell(entry.summary),
        )
    console.print(table)

    if best:
        chain = Table(title="Lineage of the best", box=box.SIMPLE_HEAD, expand=True)
        for column in ("gen", "step", "score", "change", "entry"):
            chain.add_column(column, no_wrap=True)
        chain.add_column("guidance that produced it", overflow="fold", ratio=1)
        previous = None
        for gen, entry in enumerate(results.entry_lineage(archive, best[0])):
            score = float(entry.verifier_raw_score)
            change = "" if previous is None else f"{score - previous:+.4f}"
            guidance = Text("(seed)") if entry.timestep == 0 else _cell(entry.guidance)
            chain.add_row(
                str(gen), _step_label(entry), f"{score:.4f}", change, entry.id[:8], guidance
            )
            previous = score
        console.print(chain)

    modes = results.failure_modes(archive)
    kinds = sorted({k for counts in modes.values() for k in counts}, key=lambda k: k != "valid")
    failures = Table(title="Outcomes per step", box=box.SIMPLE_HEAD)
    failures.add_column("step")
    for kind in kinds:
        failures.add_column(Text(kind.replace("_", " ")), justify="right")
    for step, counts in modes.items():
        failures.add_row(str(step), *(str(counts.get(k, 0)) for k in kinds))
    console.print(failures)

    studies = results.case_studies(archive, cases)
    if cases and not studies:
        console.print(Text("No case studies: no valid child improved on its parent yet.\n"))
    for number, case in enumerate(studies, 1):
        console.print(
            Text(
                f"Case {number}: step {case.update - 1}, parent {case.parent_score:.4f} → "
                f"child {case.candidate_score:.4f} ({case.gain:+.4f})",
                style="bold",
            )
        )
        for label, body in (
            ("guidance:", case.entry.guidance),
            ("executor's summary of the child:", case.entry.summary),
        ):
            console.print(Text(label, style="italic"))
            console.print(Text("  " + escape_terminal(body.strip()).replace("\n", "\n  ")))
        kept = "" if case.node_id else " (not kept as an archive node)"
        console.print(Text(f"entry {case.entry.id}{kept}\n"))
