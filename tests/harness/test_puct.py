"""Rank-prior PUCT on hand-computed examples (docs/design.md §2)."""

from __future__ import annotations

import math

import pytest

from harness.puct import Candidate, puct_score, q_value, rank, rank_priors, value_scale

ROOT = Candidate("r", 1.0, True)
A = Candidate("a", 3.0, False)
B = Candidate("b", 2.0, False)


def test_scale_is_the_value_spread_over_non_roots():
    assert value_scale([ROOT, A, B]) == 1.0  # 3 - 2; the root's 1.0 is ignored
    assert value_scale([Candidate("x", 2.0, True), Candidate("y", 7.0, True)]) == 5.0
    assert value_scale([ROOT, A]) == 1e-6  # a single non-root has no spread
    assert value_scale([]) == 1.0


def test_rank_prior_is_linear_in_rank_and_sums_to_one():
    assert rank_priors([ROOT, A, B]) == {"a": 3 / 6, "b": 2 / 6, "r": 1 / 6}
    priors = rank_priors([Candidate(str(i), float(i % 4), False) for i in range(9)])
    assert math.isclose(sum(priors.values()), 1.0)


def test_rank_prior_ties_go_to_the_smaller_id():
    priors = rank_priors([Candidate("z", 5.0, False), Candidate("m", 5.0, False)])
    assert priors == {"m": 2 / 3, "z": 1 / 3}


def test_hand_computed_scores_and_order():
    # scale 1, priors a 1/2, b 1/3, r 1/6, T = 8 so sqrt(1 + T) = 3
    ranked = rank([ROOT, A, B], visits={"r": 4, "a": 1}, best_child={"r": 3.0, "a": 2.5}, total=8)
    by_id = {r.id: r for r in ranked}
    assert by_id["a"].q == 2.5 and by_id["a"].bonus == pytest.approx(0.5 * 3 / 2)
    assert by_id["a"].score == pytest.approx(3.25)
    assert by_id["b"].q == 2.0 and by_id["b"].score == pytest.approx(2.0 + 3 / 3)
    assert by_id["r"].q == 3.0 and by_id["r"].score == pytest.approx(3.0 + (3 / 6) / 5)
    assert [r.id for r in ranked] == ["a", "r", "b"]


def test_unvisited_node_uses_its_own_value_even_with_a_best_child():
    assert q_value(4.0, 0, 9.0) == 4.0
    assert q_value(4.0, 2, None) == 4.0
    assert q_value(4.0, 2, 9.0) == 9.0


def test_best_child_with_prior_zero_and_c_zero_is_exactly_the_best_child_value():
    common = {"value": 1.0, "visits": 3, "best_child": 7.25, "scale": 2.0, "total": 10}
    assert puct_score(prior=0.0, c=0.0, **common) == 7.25
    assert puct_score(prior=0.0, c=1.0, **common) == 7.25
    assert puct_score(prior=0.5, c=0.0, **common) == 7.25


def test_equal_scores_are_ordered_by_value_then_id_descending():
    ranked = rank(
        [Candidate("a", 5.0, True), Candidate("b", 5.0, True), Candidate("c", 4.0, True)],
        visits={"c": 1},
        best_child={"c": 5.0},
        total=3,
        c=0.0,
    )
    # all three score 5.0; c has the lower own value, a and b tie on value too
    assert [r.id for r in ranked] == ["b", "a", "c"]
