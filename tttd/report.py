"""The tttd report contract: one scored rollout addressed into its step's G×R grid.

The harness reports each rollout with its coordinates under ``metadata``; Reef parses the body
with this type at ingress (HTTP 400 on refusal, before anything is stored) and again when the
pipeline replays stored records. A deployment binds the contract to its configured grid with
:func:`grid_report_type`, so a report that announces another grid is refused at the door too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

from reef.core.reports import ReportBase, ReportValidationError

#: The algorithm names a report may announce; the harness sends ``ttt-discover``.
ALGORITHMS = ("tttd", "ttt-discover")


def comparison_set_name(step: int, group: int) -> str:
    """The comparison-set label of one group of one step: ``tttd-step-{step}-group-{group}``.

    The harness sends it and the contract checks it, so both sides use this one spelling.
    """
    return f"tttd-step-{step}-group-{group}"


@dataclass(frozen=True)
class TTTDReport(ReportBase):
    """One rollout's reward (top-level ``score``) and its grid coordinates (under ``metadata``).

    Field names are the wire names. ``configured_grid`` is ``None`` on this unbound contract
    (shape rules only); the subclass :func:`grid_report_type` returns also refuses a report
    whose ``groups_per_step``/``rollouts_per_group`` differ from the deployment's grid.
    """

    score: float
    step: int
    groups_per_step: int
    rollouts_per_group: int
    group: int
    rollout: int
    algorithm: str = "tttd"
    comparison_set: str | None = None

    configured_grid: ClassVar[tuple[int, int] | None] = None

    def validate(self) -> None:
        """Refuse a report whose coordinates or labels break the grid contract, naming the field."""
        if self.step < 0:
            raise ReportValidationError(f"metadata.step must be >= 0, got {self.step}")
        if self.groups_per_step < 1:
            raise ReportValidationError(
                f"metadata.groups_per_step must be >= 1, got {self.groups_per_step}"
            )
        if self.rollouts_per_group < 2:
            raise ReportValidationError(
                f"metadata.rollouts_per_group must be >= 2 (a group of one has no relative "
                f"reward), got {self.rollouts_per_group}"
            )
        if not 0 <= self.group < self.groups_per_step:
            raise ReportValidationError(
                f"metadata.group must be in [0, {self.groups_per_step}), got {self.group}"
            )
        if not 0 <= self.rollout < self.rollouts_per_group:
            raise ReportValidationError(
                f"metadata.rollout must be in [0, {self.rollouts_per_group}), got {self.rollout}"
            )
        if self.algorithm not in ALGORITHMS:
            raise ReportValidationError(
                f"metadata.algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}"
            )
        expected = comparison_set_name(self.step, self.group)
        if self.comparison_set is not None and self.comparison_set != expected:
            raise ReportValidationError(
                f"metadata.comparison_set must be {expected!r} for step {self.step} group "
                f"{self.group}, got {self.comparison_set!r}"
            )
        grid = type(self).configured_grid
        if grid is not None and (self.groups_per_step, self.rollouts_per_group) != grid:
            raise ReportValidationError(
                f"report announces a {self.groups_per_step}x{self.rollouts_per_group} grid "
                f"(metadata.groups_per_step x metadata.rollouts_per_group); this scenario trains "
                f"on {grid[0]}x{grid[1]} (recipe.config groups-per-step x rollouts-per-group)"
            )


@functools.cache
def grid_report_type(groups_per_step: int, rollouts_per_group: int) -> type[TTTDReport]:
    """The contract bound to one configured grid: a cached ``TTTDReport`` subclass.

    Cached so every call for the same grid returns the identical class (Reef compares report
    types by identity). Raises ``ValueError`` for a grid no report could fill.
    """
    if isinstance(groups_per_step, bool) or not isinstance(groups_per_step, int):
        raise ValueError(f"groups_per_step must be an integer, got {groups_per_step!r}")
    if isinstance(rollouts_per_group, bool) or not isinstance(rollouts_per_group, int):
        raise ValueError(f"rollouts_per_group must be an integer, got {rollouts_per_group!r}")
    if groups_per_step < 1:
        raise ValueError(f"groups_per_step must be >= 1, got {groups_per_step}")
    if rollouts_per_group < 2:
        raise ValueError(
            f"rollouts_per_group must be >= 2 (a group of one has no relative reward), "
            f"got {rollouts_per_group}"
        )
    name = f"TTTDReport{groups_per_step}x{rollouts_per_group}"
    return type(
        name,
        (TTTDReport,),
        {
            "configured_grid": (groups_per_step, rollouts_per_group),
            "__module__": __name__,
            "__qualname__": name,
            "__doc__": f"The tttd report contract bound to a {groups_per_step}x"
            f"{rollouts_per_group} grid.",
        },
    )


def configured_grid_of(report_type: type | None) -> tuple[int, int]:
    """The ``(groups_per_step, rollouts_per_group)`` a pipeline's report type is bound to.

    The pipeline stages read their grid from the contract the recipe bound, so the grid has a
    single source. Raises ``ValueError`` when the scenario's report type is not a bound one.
    """
    grid = getattr(report_type, "configured_grid", None)
    if not (isinstance(report_type, type) and issubclass(report_type, TTTDReport)) or grid is None:
        raise ValueError(
            f"the tttd pipeline needs the grid-bound tttd report type (from the tttd recipe), "
            f"got {report_type!r}"
        )
    return grid
