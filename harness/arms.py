"""The experiment arms and parent-selection policies: what each one changes, as plain data.

An *arm* is one serve.yaml setting (`training.config.harness.experiment.arm`, or the same key
under `recipe.config.guidance-ttt.harness` in a frozen file); every arm runs through the same
rollout code (`harness.run.rollout`), and this module says what differs:

| arm            | guidance                                  | parents            | tree   |
|----------------|-------------------------------------------|--------------------|--------|
| `guidance-ttt` | the guidance model (trained, or frozen)   | `parent_selection` | grows  |
| `unguided`     | `UNGUIDED_INSTRUCTION`, no model call     | `parent_selection` | grows  |
| `best-of-n`    | `UNGUIDED_INSTRUCTION`, no model call     | a seed root        | stays  |

`best-of-n` is the null baseline (independent samples of the executor from the seed, the same
number of rollouts as the other arms); `unguided` is evolution without a strategist (the
executor sees the parent's code and score and one fixed instruction). So the arms answer, one
removed piece at a time: is it the trained guidance (trained vs frozen `guidance-ttt`), the
guidance at all (`guidance-ttt` vs `unguided`), the archive (`unguided` vs `best-of-n`), or just
the compute?

Parent selection (TTT-Discover's `sampler_type`): `puct` (rank-prior PUCT with the step's
lineage blocking, the reference's), `greedy` (every group expands the best archive candidate),
`uniform` (a candidate drawn uniformly, seeded by the run seed, step and group). Pure: nothing
here reads files or calls services.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

ARMS = ("guidance-ttt", "unguided", "best-of-n")
SELECTIONS = ("puct", "greedy", "uniform")
#: The selection a best-of-n arm uses internally: group g expands seed root g.
SEED_SELECTION = "seed"
DEFAULT_ARM = "guidance-ttt"
DEFAULT_SELECTION = "puct"
DEFAULT_RUN_SEED = 0

#: What the executor gets in place of guidance in the arms without a guidance model.
UNGUIDED_INSTRUCTION = (
    "Improve the selected parent program's score. Read the problem statement and the parent "
    "program, find its weakest part, and change the program so that it scores better while "
    "staying correct."
)

#: Entry metadata key: False when the rollout's candidate must not become an archive node (the
#: best-of-n arm). The archive reads it on submit, so a replayed journal rebuilds the same tree.
ADDS_TO_TREE = "adds_to_tree"

_ID_NAMESPACE = uuid.UUID("0d7f1c52-3b8e-4f43-9a1e-5c2d6b8e9f10")


@dataclass(frozen=True)
class Arm:
    """One arm of an experiment with its parent selection and run seed."""

    name: str = DEFAULT_ARM
    parent_selection: str = DEFAULT_SELECTION
    run_seed: int = DEFAULT_RUN_SEED

    def __post_init__(self) -> None:
        if self.name not in ARMS:
            raise ValueError(f"arm {self.name!r} is not one of {', '.join(ARMS)}")
        if self.parent_selection not in SELECTIONS:
            raise ValueError(
                f"parent_selection {self.parent_selection!r} is not one of {', '.join(SELECTIONS)}"
            )
        if isinstance(self.run_seed, bool) or not isinstance(self.run_seed, int):
            raise ValueError(f"run_seed {self.run_seed!r} is not an integer")

    @property
    def guided(self) -> bool:
        """True when rollouts call the guidance model (and so have a receipt and a report)."""
        return self.name == "guidance-ttt"

    @property
    def grows_tree(self) -> bool:
        """False for best-of-n: no candidate becomes a node, every parent is a seed root."""
        return self.name != "best-of-n"

    @property
    def selection(self) -> str:
        """The policy the archive applies when it picks a step's parents."""
        return self.parent_selection if self.grows_tree else SEED_SELECTION

    def label(self) -> str:
        """`guidance-ttt`, or `unguided/greedy` when the selection is not the default."""
        if not self.grows_tree or self.parent_selection == DEFAULT_SELECTION:
            return self.name
        return f"{self.name}/{self.parent_selection}"

    def entry_id(self, step: int, group: int, rollout: int) -> str:
        """The library entry id of a slot: derived from the run seed, so two runs with the same
        seed name their entries alike (and a run's archive is reproducible)."""
        return str(uuid.uuid5(_ID_NAMESPACE, f"entry:{self.run_seed}:{step}:{group}:{rollout}"))

    def sampling_seed(self, step: int, group: int, rollout: int) -> int:
        """The sampling seed sent with the slot's executor request (31 bits, as APIs take)."""
        return derived_seed(self.run_seed, "sample", step, group, rollout)


def derived_seed(run_seed: int, *parts: object) -> int:
    """A 31-bit integer derived from the run seed and `parts` (stable across processes)."""
    text = ":".join(str(p) for p in (run_seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def root_id(run_seed: int, index: int) -> str:
    """The node id of seed root `index` of a fresh archive made with `run_seed`."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"root:{run_seed}:{index}"))


def clone_entry_id(run_seed: int, index: int) -> str:
    """The entry id of seed clone `index` (≥ 1) of a fresh archive made with `run_seed`."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"seed-clone:{run_seed}:{index}"))
