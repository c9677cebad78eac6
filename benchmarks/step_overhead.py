"""Step overhead: the real rollout loop at 8×16 against services with configured latencies.

    python benchmarks/step_overhead.py [--groups 8 --rollouts 16 --workers 8
        --executor-concurrency 8 --guidance-latency 0.5 --executor-latency 1.5
        --judge-latency 0.5]

One step of `harness.run.step.GuidanceHarness.run_step` (parents, G·R rollouts in the worker pool,
strict parsing, the real `ExecutionClient` with its concurrency bound, the real
`FrontierCSScorer`, the real `ArchiveStore` journal with an fsync per rollout, reports through
the real `ReefChannel`, and the event log plus the progress display as sinks), then the run
controller's barrier, qualification gate and commit (`RunController.complete_step`) against the
training-bridge fake. The services run in a separate process so they do not share the harness's
interpreter: a receipt server standing in for Reef (answers the guidance call after the
guidance latency with a receipt header, accepts reports), an OpenAI-compatible executor that
answers after the executor latency and records how many calls were in flight at once, and a
FrontierCS-protocol judge whose result is final the judge latency after the submission.

It prints the step's wall time against the critical path those latencies imply — the makespan
of an ideal schedule of the same pool (workers, executor slots, FIFO) with zero harness cost —
their ratio, the executor's peak concurrency against its bound, and the harness process's peak
memory. Target: ratio ≤ 1.05 with the bound honoured.
"""

from __future__ import annotations

import argparse
import heapq
import io
import itertools
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TASK_DIR = REPO / "harbor" / "polyomino_packing"
SCENARIO = "guidance-ttt-benchmark"
EXECUTOR_ANSWER = (
    '<solution>\n```cpp\n#include <cstdio>\nint main() { std::puts("%d"); }\n```\n</solution>\n'
    "<summary>Variant %d of the shelf packer.</summary>"
)


# --- the services (child process) ---------------------------------------------------------------


def serve(config: dict[str, float]) -> None:
    """Run the three stand-in services on one asyncio loop (so their own cost stays small) until
    stdin closes; print their URLs as one JSON line."""
    import asyncio

    from aiohttp import web

    counter = itertools.count(1)
    in_flight = {"now": 0, "peak": 0}
    submitted: dict[str, float] = {}

    async def guidance(request: web.Request) -> web.Response:
        await request.read()
        receipt = f"receipt-{next(counter)}"
        await asyncio.sleep(config["guidance"])
        text = f"<guidance>Try a skyline ordering, variant {receipt}.</guidance>"
        answer = {
            "choices": [
                {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 900, "completion_tokens": 120},
        }
        return web.json_response(answer, headers={"x-reef-agent-record-id": receipt})

    async def report(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"agent_record_id": f"report-{next(counter)}"})

    async def executor(request: web.Request) -> web.Response:
        await request.read()
        in_flight["now"] += 1
        in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        await asyncio.sleep(config["executor"])
        in_flight["now"] -= 1  # before the answer leaves: the client may then send the next call
        number = next(counter)
        return web.json_response(
            {
                "choices": [
                    {
                        "message": {"content": EXECUTOR_ANSWER % (number, number)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5000, "completion_tokens": 3000},
            }
        )

    async def peak(_: web.Request) -> web.Response:
        return web.json_response(dict(in_flight))

    async def submit(request: web.Request) -> web.Response:
        await request.read()
        sid = str(next(counter))
        submitted[sid] = time.monotonic()
        return web.json_response({"sid": sid})

    async def result(request: web.Request) -> web.Response:
        sid = request.match_info["sid"]
        ready = submitted.get(sid, time.monotonic()) + config["judge"]
        await asyncio.sleep(max(ready - time.monotonic(), 0.0))  # final at submit + latency
        ratios = [random.Random(sid).uniform(0.3, 0.9) for _ in range(3)]
        cases = [{"ok": True, "status": "Correct", "scoreRatio": r} for r in ratios]
        return web.json_response({"status": "done", "score": 100 * sum(ratios) / 3, "cases": cases})

    apps = {"reef": web.Application(), "executor": web.Application(), "judge": web.Application()}
    apps["reef"].add_routes(
        [web.post("/v1/chat/completions", guidance), web.post("/reef/report", report)]
    )
    apps["executor"].add_routes([web.post("/v1/chat/completions", executor), web.get("/", peak)])
    apps["judge"].add_routes([web.post("/submit", submit), web.get("/result/{sid}", result)])

    async def main() -> None:
        urls = {}
        runners = []
        for name, app in apps.items():
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=512)
            await site.start()
            runners.append(runner)
            urls[name] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        print(json.dumps(urls), flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin
        for runner in runners:
            await runner.cleanup()

    asyncio.run(main())


# --- the ideal schedule -------------------------------------------------------------------------


def critical_path(
    rollouts: int, workers: int, slots: int, guidance: float, executor: float, judge: float
) -> float:
    """Makespan of the ideal schedule: `workers` take rollouts in order; each holds its worker
    through guidance, a FIFO wait for one of `slots` executor slots, the executor and the judge."""
    free_workers = [0.0] * workers
    free_slots = [0.0] * slots
    end = 0.0
    for _ in range(rollouts):
        start = heapq.heappop(free_workers)
        ready = start + guidance
        slot = heapq.heappop(free_slots)
        executed = max(ready, slot) + executor
        heapq.heappush(free_slots, executed)
        done = executed + judge
        heapq.heappush(free_workers, done)
        end = max(end, done)
    return end


# --- the harness side ---------------------------------------------------------------------------


def _stage_means(events: Path) -> dict[str, float]:
    """Mean per-rollout stage times as the loop measured them (from its rollout events)."""
    from harness.observe.events import read_events

    timings = [e["timings"] for e in read_events(events) if e.get("event") == "rollout_finished"]
    keys = sorted({k for t in timings for k in t})
    return {k: round(sum(t.get(k, 0.0) for t in timings) / len(timings), 3) for k in keys}


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the services, run one step of the real loop and commit it; return the numbers."""
    import httpx
    from rich.console import Console

    from harness.adapters.executor.backends import backend_from_name
    from harness.adapters.executor.client import ExecutionClient
    from harness.adapters.judge.frontiercs import FrontierCSScorer, JudgeSettings
    from harness.adapters.reef.channel import ReefChannel
    from harness.contract import load_contract
    from harness.library import Archive
    from harness.observe.events import EventLog, Fanout
    from harness.observe.progress import ProgressDisplay
    from harness.run.controller import ControllerSettings, RunController
    from harness.run.rollout import RolloutSettings
    from harness.run.step import GuidanceHarness, step_outcome
    from harness.state import ArchiveConfig
    from harness.storage.resume_state import RunIdentity
    from harness.storage.run_files import load_seed
    from harness.storage.state_dir import StateDirectory
    from tests.bridge_fake import PHASES, FakeTrainingBridge, status_page

    config = {
        "guidance": args.guidance_latency,
        "executor": args.executor_latency,
        "judge": args.judge_latency,
    }
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        urls = json.loads(child.stdout.readline())
        with tempfile.TemporaryDirectory(prefix="step-overhead-") as tmp:
            state = Path(tmp)
            g, r = args.groups, args.rollouts
            archive_config = ArchiveConfig(rollout_n=r, groups_per_batch=g)
            seed = load_seed(TASK_DIR)
            state_dir = StateDirectory.open(
                state, archive_config, lambda: Archive.from_seed(archive_config, seed)
            )
            store, archive = state_dir.store, state_dir.archive
            backend = replace(
                backend_from_name("gpt_oss_120b", base_url=urls["executor"] + "/v1"),
                concurrency=args.executor_concurrency,
            )
            executor = ExecutionClient(backend)
            log = EventLog(state / "events.jsonl")
            display = ProgressDisplay(Console(file=io.StringIO(), force_terminal=False))
            harness = GuidanceHarness(
                archive=archive,
                store=store,
                settings=RolloutSettings(
                    contract=load_contract(TASK_DIR),
                    problem=(TASK_DIR / "instruction.md").read_text(),
                    model="Qwen/Qwen3-8B",
                    guidance_max_tokens=8192,
                    groups_per_step=g,
                    rollouts_per_group=r,
                ),
                reef=ReefChannel(urls["reef"], SCENARIO, token=None),
                executor=executor,
                scorer=FrontierCSScorer(JudgeSettings(base_url=urls["judge"], problem_id="0")),
                workers=args.workers,
                events=Fanout(log, display),
            )

            def reported(step: int) -> list[list[float]] | None:
                if not archive.step_finalized(step):
                    return None
                return [list(group) for group in step_outcome(archive, step, 0.0).group_rewards]

            bridge = FakeTrainingBridge(
                state, groups_per_step=g, rollouts_per_group=r, reports_source=reported
            )
            status = type("Status", (), {"fetch": lambda self: status_page(SCENARIO)})()
            identity = RunIdentity(
                "Qwen/Qwen3-8B", "gpt_oss_120b", "high", g, r, 8192, 12288, 32, 1, 2
            )
            controller = RunController(
                ControllerSettings(
                    state, SCENARIO, steps=args.steps, poll_interval_s=args.poll_interval
                ),
                identity,
                backend.safe_dict(),
                bridge,
                status,
                state_dir,
            )
            controller.begin()
            rss_before = _max_rss_mib()
            cpu_before = time.process_time()
            steps = []
            for step in range(args.steps):
                started = time.monotonic()
                step_run = harness.run_step(step)
                rollouts_done = time.monotonic()
                summary = controller.complete_step(step_run.outcome)
                finished = time.monotonic()
                steps.append(
                    {
                        "step": step,
                        "rollout_loop_s": rollouts_done - started,
                        "step_wall_s": finished - started,
                        "barrier_and_commit_s": finished - rollouts_done,
                        "valid_rollouts": summary["valid_rollouts"],
                    }
                )
            cpu = (time.process_time() - cpu_before) / args.steps
            peak = httpx.get(urls["executor"]).json()["peak"]
            log.close()
            stages = _stage_means(state / "events.jsonl")
            executor.close()
            state_dir.close()
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    rollouts_ideal = critical_path(
        g * r,
        args.workers,
        args.executor_concurrency,
        args.guidance_latency,
        args.executor_latency,
        args.judge_latency,
    )
    # The bridge fake advances one phase per health() poll: after the last report it answers
    # training, checkpointing, publishing, awaiting_commit, then serving, so its "training"
    # lasts (phases - 1) poll intervals. That is the training latency of this benchmark.
    training = (len(PHASES) - 1) * args.poll_interval
    ideal = rollouts_ideal + training
    for row in steps:
        row["ratio"] = row["step_wall_s"] / ideal
        row["rollout_loop_ratio"] = row["rollout_loop_s"] / rollouts_ideal
    # The median step, not the first: a run lasts many steps, and step 0 also pays for lazy
    # imports, thread start-up and first connections.
    median = sorted(steps, key=lambda row: row["ratio"])[(len(steps) - 1) // 2]
    return {
        "grid": f"{g}x{r}",
        "workers": args.workers,
        "executor_bound": args.executor_concurrency,
        "executor_peak_in_flight": peak,
        "latencies_s": config,
        "critical_path_s": ideal,
        "rollouts_critical_path_s": rollouts_ideal,
        "training_latency_s": training,
        "steps": steps,
        "median_step": median["step"],
        "ratio": median["ratio"],
        "measured_stage_means_s": stages,
        "harness_cpu_s_per_step": cpu,
        "peak_rss_mib": _max_rss_mib(),
        "rss_before_steps_mib": rss_before,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the comparison; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument(
        "--workers", type=int, default=8, help="rollout pool (serve.yaml's max_rollout_workers)"
    )
    parser.add_argument(
        "--executor-concurrency",
        type=int,
        default=8,
        help="executor bound (serve.yaml's executor_max_in_flight)",
    )
    parser.add_argument("--guidance-latency", type=float, default=0.5)
    parser.add_argument("--executor-latency", type=float, default=1.5)
    parser.add_argument("--judge-latency", type=float, default=0.5)
    parser.add_argument("--poll-interval", type=float, default=0.05, help="barrier poll (s)")
    parser.add_argument("--steps", type=int, default=3, help="steps to run; the median is judged")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    if args.serve:
        serve(json.loads(args.serve))
        return 0
    numbers = run(args)
    bound_ok = numbers["executor_peak_in_flight"] <= args.executor_concurrency
    ratio_ok = numbers["ratio"] <= 1.05
    if args.json:
        print(json.dumps(numbers, indent=2))
    else:
        print(
            f"{args.steps} steps of {numbers['grid']}, {args.workers} workers, executor bound "
            f"{args.executor_concurrency}; latencies guidance {args.guidance_latency}s, executor "
            f"{args.executor_latency}s, judge {args.judge_latency}s\n"
            f"critical path per step {numbers['critical_path_s']:.3f} s (rollouts "
            f"{numbers['rollouts_critical_path_s']:.3f} s + training "
            f"{numbers['training_latency_s']:.3f} s)"
        )
        for row in numbers["steps"]:
            print(
                f"step {row['step']}: wall {row['step_wall_s']:7.3f} s  ratio {row['ratio']:.3f}  "
                f"(rollout loop {row['rollout_loop_s']:.3f} s, ratio "
                f"{row['rollout_loop_ratio']:.3f}; barrier + commit "
                f"{row['barrier_and_commit_s']:.3f} s)"
            )
        print(
            f"median step ratio {numbers['ratio']:.3f} "
            f"(target ≤ 1.05: {'met' if ratio_ok else 'MISSED'})\n"
            f"executor in flight peak {numbers['executor_peak_in_flight']} of bound "
            f"{args.executor_concurrency} ({'honoured' if bound_ok else 'EXCEEDED'})\n"
            f"stage means measured by the loop: {numbers['measured_stage_means_s']}\n"
            f"harness CPU time per step {numbers['harness_cpu_s_per_step']:.2f} s\n"
            f"peak memory (max RSS of the harness process) {numbers['peak_rss_mib']:.1f} MiB "
            f"({numbers['rss_before_steps_mib']:.1f} MiB before the first step)"
        )
    return 0 if bound_ok and ratio_ok else 1


if __name__ == "__main__":
    sys.exit(main())
