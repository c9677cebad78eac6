"""Typed records shared by the archive, the judge client and the rollout loop.

Records that cross a boundary (files, HTTP bodies) are validated when they are built from raw
data: an unknown key or a wrong type is an error that names the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Verifier statuses (docs/design.md §1). Every status except VALID is a failure kind with reward 0.
VALID = "valid"
INVALID = "invalid"
ENVIRONMENT_ERROR = "environment_error"
EXECUTION_ERROR = "execution_error"
PARSE_ERROR = "parse_error"
GUIDANCE_FORMAT_ERROR = "guidance_format_error"
STATUSES = (VALID, INVALID, ENVIRONMENT_ERROR, EXECUTION_ERROR, PARSE_ERROR, GUIDANCE_FORMAT_ERROR)


@dataclass(frozen=True)
class VerificationResult:
    """One candidate's verdict. `reward` is what training sees; `raw_score` is the judge's number
    (None when there is none). Only `valid` results carry a positive reward."""

    reward: float
    raw_score: float | None
    valid: bool
    status: str
    message: str
    artifacts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verifier status {self.status!r}; expected one of {STATUSES}")
        if not math.isfinite(self.reward):
            raise ValueError(f"verifier reward must be finite, got {self.reward!r}")
        if self.valid != (self.status == VALID):
            raise ValueError(f"valid={self.valid} contradicts status {self.status!r}")

    @classmethod
    def failure(cls, status: str, message: str, **artifacts: Any) -> VerificationResult:
        """A candidate failure: reward 0, no raw score."""
        return cls(0.0, None, False, status, message, dict(artifacts))


# --- archive records -------------------------------------------------------------------------

ARCHIVE_CANDIDATE = "archive_candidate"
Q_MODE_BEST_CHILD = "best_child"
SCORE_DIRECTIONS = ("max", "min")


class RecordError(ValueError):
    """A record read from a file or built from raw data is malformed; the message names the key."""


def _coerce(value: Any, kind: str, where: str) -> Any:
    """Check one raw JSON value against a field kind and return it in its canonical Python type."""
    optional = kind.endswith("?")
    base = kind.rstrip("?")
    if value is None:
        if optional:
            return None
        raise RecordError(f"{where} must not be null")
    ok: bool
    if base == "str":
        ok = isinstance(value, str)
    elif base == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok:
            value = float(value)
            if not math.isfinite(value):
                raise RecordError(f"{where} must be finite, got {value!r}")
    elif base == "bool":
        ok = isinstance(value, bool)
    elif base == "dict":
        ok = isinstance(value, dict)
    elif base == "ids":
        ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
        if ok:
            value = tuple(value)
    else:  # pragma: no cover - a programming error in a schema below
        raise AssertionError(f"unknown field kind {kind!r}")
    if not ok:
        raise RecordError(f"{where} must be {base}{' or null' if optional else ''}, got {value!r}")
    return value


def read_fields(
    data: Any, schema: dict[str, str], where: str, *, optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Validate a raw JSON object against `schema` (key -> kind) and return the coerced fields.

    Unknown keys and missing required keys are errors naming the key; keys listed in `optional`
    may be absent (they are then left out of the result).
    """
    if not isinstance(data, dict):
        raise RecordError(f"{where} must be a JSON object, got {type(data).__name__}")
    for key in data:
        if key not in schema:
            raise RecordError(f"{where}: unknown key {key!r} (allowed: {', '.join(schema)})")
    fields: dict[str, Any] = {}
    for key, kind in schema.items():
        if key not in data:
            if key in optional:
                continue
            raise RecordError(f"{where}: missing key {key!r}")
        fields[key] = _coerce(data[key], kind, f"{where}.{key}")
    return fields


# Field order of the reference records (the Discover-compatible layout lists them in this order).
_ENTRY_SCHEMA = {
    "id": "str",
    "parent_id": "str?",
    "problem_id": "str",
    "timestep": "int",
    "guidance": "str",
    "execution_thinking": "str",
    "solution": "str",
    "verifier_reward": "float",
    "verifier_raw_score": "float?",
    "verifier_status": "str",
    "verifier_message": "str",
    "summary": "str",
    "reusable_idea": "str",
    "failure_mode": "str?",
    "metadata": "dict",
}


@dataclass(frozen=True)
class LibraryEntry:
    """One rollout outcome (or the seed candidate), stored forever; entries are never pruned.

    `parent_id` is the node the rollout expanded, `timestep` is 0 for the seed and `step + 1` for
    rollouts of `step`. `metadata` holds the audit trail of the rollout (docs/design.md §6).
    """

    id: str
    parent_id: str | None
    problem_id: str
    timestep: int
    guidance: str
    execution_thinking: str
    solution: str
    verifier_reward: float
    verifier_raw_score: float | None
    verifier_status: str
    verifier_message: str
    summary: str
    reusable_idea: str
    failure_mode: str | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Numbers are stored as floats whatever the caller passed, so JSON always shows `5.0`.
        object.__setattr__(self, "verifier_reward", float(self.verifier_reward))
        if self.verifier_raw_score is not None:
            object.__setattr__(self, "verifier_raw_score", float(self.verifier_raw_score))
        if self.verifier_status not in STATUSES:
            raise RecordError(
                f"entry {self.id}: unknown verifier_status {self.verifier_status!r}; "
                f"expected one of {STATUSES}"
            )
        if not math.isfinite(self.verifier_reward):
            raise RecordError(f"entry {self.id}: verifier_reward must be finite")
        if self.timestep < 0:
            raise RecordError(f"entry {self.id}: timestep must be >= 0, got {self.timestep}")

    @property
    def is_valid(self) -> bool:
        """True when the candidate can become an archive node (valid verdict with a raw score)."""
        return self.verifier_status == VALID and self.verifier_raw_score is not None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this entry, keys in reference order; metadata is copied."""
        data = {key: getattr(self, key) for key in _ENTRY_SCHEMA}
        data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> LibraryEntry:
        """Build an entry from its JSON object; unknown or missing keys raise `RecordError`."""
        return cls(**read_fields(data, _ENTRY_SCHEMA, f"entry {_raw_id(data)}"))


_NODE_SCHEMA = {
    "id": "str",
    "problem_id": "str",
    "timestep": "int",
    "entry_id": "str?",
    "value": "float",
    "raw_score": "float?",
    "visits": "int",
    "parent_id": "str?",
    "children": "ids",
    "metadata": "dict",
}


@dataclass(frozen=True)
class LibraryNode:
    """A search-tree node: a valid candidate with a raw score. `value` is the PUCT value (the raw
    score, negated for `min` tasks); `visits` counts group selections (bookkeeping only, PUCT reads
    the archive's `puct_n`). Metadata carries `kind`, `archive_candidate`, `verifier_status` and,
    for root clones, `replicated_seed_root`."""

    id: str
    problem_id: str
    timestep: int
    entry_id: str | None
    value: float
    raw_score: float | None
    visits: int
    parent_id: str | None
    children: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", float(self.value))
        if self.raw_score is not None:
            object.__setattr__(self, "raw_score", float(self.raw_score))
        object.__setattr__(self, "children", tuple(self.children))
        if not math.isfinite(self.value):
            raise RecordError(f"node {self.id}: value must be finite, got {self.value!r}")
        if self.visits < 0:
            raise RecordError(f"node {self.id}: visits must be >= 0, got {self.visits}")

    @property
    def is_root(self) -> bool:
        """Roots have no parent node."""
        return self.parent_id is None

    @property
    def archive_candidate(self) -> bool:
        """Whether the node may be selected as a parent (False for nodes kept only as ancestors)."""
        return bool(self.metadata.get(ARCHIVE_CANDIDATE, True))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this node, keys in reference order."""
        data = {key: getattr(self, key) for key in _NODE_SCHEMA}
        data["children"] = list(self.children)
        data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> LibraryNode:
        """Build a node from its JSON object; unknown or missing keys raise `RecordError`."""
        return cls(**read_fields(data, _NODE_SCHEMA, f"node {_raw_id(data)}"))


_GROUP_SCHEMA = {
    "selected_node_id": "str",
    "submitted": "int",
    "children": "ids",
    "finalized": "bool",
    "visible_timestep_exclusive": "int",
    "entry_ids": "ids",
}


def group_uid(timestep: int, group: int) -> str:
    """The Discover group uid `"<archive_timestep>:<group_index>"`."""
    return f"{timestep}:{group}"


@dataclass(frozen=True)
class ArchiveGroup:
    """The R rollouts of one group in one timestep: its parent, how many were submitted, the
    nodes and entries they produced. Finalized exactly when all R are in."""

    selected_node_id: str
    submitted: int
    children: tuple[str, ...]
    finalized: bool
    visible_timestep_exclusive: int
    entry_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this group. As in the reference, `entry_ids` appears only once the
        group has a submission (the reference creates the key with the first one)."""
        data: dict[str, Any] = {
            "selected_node_id": self.selected_node_id,
            "submitted": self.submitted,
            "children": list(self.children),
            "finalized": self.finalized,
            "visible_timestep_exclusive": self.visible_timestep_exclusive,
        }
        if self.submitted or self.entry_ids:
            data["entry_ids"] = list(self.entry_ids)
        return data

    @classmethod
    def from_dict(cls, data: Any, uid: str = "?") -> ArchiveGroup:
        """Build a group from its JSON object; `entry_ids` may be absent (no submission yet)."""
        return cls(**read_fields(data, _GROUP_SCHEMA, f"group {uid}", optional=("entry_ids",)))


_CONFIG_SCHEMA = {
    "rollout_n": "int",
    "puct_c": "float",
    "max_buffer_size": "int",
    "topk_children": "int",
    "puct_q_mode": "str",
    "discover_compat": "bool",
    "groups_per_batch": "int",
    "score_direction": "str",
}


@dataclass(frozen=True)
class ArchiveConfig:
    """The archive settings pinned for the life of an output directory (docs/design.md §1 `config`).

    Only the published policy is supported: `best_child` Q and Discover-compatible accounting.
    """

    rollout_n: int
    groups_per_batch: int
    score_direction: str = "max"
    puct_c: float = 1.0
    max_buffer_size: int = 1000
    topk_children: int = 2
    puct_q_mode: str = Q_MODE_BEST_CHILD
    discover_compat: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "puct_c", float(self.puct_c))
        for name in ("rollout_n", "groups_per_batch", "max_buffer_size", "topk_children"):
            if getattr(self, name) < 1:
                raise RecordError(f"archive config: {name} must be >= 1, got {getattr(self, name)}")
        if not (math.isfinite(self.puct_c) and self.puct_c >= 0):
            raise RecordError(f"archive config: puct_c must be finite and >= 0, got {self.puct_c}")
        if self.score_direction not in SCORE_DIRECTIONS:
            raise RecordError(
                f"archive config: score_direction must be 'max' or 'min', "
                f"got {self.score_direction!r}"
            )
        if self.puct_q_mode != Q_MODE_BEST_CHILD:
            raise RecordError(
                f"archive config: puct_q_mode {self.puct_q_mode!r} is not supported; "
                f"only {Q_MODE_BEST_CHILD!r} (the published policy)"
            )
        if self.discover_compat is not True:
            raise RecordError("archive config: discover_compat must be true")

    def to_dict(self) -> dict[str, Any]:
        """The `config` object of `library.json`, keys in reference order."""
        return {key: getattr(self, key) for key in _CONFIG_SCHEMA}

    @classmethod
    def from_dict(cls, data: Any) -> ArchiveConfig:
        """Build the config from its JSON object; every key of docs/design.md §1 is required."""
        return cls(**read_fields(data, _CONFIG_SCHEMA, "archive config"))

    def differences(self, other: ArchiveConfig) -> list[str]:
        """`key: stored X, requested Y` for every setting where `other` differs from self."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [
            f"{key}: stored {mine[key]!r}, requested {theirs[key]!r}"
            for key in _CONFIG_SCHEMA
            if mine[key] != theirs[key]
        ]

    def signed(self, raw_score: float) -> float:
        """The PUCT value of a raw score: the score itself, negated when lower is better."""
        return float(raw_score) if self.score_direction == "max" else -float(raw_score)


def _raw_id(data: Any) -> str:
    return str(data.get("id", "?")) if isinstance(data, dict) else "?"
