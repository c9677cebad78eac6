"""The resume-state record: `<state>/guidance-run/resume-state.json`, format 1 (docs/design.md §7).

Contract: `ResumeState` is the commit record of a run. It is written last in a step's commit,
atomically (`save`), so the step it names as `next_step` is the one a restarted run continues.
`ResumeState.load` trusts nothing it reads: a missing file means nothing was committed yet
(None), and any defect — unreadable JSON, another `format_version`, unknown or missing keys at
any level, summaries that do not count 0..next_step-1 — raises `ResumeStateError` naming it.
`RunIdentity` holds the settings a run is bound to, and `StepOutcome` turns what the step loop
hands over into the step's `step_summaries` entry (keys `SUMMARY_KEYS`). This module is pure
apart from the one read and the one atomic write; the run controller decides what to do with
the record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from harness.storage.atomic import atomic_write_json
from harness.storage.state_files import StateFileError, exists, read_json_object


class ResumeStateError(RuntimeError):
    """resume-state.json is not a format-1 record this code can trust."""


FORMAT_VERSION = 1
MAX_RESUME_STATE_BYTES = 64 << 20  # summaries of thousands of steps fit many times over
RUN_MODES = ("trained", "frozen")
#: Reef's training backends a trained run may name, and the settings a hosted one may leave at 0.
TRAINING_BACKENDS = ("slime", "tinker")
HOSTED_ZEROS = ("inference_tensor_parallel_size", "megatron_tensor_parallel_size")
#: The task text of a record written before task texts were recorded: the full statement.
LEGACY_TASK_TEXT = "full"
RESUME_STATE = Path("guidance-run") / "resume-state.json"
STATE_KEYS = frozenset(
    {"format_version", "identity", "executor_backend", "prompt_mode", "next_step", "step_summaries"}
)
#: Ours: the SHA-256 of `committed-library.json` as exported at this commit (absent in records
#: written before the per-step export; such a file is then rebuilt on resume).
LIBRARY_SHA_KEY = "committed_library_sha256"
SUMMARY_KEYS = (
    "step",
    "elapsed_s",
    "sampled_rollouts",
    "valid_rollouts",
    "well_formed_guidance",
    "nonconstant_groups",
    "degenerate_step",
    "retained_trajectories",
    "grad_norm",
    "best_raw_score",  # the archive's best after the step, the seed included (the reference's)
    "train_metrics",
    "recovered_commit",  # ours: trained before this process began, re-committed on resume
    "step_best_raw_score",  # ours: the best valid candidate of this step alone (None: none)
)
#: A record written while `executor_backend` always carried the request shape has `dialect` and
#: `drop` even at the backend's own shape (`harness.adapters.executor.backends.PRESET_DIALECTS`,
#: else `sglang`, and nothing dropped), which today's record leaves out (`_migrated_backend`).
LEGACY_OWN_DIALECTS = {"openrouter_glm_5_2": "openrouter"}
#: The keys a summary written before `step_best_raw_score` existed carries; its
#: `best_raw_score` was the step's own best (`_migrated_summary`).
LEGACY_SUMMARY_KEYS = frozenset(SUMMARY_KEYS) - {"step_best_raw_score"}


@dataclass(frozen=True)
class RunIdentity:
    """The settings a run is bound to; another value on resume is refused (docs/design.md §7)."""

    model: str
    executor: str
    gpt_oss_reasoning_effort: str | None
    groups_per_step: int
    rollouts_per_group: int
    guidance_max_tokens: int
    sequence_length: int
    lora_rank: int
    #: SGLang's tensor-parallel size per inference engine (1 in the reference: one engine per GPU).
    inference_tensor_parallel_size: int
    #: Megatron's tensor-parallel size for training (2 in the reference).
    megatron_tensor_parallel_size: int
    #: `trained` or `frozen` (no LoRA: `lora_rank` and both tensor-parallel sizes are 0). A
    #: record written before modes existed has no key and is a trained run.
    mode: str = "trained"
    #: What both models read (`harness.task_text`): `reference` or a variant of the task. A
    #: record written before task texts existed has no key; it read the full text (`full`).
    task_text: str = "reference"
    #: The experiment arm, its parent selection and run seed (`harness.arms`). A record written
    #: before arms existed has none of them and is the method with PUCT and seed 0.
    arm: str = "guidance-ttt"
    parent_selection: str = "puct"
    run_seed: int = 0
    #: How guidance requests are shaped (`harness.request_shapes.RequestShape.describe()`): the
    #: reference's body is `sglang`. A record written before request shapes existed sent it.
    guidance_request: str = "sglang"
    #: Reef's training backend of a trained run: `slime`, or `tinker` (hosted: both
    #: tensor-parallel sizes are 0). A record written before Tinker runs existed trained on Slime.
    training_backend: str = "slime"

    def __post_init__(self) -> None:
        if not (isinstance(self.task_text, str) and self.task_text):
            raise ValueError(f"run identity task_text is {self.task_text!r}, which is not valid")
        if self.mode not in RUN_MODES:
            raise ValueError(f"run identity mode is {self.mode!r}; choose one of {RUN_MODES}")
        if not (isinstance(self.guidance_request, str) and self.guidance_request):
            raise ValueError(
                f"run identity guidance_request is {self.guidance_request!r}, which is not valid"
            )
        if self.training_backend not in TRAINING_BACKENDS:
            raise ValueError(
                f"run identity training_backend is {self.training_backend!r}; choose one of "
                f"{TRAINING_BACKENDS}"
            )
        untrained = ("lora_rank", *HOSTED_ZEROS) if self.mode == "frozen" else ()
        # Tinker has no tensor parallelism to set: a trained run on it records 0 there.
        hosted = HOSTED_ZEROS if self.training_backend == "tinker" and not untrained else ()
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("mode", "task_text", "guidance_request", "training_backend") or (
                f.name == "gpt_oss_reasoning_effort" and value is None
            ):
                continue
            if f.name == "run_seed" or f.name in hosted:
                if not _pos(value, zero=True):
                    raise ValueError(f"run identity {f.name} is {value!r}, which is not valid")
                continue
            if f.name in untrained:
                if value != 0:
                    raise ValueError(f"run identity {f.name} is {value!r}; a frozen run has 0")
                continue
            text = f.name in ("model", "executor", "gpt_oss_reasoning_effort", "arm")
            text = text or f.name == "parent_selection"
            if not (isinstance(value, str) and value != "" if text else _pos(value)):
                raise ValueError(f"run identity {f.name} is {value!r}, which is not valid")

    @classmethod
    def from_dict(cls, data: Any, where: str = "run identity") -> RunIdentity:
        """Build from stored JSON; unknown or missing keys are an error naming them (`mode` may
        be missing: a record from before modes existed is a trained run; so may `task_text`: such
        a run read the full text)."""
        if isinstance(data, Mapping) and "mode" not in data:
            data = {**data, "mode": "trained"}
        if isinstance(data, Mapping) and "task_text" not in data:
            data = {**data, "task_text": LEGACY_TASK_TEXT}
        if isinstance(data, Mapping):  # arms: a record from before them is the method, PUCT, 0
            defaults = {f.name: f.default for f in fields(cls) if f.name in _LATER_KEYS}
            data = {**defaults, **data}
        _exact_keys(data, {f.name for f in fields(cls)}, where)
        return cls(**data)

    def first_difference(self, other: RunIdentity) -> tuple[str, Any, Any] | None:
        """The first key whose value differs (the mode first, then the order of docs/design.md
        §7), with this and the other value."""
        names = ["mode", *(f.name for f in fields(self) if f.name != "mode")]
        for name in names:
            if getattr(self, name) != getattr(other, name):
                return name, getattr(self, name), getattr(other, name)
        return None


@dataclass(frozen=True)
class StepOutcome:
    """What the step loop hands over once all G·R rollouts of `step` are reported: rewards in
    group-major order (one inner sequence per group), counts, and the best judged raw score."""

    step: int
    elapsed_s: float
    group_rewards: Sequence[Sequence[float]]
    valid_rollouts: int
    well_formed_guidance: int
    #: The best raw score of a valid candidate of this step alone.
    best_raw_score: float | None
    #: The archive's best raw score after the step, the seed included (None: use this step's).
    archive_best_raw_score: float | None = None

    def __post_init__(self) -> None:
        rewards = tuple(tuple(float(x) for x in group) for group in self.group_rewards)
        if not all(math.isfinite(x) for group in rewards for x in group):
            raise ValueError(f"step {self.step} has a non-finite reward: {rewards} (a bug)")
        object.__setattr__(self, "group_rewards", rewards)

    @property
    def sampled_rollouts(self) -> int:
        """All rollouts of the step, valid or not (G·R for a complete step)."""
        return sum(len(group) for group in self.group_rewards)

    @property
    def nonconstant_groups(self) -> int:
        """Groups whose rewards are not all equal: the only ones that carry a gradient."""
        return sum(1 for group in self.group_rewards if len(set(group)) > 1)

    def summary(self, r: int, metrics: Mapping[str, Any], recovered: bool) -> dict[str, Any]:
        """The step's `step_summaries` entry. `retained_trajectories` counts what Reef trains on:
        the non-constant groups, or the one kept group of a degenerate step."""
        grad_norm = metrics.get("train/grad_norm")
        return dict(
            zip(
                SUMMARY_KEYS,
                (
                    self.step,
                    round(self.elapsed_s, 3),
                    self.sampled_rollouts,
                    self.valid_rollouts,
                    self.well_formed_guidance,
                    self.nonconstant_groups,
                    self.nonconstant_groups == 0,
                    (self.nonconstant_groups or 1) * r,
                    None if grad_norm is None else float(grad_norm),
                    self.best_raw_score
                    if self.archive_best_raw_score is None
                    else self.archive_best_raw_score,
                    dict(metrics),
                    recovered,
                    self.best_raw_score,
                ),
                strict=True,
            )
        )


@dataclass(frozen=True)
class ResumeState:
    """The commit record `resume-state.json` (format 1): written last in a step's commit, so the
    step it names as `next_step` is the one a restarted run continues."""

    identity: RunIdentity
    executor_backend: Mapping[str, Any]
    prompt_mode: str
    next_step: int
    step_summaries: tuple[Mapping[str, Any], ...]
    committed_library_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON object `load` accepts back (with `format_version`)."""
        return {
            "format_version": FORMAT_VERSION,
            "identity": asdict(self.identity),
            "executor_backend": dict(self.executor_backend),
            "prompt_mode": self.prompt_mode,
            "next_step": self.next_step,
            "step_summaries": [dict(s) for s in self.step_summaries],
            LIBRARY_SHA_KEY: self.committed_library_sha256,
        }

    def save(self, path: Path) -> None:
        """Write atomically (temp file in the same directory, fsync, rename)."""
        atomic_write_json(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> ResumeState | None:
        """Read and validate `path`; None when it does not exist (nothing committed yet). Any
        defect — bad JSON, wrong format_version, unknown or missing keys, summaries that do not
        count 0..next_step-1 — is a `ResumeStateError` naming it."""
        if not exists(path):
            return None
        try:
            data = read_json_object(path, max_bytes=MAX_RESUME_STATE_BYTES)
        except StateFileError as exc:
            raise ResumeStateError(str(exc)) from exc
        library_sha = data.pop(LIBRARY_SHA_KEY, None)
        if library_sha is not None and not isinstance(library_sha, str):
            raise ResumeStateError(f"{path}: {LIBRARY_SHA_KEY} {library_sha!r} is not a string")
        _exact_keys(data, STATE_KEYS, str(path))
        if data["format_version"] != FORMAT_VERSION:
            raise ResumeStateError(
                f"{path}: format_version {data['format_version']!r} is not {FORMAT_VERSION}; this "
                "state was written by another version — use a new state directory"
            )
        next_step, summaries = data["next_step"], data["step_summaries"]
        if not _pos(next_step, zero=True) or not isinstance(summaries, list):
            raise ResumeStateError(f"{path}: next_step {next_step!r} / step_summaries malformed")
        summaries = [_migrated_summary(entry) for entry in summaries]
        for index, entry in enumerate(summaries):
            _exact_keys(entry, set(SUMMARY_KEYS), f"{path} step_summaries[{index}]")
            if entry["step"] != index:
                raise ResumeStateError(f"{path}: step_summaries[{index}] is step {entry['step']}")
        if len(summaries) != next_step:
            raise ResumeStateError(
                f"{path}: {len(summaries)} step summaries for next_step {next_step}"
            )
        if not isinstance(data["executor_backend"], dict) or not isinstance(
            data["prompt_mode"], str
        ):
            raise ResumeStateError(f"{path}: executor_backend or prompt_mode malformed")
        try:
            identity = RunIdentity.from_dict(data["identity"], f"{path} identity")
        except ValueError as exc:
            raise ResumeStateError(f"{path}: {exc}") from exc
        return cls(
            identity,
            _migrated_backend(data["executor_backend"]),
            data["prompt_mode"],
            next_step,
            tuple(summaries),
            library_sha,
        )


def _migrated_backend(record: dict[str, Any]) -> dict[str, Any]:
    """An `executor_backend` written with `dialect` and `drop` at the backend's own shape, as
    today's record of the same backend is written: without them (`LEGACY_OWN_DIALECTS`). A
    chosen shape is kept as it is."""
    own = LEGACY_OWN_DIALECTS.get(str(record.get("name")), "sglang")
    if record.get("drop") == [] and record.get("dialect") == own:
        return {key: value for key, value in record.items() if key not in ("dialect", "drop")}
    return record


def _migrated_summary(entry: Any) -> Any:
    """A summary written before `step_best_raw_score` existed, in today's keys: its
    `best_raw_score` was the step's own best, so that becomes `step_best_raw_score`, and the
    archive's best after the step, not recorded then, is None. Anything else is left as it is
    (and refused by the key check if wrong)."""
    if isinstance(entry, dict) and set(entry) == LEGACY_SUMMARY_KEYS:
        return {**entry, "step_best_raw_score": entry["best_raw_score"], "best_raw_score": None}
    return entry


#: Identity keys added after task texts: a record without them takes the default (the method,
#: with PUCT and run seed 0).
_LATER_KEYS = ("arm", "parent_selection", "run_seed", "guidance_request", "training_backend")


def _pos(value: Any, zero: bool = False) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= (0 if zero else 1)


def _exact_keys(data: Any, expected: set[str] | frozenset[str], where: str) -> None:
    if not isinstance(data, dict):
        raise ResumeStateError(f"{where} is {type(data).__name__}, not a JSON object")
    unknown, missing = sorted(set(data) - expected), sorted(expected - set(data))
    if unknown or missing:
        raise ResumeStateError(f"{where}: unknown keys {unknown}, missing keys {missing}")
