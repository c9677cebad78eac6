"""A run's best candidate: one definition for every place that reports it.

The run's best is the best valid entry the run ever judged, the seed included, whether or not it
became an archive node: a best-of-n run adds nothing to the tree (`harness.arms`), yet its best
is its best candidate. "Best" follows the archive's score direction. One tie rule everywhere:
among equal scores the earliest wins — the seed before any step, an earlier step before a later
one, and within a step the lower group, then the lower rollout (the entry id last, so the order
is total). "The first candidate to reach the run's best score" is therefore the best, which is
also the step `status` names as the one that reached it.

The final progress line, the `run_started`/`run_finished` events, `status`, `inspect`,
`compare`, `export`, `browse` and W&B all read this module (docs/observability.md, "The run's
best"). The archive's own `best_node_id` (the `(value, id)` maximum over archive candidates,
the reference's) stays what parent selection uses; it is not the run's reported best.

Pure: a function of an `Archive`, nothing read or written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from harness.state import ArchiveConfig, LibraryEntry


class Archive(Protocol):
    """What this module reads of a `harness.library.Archive` (which imports this package's
    parts, so this module names it by shape, not by import)."""

    @property
    def config(self) -> ArchiveConfig: ...

    @property
    def entries(self) -> Mapping[str, LibraryEntry]: ...


def seed_entry(archive: Archive) -> LibraryEntry:
    """The seed candidate: the timestep-0 root entry that is not a replicated clone."""
    roots = [e for e in archive.entries.values() if e.timestep == 0]
    originals = [e for e in roots if not e.metadata.get("replicated_seed_entry")]
    if not (originals or roots):
        raise ValueError("the archive has no seed entry (no timestep-0 entry)")
    return (originals or roots)[0]


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


def order_key(archive: Archive, entry: LibraryEntry) -> tuple[float, int, int, int, int, str]:
    """The sort key of the one ranking: better score first, then earliest (timestep, the seed
    before its replicated clones, group, rollout, entry id)."""
    score = archive.config.signed(entry.verifier_raw_score)  # type: ignore[arg-type]
    clone = 1 if entry.metadata.get("replicated_seed_entry") else 0
    return (
        -score,
        entry.timestep,
        clone,
        _int(entry.metadata.get("group")),
        _int(entry.metadata.get("rollout")),
        entry.id,
    )


def ranked(archive: Archive, entries: Iterable[LibraryEntry] | None = None) -> list[LibraryEntry]:
    """Every valid, scored entry (of `entries`, default the whole archive), best first by the
    one tie rule; the seed's replicated clones (the same program as the seed) are left out."""
    pool = archive.entries.values() if entries is None else entries
    candidates = [
        e
        for e in pool
        if e.is_valid
        and e.verifier_raw_score is not None
        and not (e.timestep == 0 and e.metadata.get("replicated_seed_entry"))
    ]
    return sorted(candidates, key=lambda e: order_key(archive, e))


def run_best(archive: Archive, through_step: int | None = None) -> LibraryEntry | None:
    """The run's best entry (the seed's before any step beat it), of the seed and steps
    0..`through_step` when given; None only for an archive without a valid seed."""
    limit = None if through_step is None else through_step + 1
    pool = (e for e in archive.entries.values() if limit is None or e.timestep <= limit)
    best = ranked(archive, pool)
    return best[0] if best else None


def run_best_score(archive: Archive, through_step: int | None = None) -> float | None:
    """The raw score of `run_best`."""
    best = run_best(archive, through_step)
    return None if best is None else float(best.verifier_raw_score)  # type: ignore[arg-type]


def step_of(entry: LibraryEntry) -> int | None:
    """The step (0-based, as the CLI counts them) that produced `entry`; None for the seed."""
    return None if entry.timestep == 0 else entry.timestep - 1
