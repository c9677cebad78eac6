"""The tttd report contract (docs/training.md, "How the tttd method works"), parsed exactly as
Reef's ingress parses it."""

from __future__ import annotations

import math

import pytest
from reef.core.reports import ReportValidationError

from tttd.report import TTTDReport, comparison_set_name, configured_grid_of, grid_report_type


def body(score: object = 12.5, **metadata: object) -> dict[str, object]:
    """A harness-shaped report body for step 3, group 1, rollout 2 of a 2×4 grid."""
    fields: dict[str, object] = {
        "step": 3,
        "group": 1,
        "rollout": 2,
        "groups_per_step": 2,
        "rollouts_per_group": 4,
        "algorithm": "ttt-discover",
        "comparison_set": "tttd-step-3-group-1",
        "guidance_ttt": True,
        "parent_id": "node-7",
    }
    fields.update(metadata)
    return {"score": score, "feedback": "valid: ok", "references": ["r1"], "metadata": fields}


def without(key: str) -> dict[str, object]:
    payload = body()
    del payload["metadata"][key]  # type: ignore[attr-defined]
    return payload


def test_harness_report_parses_into_coordinates_and_ignores_extra_metadata():
    report = grid_report_type(2, 4).from_dict(body())
    assert (report.score, report.step, report.group, report.rollout) == (12.5, 3, 1, 2)
    assert (report.groups_per_step, report.rollouts_per_group) == (2, 4)
    assert report.algorithm == "ttt-discover"
    assert report.comparison_set == comparison_set_name(3, 1) == "tttd-step-3-group-1"


def test_optional_fields_default_to_tttd_without_comparison_set():
    payload = without("comparison_set")
    del payload["metadata"]["algorithm"]  # type: ignore[attr-defined]
    report = TTTDReport.from_dict(payload)
    assert report.algorithm == "tttd"
    assert report.comparison_set is None


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (body(group=2), "metadata.group must be in [0, 2), got 2"),
        (body(group=-1), "metadata.group must be in [0, 2), got -1"),
        (body(rollout=4), "metadata.rollout must be in [0, 4), got 4"),
        (body(step=-1, comparison_set=None), "metadata.step must be >= 0, got -1"),
        (body(rollouts_per_group=1, rollout=0), "metadata.rollouts_per_group must be >= 2"),
        (body(groups_per_step=0, group=0), "metadata.groups_per_step must be >= 1"),
        (body(algorithm="grpo"), "metadata.algorithm must be one of tttd, ttt-discover"),
        (body(comparison_set="tttd-step-3-group-0"), "must be 'tttd-step-3-group-1'"),
        (without("rollout"), "metadata.rollout is required"),
        (without("step"), "metadata.step is required"),
        (body(score=math.nan), "score must be finite"),
        (body(score=math.inf), "score must be finite"),
        (body(score=True), "score must be a number"),
        (body(score=None), "score must be a number"),
        ({key: value for key, value in body().items() if key != "score"}, "score is required"),
        (body(rollout=1.5), "metadata.rollout must be an integer"),
    ],
)
def test_contract_refuses_a_broken_report_naming_the_field(payload, message):
    with pytest.raises(ReportValidationError) as refused:
        grid_report_type(2, 4).from_dict(payload)
    assert message in str(refused.value)


def test_bound_contract_refuses_a_grid_that_differs_from_the_configured_one():
    payload = body(groups_per_step=8, rollouts_per_group=16)
    # The unbound contract only checks the shape, so this report is well-formed ...
    assert TTTDReport.from_dict(payload).rollouts_per_group == 16
    # ... but a 2×4 deployment refuses it, naming both grids.
    with pytest.raises(ReportValidationError, match=r"announces a 8x16 grid.*trains on 2x4"):
        grid_report_type(2, 4).from_dict(payload)


def test_bound_contract_is_one_class_per_grid_and_reports_its_grid():
    assert grid_report_type(2, 4) is grid_report_type(2, 4)
    assert grid_report_type(8, 16) is not grid_report_type(2, 4)
    assert configured_grid_of(grid_report_type(8, 16)) == (8, 16)
    with pytest.raises(ValueError, match="grid-bound tttd report type"):
        configured_grid_of(TTTDReport)


@pytest.mark.parametrize(("groups", "rollouts"), [(0, 4), (2, 1), (True, 4)])
def test_a_grid_no_report_could_fill_is_refused(groups, rollouts):
    with pytest.raises(ValueError):
        grid_report_type(groups, rollouts)


def test_report_round_trips_through_its_own_wire_body():
    report = grid_report_type(2, 4).from_dict(body())
    wire = report.to_dict(references=["r1"])
    assert wire["references"] == ["r1"]
    assert grid_report_type(2, 4).from_dict(wire) == report
