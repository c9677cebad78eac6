"""The tttd training method as a Reef 0.1.3 recipe plugin.

Select it in ``serve.yaml`` with ``recipe.implementation: tttd.recipe:TTTDRecipe``. The
modules follow the pipeline a report travels through:

- ``report``: the report contract (docs/training.md, "How the tttd method works"): one
  rollout's score and grid coordinates;
- ``grouping``: records → step sets (``StepGrouping``, a Reef ``ReportGrouping``): key ``step``,
  slot ``(group, rollout)``, ready at G·R slots, mixed releases discarded;
- ``samples``: report → policy sample with its coordinates;
- ``batches``: step → batch, constant-reward groups dropped, reward statistics logged;
- ``objective``: the registered ``TrainingObjective`` ``tttd`` (adaptive β, leave-one-out
  entropic advantages), pure math;
- ``slime``: the Slime loss family ``tttd`` (centred base KL, un-clipped importance sampling),
  torch, imported only by the training driver and its workers;
- ``tinker_loss``: the same family on Reef's Tinker backend (Tinker's built-in
  ``importance_sampling`` loss, its inputs shaped with the centred base KL), no torch;
- ``recipe``: the wiring and the ``groups-per-step`` / ``rollouts-per-group`` /
  ``checkpoint-every-n-versions`` settings.

Importing this package registers the loss family by *reference* only, once per backend (Slime
and Tinker), so the Reef service, which imports the recipe, never imports torch.
"""

from __future__ import annotations

from reef.train.algos.registry import register_loss_family_ref

#: The Slime spec of the loss family, imported lazily by the training driver and its workers.
LOSS_FAMILY_REFERENCE = "tttd.slime:TTTDAlgorithm"
#: The Tinker loss of the family, imported lazily by Reef's Tinker backend.
TINKER_LOSS_FAMILY_REFERENCE = "tttd.tinker_loss:TTTDTinkerLoss"

register_loss_family_ref("tttd", LOSS_FAMILY_REFERENCE)
register_loss_family_ref("tttd", TINKER_LOSS_FAMILY_REFERENCE, backend="tinker")
