"""Test doubles for the two things the run controller reads from a Reef stack on a GPU host.

`FakeTrainingBridge` — an honest fake of Reef 0.1.3's training-bridge actor
(`reef.runtime.scheduler.TrainingCoordinator`, a named Ray actor in the `slime-driver` service).
Training a LoRA adapter needs GPUs, Megatron and Ray, none of which run here; everything the
harness can observe of that actor is reproduced:

* `health()` answers with Reef's keys: `ok`, `recoverable`, `start_rollout_id`, `phase`,
  `colocate`, `completed_train_steps`, `last_train_rollout_id`, `last_train_metrics`,
  `training_job`; `start_rollout_id()` answers the next rollout id.
* Once a step's whole G×R grid is reported, it plays Reef's commit sequence, one phase per
  `polls_per_phase` calls of `health()`, in the order Reef's source sets them:
  `training` → `checkpointing` → `publishing` → `awaiting_commit` → `serving`. As in Reef,
  `completed_train_steps`, `last_train_rollout_id`, `last_train_metrics` and the next rollout id
  change when the publication finishes (the `awaiting_commit` answer already shows them) and
  only `serving` means the commit is acknowledged.
* Leaving `checkpointing` writes what Slime writes: `<state>/checkpoints/megatron/iter_NNNNNNN/`
  and `latest_checkpointed_iteration.txt` holding the step number. A new fake on the same state
  directory is a restarted slime-driver: it starts at that iteration + 1 and forgets the
  per-process counters (`completed_train_steps` 0, no last step, no metrics), as Reef does.
* Train metrics follow the real rules, not real training: `train/global_batch_size` is
  retained groups × R (tttd drops constant-reward groups and keeps one when all are constant);
  `train/grad_norm` is 0 for such a degenerate step and positive otherwise; LoRA B starts at
  zero, so `train/lora_b_nonzero` and `train/lora_b_l1` stay 0 until the first step with a
  gradient; parameter counts use Qwen3-8B's shapes (36 layers; qkv, proj, fc1, fc2) at the given
  rank. The numbers are illustrative, not measurements.

How a step's grid becomes "reported": call `submit_step(step, group_rewards)` (unit tests), or
pass `reports_source(step) -> group-major rewards | None` and the fake asks it on every
`health()` call while idle (an end-to-end test can read Reef's stored reports there). The fake is
thread-safe; `phases_seen` lists every phase `health()` answered, in order.

Failure knobs (`BridgeFaults`), each limited to one step with `at_step` (None: every step):
`fail_in` enters `training_failed` / `checkpoint_failed` / `weight_sync_failed` / `stopped` from
the phase that fails there; `stall_in` freezes the transaction in one phase (deadline tests);
`metrics` overrides train metrics (qualification tests); `write_checkpoint=False` skips the
checkpoint files; `ok=False` reports unhealthy while phases look fine; `rollout_id_shift` and
`extra_completed` skew the counters.

`StatusServer` — a real HTTP server on 127.0.0.1 (ephemeral port) answering `GET /reef/status`
with pages laid out as Reef 0.1.3 builds them; `status_page()` builds such a page with the tttd
grouping's `processor` block (`open_steps` with `missing` slots, `failed_steps`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PHASES = ("training", "checkpointing", "publishing", "awaiting_commit", "serving")
#: The phase a failure interrupts, keyed by the failed phase Reef reports.
FAILS_FROM = {
    "training_failed": "training",
    "checkpoint_failed": "checkpointing",
    "weight_sync_failed": "publishing",
    "stopped": "training",
}
MARKER_STATUS = {
    "training": "RUNNING",
    "checkpointing": "RUNNING",
    "publishing": "UPDATING_WEIGHTS",
    "awaiting_commit": "READY_TO_COMMIT",
    "serving": "COMPLETE",
}
# Qwen3-8B: hidden 4096, 36 layers, 32 query heads and 8 KV heads of 128, MLP 12288 (fc1 fused).
_LAYERS = 36
_LORA_IN_OUT = ((4096, 6144), (4096, 4096), (4096, 24576), (12288, 4096))

Rewards = Sequence[Sequence[float]]


@dataclass
class BridgeFaults:
    """Injected failures; see the module docstring."""

    at_step: int | None = None
    fail_in: str | None = None
    stall_in: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    write_checkpoint: bool = True
    ok: bool | None = None
    rollout_id_shift: int = 0
    extra_completed: int = 0

    def applies(self, step: int) -> bool:
        return self.at_step is None or self.at_step == step


class FakeTrainingBridge:
    """Reef's training-bridge actor, minus the GPUs (see the module docstring)."""

    def __init__(
        self,
        state_dir: Path,
        *,
        groups_per_step: int,
        rollouts_per_group: int,
        lora_rank: int = 32,
        polls_per_phase: int = 1,
        faults: BridgeFaults | None = None,
        reports_source: Callable[[int], Rewards | None] | None = None,
    ) -> None:
        self.megatron = Path(state_dir) / "checkpoints" / "megatron"
        self.groups_per_step = groups_per_step
        self.rollouts_per_group = rollouts_per_group
        self.lora_rank = lora_rank
        self.polls_per_phase = polls_per_phase
        self.faults = faults or BridgeFaults()
        self.reports_source = reports_source
        self.phases_seen: list[str] = []
        self._lock = threading.Lock()
        self._phase = "serving"
        self._job: tuple[int, tuple[tuple[float, ...], ...]] | None = None
        self._queued: list[tuple[int, tuple[tuple[float, ...], ...]]] = []
        self._polls = 0
        self._completed = 0
        self._last: int | None = None
        self._metrics: dict[str, Any] = {}
        self._marker: dict[str, Any] = {"deferred_weight_update": True, "status": "IDLE"}
        loaded = self._load_checkpoint()
        self._next_rollout_id = 0 if loaded is None else loaded[0] + 1
        self._lora_b_l1 = 0.0 if loaded is None else loaded[1]

    # -- what the controller calls -------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """Advance the transaction by one poll, then answer like `TrainingCoordinator.health()`."""
        with self._lock:
            self._advance()
            self.phases_seen.append(self._phase)
            failed = self._phase.endswith("_failed") or self._phase == "stopped"
            step = self._job[0] if self._job else None
            applies = self.faults.applies(step) if step is not None else self.faults.at_step is None
            forced_ok = self.faults.ok if applies else None
            return {
                "ok": (not failed) if forced_ok is None else forced_ok,
                "recoverable": False,
                "start_rollout_id": self._next_rollout_id,
                "phase": self._phase,
                "colocate": True,
                "inference_url": None,
                "lora_adapter": None,
                "lora_mode": "scenario",
                "completed_train_steps": self._completed,
                "last_train_rollout_id": self._last,
                "last_train_metrics": dict(self._metrics),
                "training_job": dict(self._marker),
            }

    def start_rollout_id(self) -> int:
        """The next rollout id after the checkpoint load (and after every finished step)."""
        with self._lock:
            return self._next_rollout_id

    # -- what a test calls ---------------------------------------------------------------------

    def submit_step(self, step: int, group_rewards: Rewards) -> None:
        """Declare `step`'s grid fully reported with these group-major rewards; Reef trains steps
        in order, so `step` must be the next one not yet submitted."""
        rewards = tuple(tuple(float(x) for x in group) for group in group_rewards)
        shape = [len(group) for group in rewards]
        if shape != [self.rollouts_per_group] * self.groups_per_step:
            raise ValueError(f"step {step} grid {shape} is not G×R")
        with self._lock:
            expected = self._next_rollout_id + len(self._queued) + (1 if self._job else 0)
            if step != expected:
                raise ValueError(f"Reef trains steps in order: got step {step}, next is {expected}")
            self._queued.append((step, rewards))

    # -- the transaction -----------------------------------------------------------------------

    def _advance(self) -> None:
        if self._job is None:
            self._start_next_job()
            return
        step, rewards = self._job
        faults = self.faults if self.faults.applies(step) else BridgeFaults()
        if self._phase not in PHASES or self._phase == faults.stall_in:
            return  # failed or stalled: the transaction goes nowhere
        self._polls += 1
        if self._polls < self.polls_per_phase:
            return
        self._polls = 0
        if faults.fail_in is not None and FAILS_FROM[faults.fail_in] == self._phase:
            self._phase = faults.fail_in
            return
        self._phase = PHASES[PHASES.index(self._phase) + 1]
        self._marker["status"] = MARKER_STATUS[self._phase]
        if self._phase == "publishing" and faults.write_checkpoint:
            self._save_checkpoint(step, rewards)
        elif self._phase == "awaiting_commit":
            self._record_completed(step, rewards, faults)
        elif self._phase == "serving":
            self._marker["commit_acknowledged"] = True
            self._job = None

    def _start_next_job(self) -> None:
        if not self._queued and self.reports_source is not None:
            rewards = self.reports_source(self._next_rollout_id)
            if rewards is not None:
                self._queued.append((self._next_rollout_id, tuple(map(tuple, rewards))))
        if self._queued:
            self._job = self._queued.pop(0)
            self._phase = "training"
            self._marker = {
                "deferred_weight_update": True,
                "status": "RUNNING",
                "training_job_id": f"fake-job-{self._job[0]}",
                "scenario_step": self._job[0],
                "commit_acknowledged": False,
            }

    def _record_completed(self, step: int, rewards: Rewards, faults: BridgeFaults) -> None:
        self._completed += 1 + faults.extra_completed
        self._last = step + faults.rollout_id_shift
        self._next_rollout_id = max(self._next_rollout_id, step + 1)
        self._metrics = {**self._train_metrics(rewards), **faults.metrics}

    def _train_metrics(self, rewards: Rewards) -> dict[str, Any]:
        spreads = [max(group) - min(group) for group in rewards if len(set(group)) > 1]
        per_layer_in_out = sum(i + o for i, o in _LORA_IN_OUT)
        b_elements = self.lora_rank * _LAYERS * sum(o for _, o in _LORA_IN_OUT)
        return {
            "train/grad_norm": 0.0 if not spreads else 0.05 + 0.1 * sum(spreads),
            "train/global_batch_size": (len(spreads) or 1) * self.rollouts_per_group,
            "train/lora_trainable_parameters": self.lora_rank * _LAYERS * per_layer_in_out,
            "train/lora_base_trainable_parameters": 0,
            "train/lora_b_nonzero": b_elements if self._lora_b_l1 > 0 else 0,
            "train/lora_b_l1": self._lora_b_l1,
        }

    def _save_checkpoint(self, step: int, rewards: Rewards) -> None:
        # The optimizer step moves LoRA B off zero only when some group has a gradient.
        if any(len(set(group)) > 1 for group in rewards):
            self._lora_b_l1 += 0.5
        iteration = self.megatron / f"iter_{step:07d}"
        iteration.mkdir(parents=True, exist_ok=True)
        (iteration / "fake_lora_b_l1.txt").write_text(f"{self._lora_b_l1}\n", encoding="utf-8")
        (self.megatron / "latest_checkpointed_iteration.txt").write_text(
            f"{step}\n", encoding="utf-8"
        )

    def _load_checkpoint(self) -> tuple[int, float] | None:
        tracker = self.megatron / "latest_checkpointed_iteration.txt"
        if not tracker.is_file():
            return None
        step = int(tracker.read_text(encoding="utf-8").strip())
        l1 = self.megatron / f"iter_{step:07d}" / "fake_lora_b_l1.txt"
        return step, float(l1.read_text(encoding="utf-8")) if l1.is_file() else 0.0


def status_page(
    scenario: str,
    *,
    error: str | None = None,
    open_steps: Mapping[int, Sequence[tuple[int, int]]] | None = None,
    failed_steps: Sequence[Mapping[str, Any]] = (),
    slots_per_step: int = 8,
) -> dict[str, Any]:
    """A `/reef/status` page as Reef 0.1.3 lays it out, with the tttd grouping's processor block:
    `open_steps` maps a step to its missing `(group, rollout)` slots."""
    processor = {
        "ready_units": 0,
        "batch_size": 1,
        "open_steps": [
            {
                "step": step,
                "filled": slots_per_step - len(missing),
                "expected": slots_per_step,
                "missing": [{"group": g, "rollout": r} for g, r in missing],
            }
            for step, missing in sorted((open_steps or {}).items())
        ],
        "failed_steps": [dict(entry) for entry in failed_steps],
    }
    return {
        "error": error,
        "last_drain_at": None,
        "preload_errors": [],
        "scenarios": {
            scenario: {
                "scenario_step": 0,
                "last_committed_step": None,
                "batch_ready": False,
                "processor": processor,
            }
        },
        "serving": None,
        "training_job": None,
    }


class StatusServer:
    """`GET /reef/status` on 127.0.0.1: answers `page()` (a callable, so a test can script it);
    `fail_next(n, code)` makes the next `n` answers that HTTP error instead. Records every
    Authorization header it saw. Use as a context manager; it stops its thread on exit."""

    def __init__(self, page: Callable[[], Mapping[str, Any]]) -> None:
        self.page = page
        self.requests = 0
        self.authorizations: list[str | None] = []
        self._failures: list[int] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, count: int, code: int = 503) -> None:
        self._failures.extend([code] * count)

    def __enter__(self) -> StatusServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                owner.authorizations.append(self.headers.get("Authorization"))
                if self.path != "/reef/status":
                    code, body = 404, {"error": f"no route {self.path}"}
                elif owner._failures:
                    code, body = owner._failures.pop(0), {"error": "scripted failure"}
                else:
                    code, body = 200, owner.page()
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
