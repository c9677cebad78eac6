"""Report → sample: the second pipeline stage of tttd.

Each report of a complete step references exactly one inference record (the guidance call of
that rollout); the sample is that call's recorded tokens, loss mask and rollout log-probs with
the report's score as reward. The sample carries its grid coordinates and the release that
served it under ``extra.reef.tttd``, and its comparison group as ``group_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from reef.core.batches import TrajectoryItem
from reef.core.plugins import NoSettings
from reef.pipeline_context import PipelineContext
from reef.record2record import Record2Record, ReportContext
from reef.record2task import ReportTasks
from reef.record2task.assembly import SampleAssembly, SampleAssemblySettings

from tttd.grouping import parsed_report
from tttd.report import comparison_set_name


def grid_coordinates(sample: TrajectoryItem) -> Mapping[str, Any]:
    """The ``{"step", "group", "rollout", "release_id"}`` a tttd sample carries.

    Raises ``ValueError`` for a sample that did not come through :class:`RolloutSamples`.
    """
    coordinates = sample.metadata.get("tttd")
    if not isinstance(coordinates, Mapping):
        raise ValueError("a tttd sample needs extra.reef.tttd with its step, group and rollout")
    return coordinates


class RolloutSamples(ReportTasks):
    """One report of one guidance call becomes one policy sample. Takes no config."""

    def __init__(self, context: PipelineContext) -> None:
        self.scenario = context.scenario
        # Single-call samples only: a tttd rollout is exactly one guidance completion.
        self.assembly = SampleAssembly(SampleAssemblySettings())

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        context: PipelineContext,
        record2record: Record2Record,
        environ: Mapping[str, str],
    ) -> Self:
        """Build the stage of one scenario; any config key is refused."""
        NoSettings.parse(config, plugin_class=cls)
        return cls(context)

    def make_sample(self, context: ReportContext) -> TrajectoryItem:
        """Assemble the report's one inference record with its score and coordinates.

        Raises ``ValueError`` for a report that references more than one inference record.
        """
        report = parsed_report(context)
        if len(context.inferences) != 1:
            raise ValueError(
                f"a tttd report references exactly one guidance call, report "
                f"{context.report.agent_record_id} references {len(context.inferences)}"
            )
        inference = context.inferences[0]
        release_id = inference.artifact_ref.release_id if inference.artifact_ref else None
        sample = self.assembly.build(context, context.require_score())
        sample = sample.with_metadata(
            tttd={
                "step": report.step,
                "group": report.group,
                "rollout": report.rollout,
                "release_id": release_id,
            }
        )
        return TrajectoryItem(
            sample.trajectory,
            group_id=comparison_set_name(report.step, report.group),
            source_agent_record_ids=sample.source_agent_record_ids,
        )
