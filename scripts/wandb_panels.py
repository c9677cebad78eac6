"""Draw docs/images/wandb-panels.png: the harness's `search/*` metrics laid out as a W&B
workspace shows them (one panel per metric, x-axis `search/step`).

The data is real W&B output: a synthetic 30 × 128 run (`tests/synthetic_run.py`, through the real
`Archive` and `ArchiveStore`) is fed, event by event, to the real W&B sink in offline mode, and
the panels are drawn from the history read back from the run's `.wandb` file
(`tests/wandb_records.py`). Nothing reaches the network.

Run: python scripts/wandb_panels.py [--out docs/images/wandb-panels.png]   (needs the watch and
plot extras)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.observe.wandb_sink import WandbOptions, WandbSink  # noqa: E402
from tests.synthetic_run import synthetic_state_dir  # noqa: E402
from tests.wandb_records import offline_runs  # noqa: E402

PANELS = (
    (
        "scores",
        ("search/best_so_far", "search/step_best", "search/step_mean", "search/step_median"),
    ),
    (
        "outcomes",
        (
            "search/valid_fraction",
            "search/format_error_fraction",
            "search/candidate_failure_fraction",
        ),
    ),
    ("archive size", ("search/archive_nodes", "search/archive_entries")),
    ("tokens per step", ("search/tokens/executor", "search/tokens/guidance")),
    ("wall time per phase (s)", ("search/time/step_s", "search/time/training_wait_s")),
    (
        "mean seconds per rollout",
        ("search/time/guidance_s", "search/time/executor_s", "search/time/judge_s"),
    ),
)


def log_synthetic_run(work: Path, steps: int) -> list[dict]:
    synthetic_state_dir(work / "state", steps=steps, groups=8, rollouts=16)
    options = WandbOptions.from_block(
        {"enabled": True, "mode": "offline", "project": "guidance-ttt", "directory": str(work)},
        "guidance-ttt-polyomino-packing",
    )
    sink = WandbSink(options, identity={"synthetic": True})
    sink.emit("run_started", state_dir=str(work / "state"))
    for step in range(steps):
        for slot in range(128):  # the stage times a run reports, shaped like a real one
            sink.emit(
                "rollout_finished",
                step=step,
                group=slot // 16,
                rollout=slot % 16,
                timings={
                    "guidance_s": 18 + (slot * step) % 9,
                    "executor_s": 80 + (slot * (step + 3)) % 41,
                    "judge_s": 6 + (slot + step) % 7,
                },
            )
        sink.emit("training_wait", step=step, elapsed_s=300 + 5 * step)
        sink.emit("step_summary", step=step, elapsed_s=1500 + 10 * step)
    sink.close()
    (run,) = offline_runs(work)
    return [row for row in run.history if "search/step" in row]


def draw(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(12, 6.2))
    steps = [row["search/step"] for row in rows]
    for ax, (title, names) in zip(axes.flat, PANELS, strict=True):
        for name in names:
            ax.plot(steps, [row.get(name) for row in rows], label=name, linewidth=1.6)
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_xlabel("search/step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5, frameon=False)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    fig.suptitle(
        "W&B workspace, group guidance-ttt-polyomino-packing: the harness's search/* panels "
        "(synthetic 30 × 128 run, logged offline by the W&B sink and read back)",
        fontsize=9.5,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "wandb-panels.png")
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["WANDB_DIR"] = scratch
        rows = log_synthetic_run(Path(scratch), args.steps)
    draw(rows, args.out)
    print(f"wrote {args.out} from {len(rows)} logged steps")


if __name__ == "__main__":
    main()
