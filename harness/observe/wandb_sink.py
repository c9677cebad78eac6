"""The harness's side of a run in Weights & Biases: an `EventSink` that logs, per committed step,
the `search/*` metrics of `harness.observe.search_metrics` and a table of the step's samples
(`search/samples`), into the W&B project and group of Reef's own tracker (`observability.wandb`
in serve.yaml), so one workspace shows Reef's `train/*` beside the harness's `search/*`.

The harness's figures are a W&B run of their own, `<name>-search`: Reef's tracker writes its
run from the Reef process, and two processes cannot share one W&B run. Its id is derived from
the project, group and the run's identity, so a resumed run continues the same W&B run
(`resume="allow"`).

It never stops or slows the run. `emit` only puts the event on a bounded queue; one worker
thread imports `wandb` (only when enabled, so the package is needed only then), opens the run,
reads the committed archive from disk and logs. Any W&B failure (no network, a bad key, a
quota, an unwritable directory) is logged once as a warning and turns the sink off for the rest
of the run; a full queue drops events with one warning; `close` waits at most
`close_timeout_s`. The API key is W&B's own business: it reads `WANDB_API_KEY` from the
environment (or its credential store); nothing here reads, logs or writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.observe.cost import PriceTable
from harness.observe.search_metrics import SAMPLE_COLUMNS, sample_rows, step_metrics, timings_of
from harness.storage.run_files import ARCHIVE_DIR, run_id
from harness.storage.store import read_committed

log = logging.getLogger(__name__)

MODES = ("online", "offline", "disabled")
SAMPLES_KEY = "search/samples"
_STOP = object()


@dataclass(frozen=True)
class WandbOptions:
    """Where the harness's W&B run goes: Reef's `observability.wandb` block read for the
    harness (`group` is `<group_prefix>/<scenario>` or the scenario, as Reef names its group)."""

    mode: str
    project: str
    group: str
    name: str
    entity: str | None = None
    tags: tuple[str, ...] = ()
    directory: Path | None = None

    #: The run's own id (`harness.storage.run_files.run_id`); None: keyed by `identity` alone.
    run_key: str | None = None

    @classmethod
    def from_block(
        cls,
        block: Mapping[str, Any],
        scenario: str,
        *,
        run_id: str | None = None,
        experiment: RunNames | None = None,
    ) -> WandbOptions | None:
        """The options of an active block; None when it is off (`enabled: false` or
        `mode: disabled`), which means nothing is imported and nothing is logged. With the
        run's `run_id` the group and name are `run_names`' (one group per experiment, or per
        plain run; the run named by arm and seed) and the W&B id is derived from the run id."""
        mode = block.get("mode") or ("online" if block.get("enabled") else "disabled")
        if mode not in MODES:
            raise ValueError(f"observability.wandb.mode is {mode!r}; use one of {', '.join(MODES)}")
        if not block.get("enabled") or mode == "disabled":
            return None
        prefix, name_prefix = block.get("group_prefix"), block.get("name_prefix")
        if run_id is not None:
            prefix, name_prefix = run_names(block, scenario, run_id, experiment)
        directory = block.get("directory")
        return cls(
            mode=mode,
            project=block.get("project") or "reef",
            group=f"{prefix}/{scenario}" if prefix else scenario,
            name=f"{name_prefix or scenario}-search",
            entity=block.get("entity") or None,
            tags=tuple(block.get("tags") or ()),
            directory=Path(directory).expanduser() if directory else None,
            run_key=run_id,
        )

    def run_id(self, identity: Mapping[str, Any]) -> str:
        """A W&B run id that is the same for every session of one run (a resume continues it):
        derived from the run's own id when there is one (two runs never share it), else from
        the project, group, name and `identity`."""
        key = json.dumps(
            {
                "project": self.project,
                "entity": self.entity,
                "group": self.group,
                "name": self.name,
                "identity": dict(identity),
            }
            if self.run_key is None
            else {"project": self.project, "entity": self.entity, "run": self.run_key},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(b"guidance-ttt-search\0" + key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class RunNames:
    """What names a run of an experiment in W&B: the experiment, the arm and the run seed."""

    experiment: str
    arm: str
    seed: int


def run_names(
    block: Mapping[str, Any], scenario: str, run_id: str, experiment: RunNames | None = None
) -> tuple[str, str]:
    """The `(group_prefix, name_prefix)` of one run, as both W&B writers take them (Reef's
    tracker names its group `<group_prefix>/<scenario>` and its runs `<name_prefix>-segment-N`,
    and derives its run id from them; the harness's run is `<name_prefix>-search` in the same
    group). An experiment's runs share the group `<experiment>` (under the block's own
    `group_prefix`, if any) and are named `<experiment>-<arm>-s<seed>`; a plain run's group is
    its own, `run-<id8>`. Every name prefix ends in the run id's first 8 digits, so Reef's
    tracker ids of two runs never collide and a resumed run keeps its own."""
    short = run_id[:8]
    user_prefix = block.get("group_prefix")
    if str(block.get("name_prefix") or "").endswith(f"-{short}"):
        return user_prefix or "", str(block["name_prefix"])  # a settings copy already named it
    if experiment is not None:
        group = experiment.experiment
        name = f"{experiment.experiment}-{experiment.arm}-s{experiment.seed}-{short}"
    else:
        group = f"run-{short}"
        name = f"{block.get('name_prefix') or scenario}-{short}"
    return (f"{user_prefix}/{group}" if user_prefix else group), name


def name_wandb_runs(
    block: dict, scenario: str, state_dir: Path, experiment: RunNames | None = None
) -> None:
    """Set a settings copy's `group_prefix` and `name_prefix` to the run's own W&B names
    (`harness.observe.wandb_sink.run_names`, from the state directory's run id), so Reef's
    tracker, which reads this copy, derives its run ids and group from the run too."""
    group, name = run_names(block, scenario, str(run_id(Path(state_dir))), experiment)
    block.update(group_prefix=group or None, name_prefix=name)


class WandbSink:
    """An event sink that logs the search side of each committed step to W&B (module doc).

    `identity` keys the W&B run id (the run's resume identity and state directory); `config`
    becomes the W&B run's config (plain, secret-free values); `prices` and `models`
    ((guidance model, executor model)) add `search/cost_usd`. `client` stands in for the `wandb`
    module in tests of failures that cannot be produced for real here (a server that hangs).
    """

    def __init__(
        self,
        options: WandbOptions,
        *,
        identity: Mapping[str, Any],
        config: Mapping[str, Any] | None = None,
        prices: PriceTable | None = None,
        models: tuple[str, str] | None = None,
        client: Any | None = None,
        queue_size: int = 20_000,
        close_timeout_s: float = 60.0,
    ) -> None:
        self.options = options
        self.run_id = options.run_id(identity)
        self._config = dict(config or {})
        self._prices, self._models = prices, models
        self._client = client
        self._close_timeout = close_timeout_s
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._run: Any = None
        self._state_dir: Path | None = None
        self._events: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self._off = threading.Event()
        self._dropped = False
        self._lock = threading.Lock()
        self.logged_steps: list[int] = []
        self.warning: str | None = None  # the one warning a failure gave, for callers and tests
        self._worker = threading.Thread(target=self._work, name="wandb-sink", daemon=True)
        self._worker.start()

    # --- the sink (called on the run's threads) --------------------------------------------

    def emit(self, kind: str, **fields: Any) -> None:
        """Queue the event for the worker; never blocks, never raises."""
        if self._off.is_set():
            return
        try:
            self._queue.put_nowait((kind, fields))
        except queue.Full:
            with self._lock:
                first, self._dropped = not self._dropped, True
            if first:
                log.warning("W&B is behind the run; dropping events (the run is not affected)")

    def close(self) -> None:
        """Finish the W&B run, waiting at most `close_timeout_s` in all for the worker."""
        deadline = time.monotonic() + self._close_timeout
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=self._close_timeout)
        self._worker.join(max(0.0, deadline - time.monotonic()))
        if self._worker.is_alive():
            log.warning(
                "W&B did not finish within %.0f s; the run is done, its W&B data may be "
                "incomplete (offline runs: `wandb sync` what was written)",
                self._close_timeout,
            )

    # --- the worker ------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                self._finish()
                return
            if self._off.is_set():
                continue
            kind, fields = item
            try:
                self._handle(kind, fields)
            except Exception as exc:  # any W&B trouble: warn once, then stay out of the way
                self._fail(exc)

    def _handle(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "run_started":
            self._state_dir = Path(str(fields.get("state_dir")))
            self._open(fields)
        elif kind in ("rollout_finished", "training_wait") and isinstance(fields.get("step"), int):
            self._events[fields["step"]].append({"event": kind, **fields})
        elif kind == "step_summary" and isinstance(fields.get("step"), int):
            self._log_step(fields)
        elif kind == "run_finished" and self._run is not None:
            self._run.summary["search/next_step"] = fields.get("next_step")
            if isinstance(fields.get("best_raw_score"), int | float):
                self._run.summary["search/best_so_far"] = fields["best_raw_score"]

    def _open(self, started: Mapping[str, Any]) -> None:
        if self._run is not None:
            return
        wandb = self._wandb()
        directory = None
        if self.options.directory is not None:
            self.options.directory.mkdir(parents=True, exist_ok=True)
            directory = str(self.options.directory)
        if self._models is None and started.get("guidance_model"):
            self._models = (str(started["guidance_model"]), str(started.get("executor_model")))
        run = wandb.init(
            id=self.run_id,
            project=self.options.project,
            entity=self.options.entity,
            group=self.options.group,
            name=self.options.name,
            tags=list(self.options.tags),
            job_type="search",
            mode=self.options.mode,
            dir=directory,
            resume="allow",
            reinit="create_new",
            config={**self._config, "run": _plain(started)},
            settings=wandb.Settings(
                silent=True, console="off", disable_git=True, save_code=False, init_timeout=60
            ),
        )
        run.define_metric("search/step")
        run.define_metric("search/*", step_metric="search/step")
        self._run = run

    def _log_step(self, summary: dict[str, Any]) -> None:
        if self._run is None or self._state_dir is None:
            return
        step = int(summary["step"])
        archive, _ = read_committed(self._state_dir / ARCHIVE_DIR)
        timings = timings_of(self._events.pop(step, []), step)
        metrics = step_metrics(
            archive, step, summary, timings, prices=self._prices, models=self._models
        )
        table = self._wandb().Table(columns=list(SAMPLE_COLUMNS), data=sample_rows(archive, step))
        self._run.log({**metrics, SAMPLES_KEY: table})
        self.logged_steps.append(step)

    def _finish(self) -> None:
        run, self._run = self._run, None
        if run is None or self._off.is_set():
            return
        try:
            run.finish()
            # W&B's service writes the run's files on its own schedule; stopping it is what makes
            # them complete on disk when `close` returns (offline: ready for `wandb sync`).
            teardown = getattr(self._wandb(), "teardown", None)
            if teardown is not None:
                teardown()
        except Exception as exc:
            self._fail(exc)

    def _wandb(self) -> Any:
        if self._client is None:
            import wandb  # only here: the package is needed only when W&B is enabled

            self._client = wandb
        return self._client

    def _fail(self, exc: BaseException) -> None:
        self._off.set()
        self.warning = (
            f"W&B logging is off for the rest of this run ({type(exc).__name__}: "
            f"{_redacted(str(exc))}); the run continues, events.jsonl has everything"
        )
        log.warning("%s", self.warning)
        run, self._run = self._run, None
        if run is not None:
            with contextlib.suppress(Exception):
                run.finish(exit_code=1)


def _plain(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if isinstance(v, str | int | float | bool | None)}


def _redacted(text: str) -> str:
    key = os.environ.get("WANDB_API_KEY")
    return text.replace(key, "***") if key else text
