"""Rank-prior PUCT, the published TTT-Discover parent-selection policy (docs/design.md §2).

Pure arithmetic on plain values: the archive passes in the candidate set and its statistics and
gets back a ranking. Nothing here reads files or mutates state.

    scale = max(max(value) - min(value), 1e-6)       over non-root candidates (all if only roots)
    P(i)  = (N - rank(i)) / (N (N + 1) / 2)           rank 0 = highest value
    Q(i)  = m[i] if n[i] > 0 and m[i] exists else value(i)
    score = Q(i) + c * scale * P(i) * sqrt(1 + T) / (1 + n[i])
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PUCT_C = 1.0
MIN_SCALE = 1e-6


@dataclass(frozen=True)
class Candidate:
    """A selectable node as PUCT sees it: its id, its value and whether it is a root."""

    id: str
    value: float
    is_root: bool


@dataclass(frozen=True)
class Ranked:
    """One candidate's PUCT terms, in the order the reference logs them."""

    id: str
    score: float
    value: float
    visits: int
    q: float
    prior: float
    bonus: float


def value_scale(candidates: Sequence[Candidate]) -> float:
    """The value spread that sizes the exploration bonus: max - min over the non-root candidates
    (over all of them when every candidate is a root), never below 1e-6; 1.0 for an empty set."""
    if not candidates:
        return 1.0
    pool = [c.value for c in candidates if not c.is_root] or [c.value for c in candidates]
    return max(max(pool) - min(pool), MIN_SCALE)


def rank_priors(candidates: Sequence[Candidate]) -> dict[str, float]:
    """Linear rank prior: the r-th best value (0-based) gets weight N - r, normalised to sum 1.

    Ties keep ascending-id order (a stable sort over id-ordered candidates). That is the order
    the reference effectively uses, because it re-reads its id-sorted JSON before every selection.
    """
    ordered = sorted(candidates, key=lambda c: c.id)
    ranked = sorted(ordered, key=lambda c: c.value, reverse=True)
    total_weight = len(ranked) * (len(ranked) + 1) / 2
    return {c.id: (len(ranked) - rank) / total_weight for rank, c in enumerate(ranked)}


def q_value(value: float, visits: int, best_child: float | None) -> float:
    """`best_child` Q: the best child value once the node has visits and a valid child, else the
    node's own value."""
    if visits > 0 and best_child is not None:
        return float(best_child)
    return float(value)


def exploration_bonus(*, c: float, scale: float, prior: float, total: int, visits: int) -> float:
    """`c * scale * P * sqrt(1 + T) / (1 + n)`, multiplied in the reference's order so that
    results agree bit for bit."""
    return c * scale * prior * math.sqrt(1.0 + float(total)) / (1.0 + float(visits))


def puct_score(
    *,
    value: float,
    visits: int,
    best_child: float | None,
    prior: float,
    scale: float,
    total: int,
    c: float = PUCT_C,
) -> float:
    """The PUCT score of one candidate: Q plus the exploration bonus."""
    bonus = exploration_bonus(c=c, scale=scale, prior=prior, total=total, visits=visits)
    return q_value(value, visits, best_child) + bonus


def rank(
    candidates: Iterable[Candidate],
    *,
    visits: Mapping[str, int],
    best_child: Mapping[str, float],
    total: int,
    c: float = PUCT_C,
) -> list[Ranked]:
    """Score every candidate and return them best first, ordered by `(score, value, id)`
    descending. `visits` is `puct_n`, `best_child` is `puct_m`, `total` is `puct_T`; missing keys
    mean zero visits / no valid child."""
    pool = list(candidates)
    scale = value_scale(pool)
    priors = rank_priors(pool)
    ranked = []
    for cand in pool:
        n = int(visits.get(cand.id, 0))
        q = q_value(cand.value, n, best_child.get(cand.id))
        bonus = exploration_bonus(c=c, scale=scale, prior=priors[cand.id], total=total, visits=n)
        ranked.append(Ranked(cand.id, q + bonus, cand.value, n, q, priors[cand.id], bonus))
    ranked.sort(key=lambda r: (r.score, r.value, r.id), reverse=True)
    return ranked
