"""`guidance-ttt`: one command to check a machine, watch a run, read what it found and publish it.

    guidance-ttt doctor [flags]      can this machine run? (exit 1 naming what is missing)
    guidance-ttt status STATE        where is the run: step, best, health, missing slots, cost
    guidance-ttt inspect STATE       what did it find: best, lineage, failures, case studies
    guidance-ttt plot STATE|CSV      PNG of the cumulative best and the valid fraction
    guidance-ttt export STATE        results records: runs.json + trajectory.csv
    guidance-ttt judge [flags]       start the local judge

Everything but `doctor` and `judge` only reads the state directory (no lock, safe while a run
writes it). Exit status: 0 on success, 1 when the command ran but found a problem (doctor), 2 for
a bad argument or a directory that holds no run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import results
from harness.cost import PriceTable, ReefRecordUsage, Usage, load_prices
from harness.progress import format_duration, format_tokens
from harness.reef_status import ReefStatusClient, format_slots, read_step_status
from harness.run_settings import RunSettings, RunSettingsError

DEFAULT_REEF_URL = "http://127.0.0.1:8900"
DEFAULT_JUDGE_URL = "http://127.0.0.1:8081"
HEALTH_TIMEOUT_S = 3.0


# --- where the services are ---------------------------------------------------------------------


@dataclass(frozen=True)
class Services:
    """Where Reef and the judge listen, the Reef token and scenario (from serve.yaml or flags)."""

    reef_url: str
    judge_url: str
    token: str | None
    scenario: str | None
    config: Path | None


def _services(args: argparse.Namespace) -> Services:
    settings = None
    config = Path(args.config) if args.config else None
    try:
        settings = RunSettings.load(config) if config else RunSettings.load()
    except (RunSettingsError, OSError):
        settings = None
    env_judge = os.environ.get("FRONTIERCS_JUDGE_URL")
    return Services(
        reef_url=args.reef_url or (settings.reef_url if settings else DEFAULT_REEF_URL),
        judge_url=args.judge_url
        or env_judge
        or (settings.judge_url if settings else DEFAULT_JUDGE_URL),
        token=settings.reef_token if settings else os.environ.get("REEF_TOKEN", "reef-local"),
        scenario=args.scenario or (settings.scenario if settings else None),
        config=settings.config_path if settings else None,
    )


def probe(url: str, token: str | None = None, timeout_s: float = HEALTH_TIMEOUT_S) -> str:
    """`ok` when GET `url` answers 200 within `timeout_s`, else `unreachable (...)` or
    `unhealthy (HTTP n)`; never raises."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"unreachable ({type(exc).__name__})"
    return "ok" if response.status_code == 200 else f"unhealthy (HTTP {response.status_code})"


def _guidance_usage(view: results.RunView, services: Services, enabled: bool) -> dict[str, Usage]:
    """Guidance usage from Reef's records, for entries whose metadata lacks it (opt-in)."""
    if not enabled or not services.scenario:
        return {}
    receipts = [
        str(e.metadata.get("agent_record_id"))
        for e in [*view.archive.entries.values(), *(x for _, _, x in view.in_flight)]
        if e.timestep >= 1 and "guidance_response_usage" not in e.metadata
    ]
    with ReefRecordUsage(services.reef_url, services.scenario, token=services.token) as reader:
        return reader.fetch(receipts)


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
    return {
        "state_dir": str(view.state_dir),
        "next_step": view.next_step,
        "committed_steps": view.committed_step + 1,
        "steps_total": steps_total,
        "grid": [view.archive.config.groups_per_batch, view.archive.config.rollout_n],
        "score_direction": direction,
        "seed_score": rows[0].cumulative_best,
        "best_score": rows[-1].cumulative_best,
        "best_update": results.best_update(rows, direction),
        "last_step": summaries[-1] if summaries else None,
        "in_flight": {
            "step": view.next_step,
            "journaled": len(view.in_flight),
            "missing_slots": [list(s) for s in view.missing_slots()] if view.in_flight else None,
        },
        "reef": {"url": services.reef_url, "health": reef, "missing_slots": reef_missing},
        "judge": {
            "url": services.judge_url,
            "health": probe(services.judge_url.rstrip("/") + "/health", None, timeout_s),
        },
        "last_event": None
        if last_event is None
        else {
            "event": last_event.get("event"),
            "age_s": (now or time.time()) - float(last_event.get("ts", 0.0)),
        },
        "usage": usage.to_dict(),
        "cost": cost.to_dict(),
        "cost_text": cost.describe(),
    }


def _render_status(report: dict[str, Any], console: Console) -> None:
    table = Table(box=None, show_header=False, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    total = report["steps_total"]
    g, r = report["grid"]
    state = "in progress" if report["in_flight"]["journaled"] else "next to run"
    of_total = f" of {total}" if total else ""
    table.add_row("run", report["state_dir"])
    table.add_row(
        "step",
        f"{report['next_step']} {state} ({report['committed_steps']}{of_total} committed), {g}×{r}",
    )
    gain = report["best_score"] - report["seed_score"]
    table.add_row(
        "best score",
        f"{report['best_score']:.4f} at update {report['best_update']} "
        f"(seed {report['seed_score']:.4f}, {gain:+.4f}; {report['score_direction']} is better)",
    )
    last = report["last_step"]
    if last:
        grad = last.get("grad_norm")
        table.add_row(
            "last step",
            f"step {last['step']}: valid {last['valid_rollouts']}/{last['sampled_rollouts']}, "
            f"well-formed {last['well_formed_guidance']}/{last['sampled_rollouts']}, grad norm "
            f"{'--' if grad is None else f'{grad:.4g}'}, {format_duration(last['elapsed_s'])}",
        )
    flight = report["in_flight"]
    if flight["missing_slots"] is not None:
        missing = format_slots(tuple(tuple(s) for s in flight["missing_slots"]))
        table.add_row(
            "open step",
            f"step {flight['step']}: {flight['journaled']}/{g * r} journaled; missing {missing}",
        )
    reef = report["reef"]
    reef_note = reef["health"]
    if reef["missing_slots"] is not None:
        reef_note += f"; Reef still misses {format_slots(tuple(map(tuple, reef['missing_slots'])))}"
    table.add_row("reef", f"{reef['url']} {reef_note}")
    table.add_row("judge", f"{report['judge']['url']} {report['judge']['health']}")
    if report["last_event"]:
        age = format_duration(report["last_event"]["age_s"])
        table.add_row("last event", f"{report['last_event']['event']}, {age} ago")
    usage = report["usage"]
    guide = usage["guidance"]
    guide_text = (
        f"guidance {format_tokens(guide['prompt_tokens'] + guide['completion_tokens'])} "
        f"({guide['calls']} calls)"
        if guide["calls"]
        else "guidance not recorded (add --reef-records to read Reef's records)"
    )
    executor = usage["executor"]
    table.add_row(
        "tokens",
        f"executor {format_tokens(executor['prompt_tokens'] + executor['completion_tokens'])} "
        f"({executor['calls']} calls), {guide_text}",
    )
    table.add_row("cost so far", report["cost_text"])
    console.print(table)


# --- inspect -----------------------------------------------------------------------------------


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _render_inspect(view: results.RunView, console: Console, top: int, cases: int) -> None:
    archive = view.archive
    table = Table(title="Best candidates", box=box.SIMPLE_HEAD)
    for column in ("#", "score", "update", "node", "parent score", "summary"):
        table.add_column(column, overflow="fold")
    for rank, node in enumerate(results.best_nodes(archive, top), 1):
        entry = archive.entry_of(node.id)
        parent = results.parent_score(archive, entry) if entry.timestep else None
        table.add_row(
            str(rank),
            f"{node.raw_score:.4f}",
            str(node.timestep),
            node.id[:8],
            "-" if parent is None else f"{parent:.4f}",
            _short(entry.summary, 70),
        )
    console.print(table)

    best = results.best_nodes(archive, 1)
    if best:
        chain = Table(title="Lineage of the best", box=box.SIMPLE_HEAD)
        for column in ("gen", "update", "score", "change", "entry", "guidance that produced it"):
            chain.add_column(column, overflow="fold")
        previous = None
        for gen, node in enumerate(results.lineage(archive, best[0].id)):
            entry = archive.entry_of(node.id)
            change = "" if previous is None else f"{node.raw_score - previous:+.4f}"
            guidance = "(seed)" if entry.timestep == 0 else _short(entry.guidance, 70)
            chain.add_row(
                str(gen), str(node.timestep), f"{node.raw_score:.4f}", change, entry.id, guidance
            )
            previous = node.raw_score
        console.print(chain)

    modes = results.failure_modes(archive)
    kinds = sorted({k for counts in modes.values() for k in counts}, key=lambda k: k != "valid")
    failures = Table(title="Outcomes per step", box=box.SIMPLE_HEAD)
    failures.add_column("step")
    for kind in kinds:
        failures.add_column(kind, justify="right")
    for step, counts in modes.items():
        failures.add_row(str(step), *(str(counts.get(k, 0)) for k in kinds))
    console.print(failures)

    for number, case in enumerate(results.case_studies(archive, cases), 1):
        console.print(
            Text(
                f"Case {number}: update {case.update}, parent {case.parent_score:.4f} → "
                f"child {case.candidate_score:.4f} ({case.gain:+.4f})",
                style="bold",
            )
        )
        console.print(Text("guidance:", style="italic"))
        console.print(Text("  " + case.entry.guidance.strip().replace("\n", "\n  ")))
        console.print(Text("executor's summary of the child:", style="italic"))
        console.print(Text("  " + case.entry.summary.strip().replace("\n", "\n  ")))
        console.print(Text(f"entry {case.entry.id}  node {case.node_id}  update {case.update}\n"))


# --- plot ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlotData:
    """The series a plot drew, read back from the figure (so tests compare what is on it)."""

    updates: list[int]
    cumulative_best: list[float]
    seed: float
    valid_fraction: list[float]  # updates 1..n


def plot_trajectory(rows: Sequence[results.TrajectoryRow], path: Path, title: str) -> PlotData:
    """Draw the cumulative best per update (with the seed as a dashed line) above the valid
    fraction per update, save a PNG at `path`, and return the series as drawn."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = sorted(rows, key=lambda r: r.update)
    updates = [r.update for r in rows]
    best = [r.cumulative_best for r in rows]
    stepped = [r for r in rows if r.update > 0 and r.sampled_rollouts]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, height_ratios=(2, 1))
    try:
        (line,) = top.plot(
            updates, best, drawstyle="steps-post", marker="o", markersize=3, label="cumulative best"
        )
        seed_line = top.axhline(best[0], linestyle="--", color="gray", label="seed")
        top.set_ylabel("cumulative best score")
        top.set_title(title)
        top.legend(loc="best")
        top.grid(alpha=0.3)
        bars = bottom.bar(
            [r.update for r in stepped],
            [(r.valid_rollouts or 0) / r.sampled_rollouts for r in stepped],
            color="tab:green",
        )
        bottom.set_ylim(0, 1.05)
        bottom.set_ylabel("valid fraction")
        bottom.set_xlabel("update")
        bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
        bottom.grid(alpha=0.3)
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=120)
        return PlotData(
            [int(x) for x in line.get_xdata()],
            [float(y) for y in line.get_ydata()],
            float(seed_line.get_ydata()[0]),
            [float(bar.get_height()) for bar in bars],
        )
    finally:
        plt.close(figure)


def _plot_rows(args: argparse.Namespace) -> tuple[list[results.TrajectoryRow], str]:
    source = Path(args.source)
    if source.is_file():
        rows = results.read_trajectory_csv(source)
        tasks = sorted({r.task for r in rows})
        task = args.task or (tasks[0] if len(tasks) == 1 else None)
        if task is None:
            raise ValueError(f"{source} holds tasks {tasks}; choose one with --task")
        chosen = [r for r in rows if r.task == task]
        if not chosen:
            raise ValueError(f"{source} has no rows for task {task!r} (tasks: {tasks})")
        return chosen, task
    view = results.load_run(source)
    task = args.task or results.seed_entry(view.archive).problem_id
    return results.trajectory(view.archive, task, view.committed_step), task


# --- commands ------------------------------------------------------------------------------------


def _cmd_status(args: argparse.Namespace, console: Console) -> int:
    view = results.load_run(args.state_dir)
    services = _services(args)
    guidance = _guidance_usage(view, services, args.reef_records)
    report = status_report(
        view,
        services,
        load_prices(args.pricing, serve_yaml=services.config),
        timeout_s=args.timeout,
        guidance=guidance,
    )
    if args.json:
        console.print_json(json.dumps(report))
    else:
        _render_status(report, console)
    return 0


def _cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    view = results.load_run(args.state_dir)
    _render_inspect(view, console, args.top, args.cases)
    return 0


def _cmd_plot(args: argparse.Namespace, console: Console) -> int:
    rows, task = _plot_rows(args)
    out = Path(args.output or f"{task}-trajectory.png")
    data = plot_trajectory(rows, out, args.title or f"{task}: cumulative best per update")
    console.print(f"wrote {out} ({len(data.updates)} updates, best {data.cumulative_best[-1]:.4f})")
    return 0


def _cmd_export(args: argparse.Namespace, console: Console) -> int:
    view = results.load_run(args.state_dir)
    services = _services(args)
    task = args.task or results.seed_entry(view.archive).problem_id
    record = results.run_record(
        view,
        task,
        prices=load_prices(args.pricing, serve_yaml=services.config),
        gpu=args.gpu,
        run_name=args.run_name,
        guidance=_guidance_usage(view, services, args.reef_records),
    )
    rows = results.trajectory(view.archive, task, view.committed_step)
    results.write_records(Path(args.out), record, rows)
    search = record["search"]
    console.print(
        f"wrote {Path(args.out) / 'runs.json'} and {Path(args.out) / 'trajectory.csv'}: {task}, "
        f"{search['updates']} updates, {search['seed_score']:.4f} → {search['best_score']:.4f}, "
        f"{search['valid_rollouts']}/{search['sampled_rollouts']} valid"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The `guidance-ttt` argument parser (subcommands as in the module docstring)."""
    parser = argparse.ArgumentParser(prog="guidance-ttt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="preflight checks (flags: python -m harness.preflight --help)")
    sub.add_parser("judge", help="start the local judge (flags: guidance-ttt judge --help)")

    def services(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="serve.yaml to read URLs, token, scenario from")
        p.add_argument("--reef-url", help=f"default: from serve.yaml, else {DEFAULT_REEF_URL}")
        p.add_argument("--judge-url", help="default: $FRONTIERCS_JUDGE_URL, serve.yaml, :8081")
        p.add_argument("--scenario", help="Reef scenario (default: from serve.yaml)")
        p.add_argument("--pricing", type=Path, help="price table YAML (see harness/pricing.yaml)")
        p.add_argument(
            "--reef-records", action="store_true", help="read guidance tokens from Reef's records"
        )

    status = sub.add_parser("status", help="where the run is, its health and cost")
    status.add_argument("state_dir", type=Path)
    status.add_argument("--timeout", type=float, default=HEALTH_TIMEOUT_S, help="health probes")
    status.add_argument("--json", action="store_true", help="print the report as JSON")
    services(status)
    inspect = sub.add_parser("inspect", help="what the search found")
    inspect.add_argument("state_dir", type=Path)
    inspect.add_argument("--top", type=int, default=5, help="best candidates to list")
    inspect.add_argument("--cases", type=int, default=2, help="case studies to show")
    plot = sub.add_parser("plot", help="PNG of the cumulative best and valid fraction")
    plot.add_argument("source", help="a state directory or a trajectory.csv")
    plot.add_argument("-o", "--output", help="PNG path (default: <task>-trajectory.png)")
    plot.add_argument("--task", help="the task's rows of a trajectory.csv / its name")
    plot.add_argument("--title")
    export = sub.add_parser("export", help="write runs.json and trajectory.csv")
    export.add_argument("state_dir", type=Path)
    export.add_argument("--out", default="results", help="output directory (default: results)")
    export.add_argument("--task", help="task name in the records (default: the problem id)")
    export.add_argument("--run-name", help="default: the state directory's name")
    export.add_argument("--gpu", help="the training GPU, e.g. 'NVIDIA H100 80GB'")
    services(export)
    return parser


_COMMANDS = {
    "status": _cmd_status,
    "inspect": _cmd_inspect,
    "plot": _cmd_plot,
    "export": _cmd_export,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `guidance-ttt` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "doctor":
        from harness import preflight

        return preflight.main(argv[1:])
    if argv and argv[0] == "judge":
        from judges import service

        service.main(argv[1:])
        return 0
    args = build_parser().parse_args(argv)
    console = Console(width=max(Console().width, 100))
    try:
        return _COMMANDS[args.command](args, console)
    except (results.RunNotFound, ValueError, OSError, RuntimeError) as exc:
        print(f"guidance-ttt {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
