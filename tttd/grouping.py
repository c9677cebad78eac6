"""Records → step sets: the first pipeline stage of tttd.

One training step is one G×R grid of reports. ``StepGrouping`` is the report policy Reef's
``ReportRecord2Record`` consults: the batching key is the step and the serving load that
answered the report's guidance call (its inference record's ``runtime_load_id``), the slot is
``(group, rollout)``, Reef keeps the first durable report of a slot and ends later ones, and the
step stays INCOMPLETE until all G·R slots are filled under one load. A complete step whose
inference records were served by more than one release is DISCARDED (its rewards are not
comparable). Unlike Reef itself, the grouping can say which slots of an open step are still
missing, and ``status()`` does.

Why the load is part of the key: a restarted Reef serves under a new load, and Reef's Tinker
trainer refuses a batch holding a call of any other load (``max_staleness`` 0). The reports a
step received before the restart stay in Reef's store and are read back; keyed by their load
they form a group of their own that never trains, so a resumed run can report the step's slots
again under the new load (``harness.run.step_loop``) without the old reports filling them. A
record without a load (no training capture) keys under ``""``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping
from typing import Any, Self

from reef.core.plugins import NoSettings, PluginConfigError
from reef.pipeline_context import PipelineContext
from reef.record2record import GroupDecision, ReportContext, ReportGrouping, ReportRecord2Record

from tttd.report import TTTDReport, configured_grid_of

log = logging.getLogger(__name__)

MIXED_RELEASE_IDS = "mixed_release_ids"


def parsed_report(context: ReportContext) -> TTTDReport:
    """The report's tttd coordinates, as Reef parsed them with the scenario's contract.

    Raises ``ValueError`` when the scenario was not bound to the tttd contract.
    """
    parsed = context.parsed_report
    if not isinstance(parsed, TTTDReport):
        raise ValueError(
            f"report {context.report.agent_record_id} was not parsed with the tttd report "
            f"contract (got {type(parsed).__name__}); select the tttd recipe"
        )
    return parsed


def serving_load(context: ReportContext) -> str:
    """The runtime load that served the report's inference records (``""`` when none says)."""
    loads = sorted(
        {
            str(inference.payload.get("runtime_load_id"))
            for inference in context.inferences
            if inference.payload.get("runtime_load_id")
        }
    )
    return loads[-1] if loads else ""


def release_ids(members: tuple[ReportContext, ...]) -> tuple[str, ...]:
    """The distinct releases that served the members' inference records, sorted.

    A record served without a release (no artifact reference) contributes none.
    """
    found = {
        inference.artifact_ref.release_id
        for member in members
        for inference in member.inferences
        if inference.artifact_ref is not None
    }
    return tuple(sorted(found))


class StepGrouping(ReportGrouping):
    """Batch one whole step: key ``(step, load)``, slot ``(group, rollout)``, ready at G·R slots.

    ``decide`` runs on Reef's trainer thread; ``status`` may be read from the HTTP thread, so
    the bookkeeping behind it is guarded by a lock.
    """

    def __init__(self, groups_per_step: int, rollouts_per_group: int) -> None:
        self.groups_per_step = groups_per_step
        self.rollouts_per_group = rollouts_per_group
        self._lock = threading.Lock()
        #: Per step that is neither ready nor discarded: the load of its latest report's group
        #: and that group's filled slots (a group of an earlier load never trains).
        self._open: dict[int, tuple[str, frozenset[tuple[int, int]]]] = {}
        #: Discarded steps and the releases their reports spanned.
        self._failed: dict[int, tuple[str, ...]] = {}

    @property
    def slots_per_step(self) -> int:
        """G·R: the reports one step needs before it can train."""
        return self.groups_per_step * self.rollouts_per_group

    def placement(self, context: ReportContext) -> tuple[Hashable | None, Hashable | None]:
        """``(step, load)`` is the report's batching key and ``(group, rollout)`` its slot."""
        report = parsed_report(context)
        return (report.step, serving_load(context)), (report.group, report.rollout)

    def decide(self, key: Hashable, members: tuple[ReportContext, ...]) -> GroupDecision:
        """INCOMPLETE until every slot is filled; then READY, or DISCARD on mixed releases."""
        if not (
            isinstance(key, tuple)
            and len(key) == 2
            and isinstance(key[0], int)
            and isinstance(key[1], str)
        ):
            raise TypeError(f"a tttd group key must be (step, load), got {key!r}")
        step, load = key
        filled = frozenset(
            (parsed_report(member).group, parsed_report(member).rollout) for member in members
        )
        if len(filled) < self.slots_per_step:
            with self._lock:
                self._open[step] = (load, filled)
            return GroupDecision.INCOMPLETE
        releases = release_ids(members)
        with self._lock:
            if self._open.get(step, (load,))[0] == load:
                self._open.pop(step, None)
            if len(releases) > 1:
                self._failed[step] = releases
        if len(releases) > 1:
            log.error(
                "tttd step %d discarded: its %d reports span releases %s",
                step,
                len(members),
                list(releases),
            )
            return GroupDecision.DISCARD
        return GroupDecision.READY

    def missing_slots(self, step: int) -> tuple[tuple[int, int], ...]:
        """The ``(group, rollout)`` slots of an open step that no report of its latest load has
        filled, in order. A step that is not open (never seen, ready or discarded) has none.
        """
        with self._lock:
            group = self._open.get(step)
        return () if group is None else self._unfilled(group[1])

    def _unfilled(self, filled: frozenset[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
        return tuple(
            (group, rollout)
            for group in range(self.groups_per_step)
            for rollout in range(self.rollouts_per_group)
            if (group, rollout) not in filled
        )

    def status(self) -> Mapping[str, Any]:
        """JSON-safe grid state: the grid, each open step's missing slots, and discarded steps.

        ``failed_steps`` entries are ``{"step", "reason": "mixed_release_ids", "release_ids"}``.
        """
        with self._lock:
            open_steps = sorted(self._open.items())
            failed = sorted(self._failed.items())
        return {
            "groups_per_step": self.groups_per_step,
            "rollouts_per_group": self.rollouts_per_group,
            "open_steps": [
                {
                    "step": step,
                    "filled": len(filled),
                    "expected": self.slots_per_step,
                    "missing": [
                        {"group": group, "rollout": rollout}
                        for group, rollout in self._unfilled(filled)
                    ],
                }
                for step, (_, filled) in open_steps
            ],
            "failed_steps": [
                {"step": step, "reason": MIXED_RELEASE_IDS, "release_ids": list(releases)}
                for step, releases in failed
            ],
        }


class StepRecords(ReportRecord2Record):
    """Reef's report stage with the step grouping: each report owns its one inference record,
    and complete steps go to training in step order. Takes no config; the grid is the one the
    recipe bound into the scenario's report contract."""

    def __init__(self, context: PipelineContext) -> None:
        groups_per_step, rollouts_per_group = configured_grid_of(context.report_type)
        self.step_grouping = StepGrouping(groups_per_step, rollouts_per_group)
        super().__init__(context, self.step_grouping, exclusive_sources=True, ordered_groups=True)

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, context: PipelineContext, environ: Mapping[str, str]
    ) -> Self:
        """Build the stage of one scenario; any config key is refused."""
        NoSettings.parse(config, plugin_class=cls)
        try:
            return cls(context)
        except ValueError as exc:
            raise PluginConfigError(str(exc)) from exc
