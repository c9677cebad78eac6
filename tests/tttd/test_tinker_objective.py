"""tttd on Tinker held to TTT-Discover's own Tinker recipe, on recorded batches.

The anchor is test-time-training/discover at commit 96df74ffa7c4de04fb0be1c2ac332c7455fb4010:
``tinker_cookbook/rl/train.py`` (``compute_advantages``, estimator ``entropic_adaptive_beta``),
``tinker_cookbook/rl/data_processing.py`` (``trajectory_to_data``, ``assemble_training_data``)
and ``tinker_cookbook/rl/metrics.py`` (``incorporate_kl_penalty``). Its loss is Tinker's
built-in ``importance_sampling``.

Two layers:

- ``ANCHOR_*`` below is a small transcription of the anchor's formulas (pure Python), so the
  comparison runs everywhere;
- when the anchor's checkout is in ``.upstream/discover`` and the Tinker SDK and torch are
  installed, the anchor's own functions are run on the same batches and compared both with
  tttd and with the transcription.

The recorded batches hold a group with varied rewards, one with all-equal rewards, one where a
single rollout is valid (the others failed and scored 0), and a group of one rollout. Every
difference between the two sides beyond float tolerance is a row of docs/differences.md.
"""

from __future__ import annotations

import ast
import asyncio
import math
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from reef.core.batches import TrainingBatch, TrajectoryItem
from reef.runtime.interfaces import TrainingMethod
from reef.train.tinker_backend.losses import TokenRow, resolve_tinker_loss, row_from_payload
from reef.train.tinker_backend.preparation import prepare_tinker_step

import tttd
from tttd.recipe import TTTDRecipe
from tttd.tinker_loss import (
    RecordedRollout,
    TTTDTinkerLoss,
    kl_folded_advantages,
    recorded_batch_inputs,
)

REPO = Path(__file__).resolve().parents[2]
ANCHOR = REPO / ".upstream" / "discover"
ANCHOR_COMMIT = "96df74ffa7c4de04fb0be1c2ac332c7455fb4010"
FETCH = (
    "git clone https://github.com/test-time-training/discover .upstream/discover && "
    f"git -C .upstream/discover checkout {ANCHOR_COMMIT}"
)
KL_COEF = 0.1

# -- the recorded batches -------------------------------------------------------------------

VARIED = (0.21, 0.55, 0.93, 0.08)
ALL_EQUAL = (0.4, 0.4, 0.4, 0.4)
SINGLE_VALID = (0.0, 0.0, 0.71, 0.0)
ONE_ROLLOUT = (0.37,)


def recorded_group(seed: int, rewards: tuple[float, ...]) -> list[RecordedRollout]:
    """Rollouts with varied prompt and response lengths and plausible log-probs (mask all 1:
    TTT-Discover's sampler masks no response token)."""
    rng = random.Random(seed)
    rollouts = []
    for reward in rewards:
        prompt = rng.randint(2, 6)
        response = rng.randint(1, 7)
        rollouts.append(
            RecordedRollout(
                tokens=tuple(rng.randrange(50_000) for _ in range(prompt + response)),
                mask=(1,) * response,
                rollout_logprobs=tuple(-rng.uniform(0.01, 4.0) for _ in range(response)),
                base_logprobs=tuple(-rng.uniform(0.01, 4.0) for _ in range(response)),
                reward=reward,
            )
        )
    return rollouts


BATCHES = {
    "varied+all-equal": [recorded_group(1, VARIED), recorded_group(2, ALL_EQUAL)],
    "single-valid": [recorded_group(3, SINGLE_VALID), recorded_group(4, VARIED)],
    "one-rollout+all-equal": [recorded_group(5, ONE_ROLLOUT), recorded_group(6, ALL_EQUAL)],
}

# -- the transcription of the anchor (commit ANCHOR_COMMIT) ---------------------------------


def anchor_advantages(rewards: tuple[float, ...]) -> list[float]:
    """``compute_advantages(..., adv_estimator="entropic_adaptive_beta")``, tinker_cookbook/rl/
    train.py: β from hi = 1 doubled while KL(q_β‖uniform) < ln 2 and hi < 1e6 (kept as is if
    the KL never reaches ln 2, else [0, hi] bisected 60 times, β = hi); then
    A_i = e_i / ((Σ e − e_i)/(k−1) + 1e-12) − 1 with e_i = exp(β (r_i − max r)); a group of
    one gets β = 0 and A = e/(e + 1e-12) − 1."""
    k = len(rewards)
    top = max(rewards)

    def kl_hat(beta: float) -> float:
        logits = [beta * (reward - top) for reward in rewards]
        log_z = math.log(math.fsum(math.exp(logit) for logit in logits))
        return math.fsum(
            math.exp(logit - log_z) * (logit - log_z + math.log(k)) for logit in logits
        )

    beta = 0.0
    if k >= 2:
        lo, hi, bisect = 0.0, 1.0, True
        if kl_hat(hi) < math.log(2):
            while hi < 1e6 and kl_hat(hi) < math.log(2):
                hi *= 2.0
            bisect = kl_hat(hi) >= math.log(2)
        if bisect:
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if kl_hat(mid) < math.log(2) else (lo, mid)
        beta = hi
    e = [math.exp(beta * (reward - top)) for reward in rewards]
    z = e if k == 1 else [(math.fsum(e) - value) / (k - 1) for value in e]
    return [value / (norm + 1e-12) - 1.0 for value, norm in zip(e, z, strict=True)]


def anchor_inputs(groups: list[list[RecordedRollout]], kl_coef: float) -> list[dict[str, list]]:
    """``trajectory_to_data`` (one transition: prompt = observation, response = action) and
    ``incorporate_kl_penalty``, tinker_cookbook/rl/{data_processing,metrics}.py: position t of
    the datum predicts token t+1; the action's positions carry the trajectory advantage, then
    every position gains kl_coef·mask·(d̄ − d) with d = (logp_sampled − logp_base)·mask and d̄
    its sum over all data divided by the mask's sum."""
    data = []
    for group in groups:
        advantages = anchor_advantages(tuple(rollout.reward for rollout in group))
        for rollout, advantage in zip(group, advantages, strict=True):
            pad = len(rollout.tokens) - len(rollout.mask)
            data.append(
                {
                    "target_tokens": list(rollout.tokens[1:]),
                    "logprobs": ([0.0] * pad + list(rollout.rollout_logprobs))[1:],
                    "advantages": ([0.0] * pad + [advantage] * len(rollout.mask))[1:],
                    "mask": ([0.0] * pad + [float(m) for m in rollout.mask])[1:],
                    "base": ([0.0] * pad + list(rollout.base_logprobs))[1:],
                }
            )
    diffs = [
        [(s - b) * m for s, b, m in zip(d["logprobs"], d["base"], d["mask"], strict=True)]
        for d in data
    ]
    mean = math.fsum(map(math.fsum, diffs)) / math.fsum(math.fsum(d["mask"]) for d in data)
    return [
        {
            "target_tokens": d["target_tokens"],
            "logprobs": d["logprobs"],
            "advantages": [
                a + kl_coef * m * (mean - diff)
                for a, m, diff in zip(d["advantages"], d["mask"], row, strict=True)
            ],
        }
        for d, row in zip(data, diffs, strict=True)
    ]


def assert_same_inputs(ours: list[dict[str, list]], theirs: list[dict[str, list]]) -> None:
    """Equal target tokens; log-probs and advantages within float32 tolerance (Tinker sends
    both as float32, and the anchor computes its advantages in float32)."""
    assert len(ours) == len(theirs)
    for index, (mine, other) in enumerate(zip(ours, theirs, strict=True)):
        assert list(mine["target_tokens"]) == list(other["target_tokens"]), index
        for key in ("logprobs", "advantages"):
            assert list(mine[key]) == pytest.approx(list(other[key]), rel=1e-5, abs=1e-6), (
                index,
                key,
            )


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_tttd_inputs_equal_the_transcribed_anchor(name: str) -> None:
    groups = BATCHES[name]
    assert_same_inputs(recorded_batch_inputs(groups, KL_COEF), anchor_inputs(groups, KL_COEF))


def test_the_batches_exercise_the_edge_groups() -> None:
    """All-equal and single-valid groups get a zero and a positive-winner advantage; the KL
    term moves the per-token advantages but has zero mean over the selected tokens."""
    inputs = recorded_batch_inputs(BATCHES["single-valid"], KL_COEF)
    group = BATCHES["single-valid"][0]
    winner = SINGLE_VALID.index(max(SINGLE_VALID))
    without_kl = [anchor_advantages(SINGLE_VALID)[i] for i in range(len(group))]
    assert without_kl[winner] > 0 > max(a for i, a in enumerate(without_kl) if i != winner)
    equal = anchor_advantages(ALL_EQUAL)
    assert equal == pytest.approx([0.0] * len(ALL_EQUAL), abs=1e-9)
    rows = BATCHES["single-valid"][0] + BATCHES["single-valid"][1]
    added = []
    for row, datum, base in zip(
        rows, inputs, [*without_kl, *anchor_advantages(VARIED)], strict=True
    ):
        response = datum["advantages"][-len(row.mask) :]
        added += [value - base for value in response]
    assert any(abs(value) > 1e-3 for value in added)
    assert math.fsum(added) == pytest.approx(0.0, abs=1e-9)


def test_a_masked_response_token_gets_no_advantage() -> None:
    """Tinker's importance_sampling has no mask input: a token the loss mask drops must carry
    advantage 0 (tttd's Slime loss multiplies by the mask; docs/differences.md row 81)."""
    row = TokenRow((1, 2, 3, 4, 5), (1, 0, 1), (-0.5, -1.0, -2.0), 0.75)
    (inputs,) = TTTDTinkerLoss().inputs([row], [(-0.4, -3.0, -1.0)], kl_coef=KL_COEF)
    assert inputs["target_tokens"] == [2, 3, 4, 5]
    assert inputs["logprobs"] == [0.0, -0.5, -1.0, -2.0]
    mean = ((-0.5 + 0.4) + (-2.0 + 1.0)) / 2
    assert inputs["advantages"] == pytest.approx(
        [0.0, 0.75 + KL_COEF * (mean + 0.1), 0.0, 0.75 + KL_COEF * (mean + 1.0)]
    )


def test_two_rollout_groups_with_close_rewards_differ_as_documented() -> None:
    """docs/differences.md row 80: with n = 2 the KL only approaches ln 2, so
    for close rewards both searches end at their cap — tttd's 10⁶, the anchor's doubling at
    2²⁰ — and the winner's advantage differs; a clear winner saturates on both sides alike."""
    from tttd.objective import BETA_CAP, adaptive_beta, entropic_advantages

    close = (0.5, 0.50001)
    assert adaptive_beta(close) == pytest.approx(BETA_CAP)
    assert entropic_advantages(close)[1] == pytest.approx(math.exp(BETA_CAP * 1e-5) - 1, rel=1e-3)
    assert anchor_advantages(close)[1] == pytest.approx(math.exp(2.0**20 * 1e-5) - 1, rel=1e-3)
    clear = (0.5, 0.6)
    assert entropic_advantages(clear) == pytest.approx(anchor_advantages(clear), rel=1e-5)


@pytest.mark.parametrize("coef", [0.0, -0.1, math.nan, True])
def test_a_kl_coefficient_tttd_does_not_define_is_refused(coef: Any) -> None:
    with pytest.raises(ValueError, match=r"kl-coef > 0 \(tttd uses 0.1\), got"):
        TTTDTinkerLoss().check_kl_coef(coef)
    with pytest.raises(ValueError, match="kl-coef > 0"):
        kl_folded_advantages([0.5], [(1,)], [(-1.0,)], [(-1.0,)], coef)


def test_rows_without_base_logprobs_are_refused_naming_the_setting() -> None:
    row = TokenRow((1, 2, 3), (1,), (-0.5,), 0.5)
    with pytest.raises(ValueError, match="got 0 lists for 1 rows; set the backend's kl_coef"):
        TTTDTinkerLoss().inputs([row], [], kl_coef=KL_COEF)
    with pytest.raises(ValueError, match="row 0 has 1 mask values, 1 rollout log-probs and 2"):
        TTTDTinkerLoss().inputs([row], [(-0.1, -0.2)], kl_coef=KL_COEF)


def test_reef_resolves_tttd_for_the_tinker_backend() -> None:
    """Importing the recipe package registers the family for Tinker; Reef's own resolver
    imports it, no Tinker account or SDK involved."""
    assert tttd.TINKER_LOSS_FAMILY_REFERENCE == "tttd.tinker_loss:TTTDTinkerLoss"
    loss = resolve_tinker_loss("tttd")
    assert isinstance(loss, TTTDTinkerLoss)
    assert loss.loss_fn == "importance_sampling"
    assert loss.needs_base_logprobs


def recorded_training_batch(groups: list[list[RecordedRollout]]) -> TrainingBatch:
    """The recorded groups as Reef's training batch: captured tensors under extra.reef."""
    items = []
    for index, group in enumerate(groups):
        for rollout in group:
            training = {
                "tokens": list(rollout.tokens),
                "loss_mask": list(rollout.mask),
                "rollout_log_probs": list(rollout.rollout_logprobs),
                "response_length": len(rollout.mask),
            }
            document = {
                "schema_version": "ATIF-v1.7",
                "agent": {"name": "guidance", "version": "0"},
                "steps": [{"step_id": 1, "source": "agent", "message": "guidance"}],
                "extra": {"reef": {"reward": rollout.reward, "training": training}},
            }
            items.append(TrajectoryItem(document, group_id=f"tttd-step-0-group-{index}"))
    return TrainingBatch("s:tttd:0", tuple(items))


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_reefs_tinker_step_preparation_gives_the_compared_inputs(name: str) -> None:
    """The recipe's objective and scheduling through Reef's own Tinker step preparation, then
    the loss Reef resolves from the payload: the inputs compared with the anchor above."""
    groups = BATCHES[name]
    spec = TTTDRecipe.training_spec()
    step = prepare_tinker_step(
        recorded_training_batch(groups),
        TrainingMethod(spec.objective),
        {},
        spec.scheduling,
        batch_size=1,
        kl_coef=KL_COEF,
    )
    assert step.action == "train"
    (rows,) = step.payload["batches"]  # one optimizer step over the whole batch
    loss = resolve_tinker_loss(step.payload["loss"])
    base = [rollout.base_logprobs for group in groups for rollout in group]
    inputs = loss.inputs([row_from_payload(row) for row in rows], base, kl_coef=KL_COEF)
    assert_same_inputs(inputs, recorded_batch_inputs(groups, KL_COEF))


def test_reef_refuses_a_zero_kl_coefficient_before_sending_anything() -> None:
    spec = TTTDRecipe.training_spec()
    with pytest.raises(ValueError, match=r"needs kl-coef > 0 \(tttd uses 0.1\), got 0.0"):
        prepare_tinker_step(
            recorded_training_batch(BATCHES["single-valid"]),
            TrainingMethod(spec.objective),
            {},
            spec.scheduling,
            batch_size=1,
            kl_coef=0.0,
        )


# -- the anchor's own code, when its checkout is present ------------------------------------


def _anchor_functions(path: Path, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """The named top-level functions of one anchor file, executed from its own source (the
    file's other imports — chz, wandb — are not needed by these functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    chosen = [node for node in tree.body if getattr(node, "name", None) in names]
    assert {node.name for node in chosen} == names, f"{path} lacks {names}"
    exec(compile(ast.Module(chosen, []), str(path), "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def anchor() -> SimpleNamespace:
    if not (ANCHOR / "tinker_cookbook" / "rl" / "metrics.py").is_file():
        pytest.skip(f"TTT-Discover's checkout is not in .upstream/discover; fetch it: {FETCH}")
    tinker = pytest.importorskip("tinker", reason="the anchor needs the Tinker SDK (tinker 0.33.1)")
    torch = pytest.importorskip("torch")
    import numpy as np

    monkey = pytest.MonkeyPatch()
    monkey.syspath_prepend(str(ANCHOR))
    loaded = set(sys.modules)
    try:
        from tinker_cookbook.rl import metrics
        from tinker_cookbook.supervised.common import (
            create_rightshifted_model_input_and_leftshifted_targets,
        )
        from tinker_cookbook.utils.misc_utils import safezip
    finally:
        monkey.undo()
        # The functions keep their modules; later imports must not find the anchor's package.
        for module in set(sys.modules) - loaded:
            if module.split(".")[0] == "tinker_cookbook":
                del sys.modules[module]
    if not Path(metrics.__file__).is_relative_to(ANCHOR):
        pytest.fail(
            f"tinker_cookbook was imported from {metrics.__file__}, not from {ANCHOR}: an "
            "installed tinker-cookbook shadows the anchor; run this module in its own process"
        )
    rl = ANCHOR / "tinker_cookbook" / "rl"
    common = {"torch": torch, "tinker": tinker, "np": np, "math": math, "List": list}
    train = _anchor_functions(
        rl / "train.py", {"compute_advantages"}, {**common, "TrajectoryGroup": object}
    )
    processing = _anchor_functions(
        rl / "data_processing.py",
        {
            "_is_prefix",
            "_flat_ob_token_len",
            "_flat_ob_to_model_input",
            "_flatten_chunks",
            "trajectory_to_data",
            "assemble_training_data",
        },
        {
            **common,
            "TensorData": tinker.TensorData,
            "Trajectory": object,
            "TrajectoryGroup": object,
            "FlatObElem": int | tinker.ModelInputChunk,
            "FlatOb": list,
            "safezip": safezip,
            "create_rightshifted_model_input_and_leftshifted_targets": (
                create_rightshifted_model_input_and_leftshifted_targets
            ),
        },
    )
    return SimpleNamespace(
        tinker=tinker,
        compute_advantages=train["compute_advantages"],
        assemble_training_data=processing["assemble_training_data"],
        incorporate_kl_penalty=metrics.incorporate_kl_penalty,
    )


class RecordedBaseSampler:
    """Stands for Tinker's sampling client of the frozen base: ``compute_logprobs_async`` of a
    recorded sequence returns its recorded base log-probs (None for the first token, as
    Tinker's does; prompt positions are masked out by the anchor)."""

    def __init__(self, groups: list[list[RecordedRollout]]) -> None:
        self._recorded = {
            rollout.tokens: [None]
            + [-1.0] * (len(rollout.tokens) - len(rollout.mask) - 1)
            + list(rollout.base_logprobs)
            for group in groups
            for rollout in group
        }

    async def compute_logprobs_async(self, model_input: Any) -> list[float | None]:
        return self._recorded[tuple(model_input.to_ints())]


def run_anchor(anchor: SimpleNamespace, groups: list[list[RecordedRollout]]) -> list[Any]:
    """The anchor's data for a batch: its advantages, its datums, its KL folded in place."""
    tinker = anchor.tinker
    trajectory_groups = []
    for group in groups:
        trajectories = [
            SimpleNamespace(
                transitions=[
                    SimpleNamespace(
                        ob=tinker.ModelInput.from_ints(
                            list(rollout.tokens[: len(rollout.tokens) - len(rollout.mask)])
                        ),
                        ac=SimpleNamespace(
                            tokens=list(rollout.tokens[len(rollout.tokens) - len(rollout.mask) :]),
                            logprobs=list(rollout.rollout_logprobs),
                            mask=[float(m) for m in rollout.mask],
                        ),
                    )
                ]
            )
            for rollout in group
        ]
        rewards = [rollout.reward for rollout in group]
        trajectory_groups.append(
            SimpleNamespace(trajectories_G=trajectories, get_total_rewards=lambda r=rewards: r)
        )
    advantages = anchor.compute_advantages(
        trajectory_groups, "entropic_adaptive_beta", adv_estimator_beta=2.0
    )
    data, _ = anchor.assemble_training_data(trajectory_groups, advantages)
    asyncio.run(anchor.incorporate_kl_penalty(data, RecordedBaseSampler(groups), KL_COEF, 0.0))
    return data


def as_inputs(datum: Any) -> dict[str, list]:
    return {
        key: datum.loss_fn_inputs[key].tolist()
        for key in ("target_tokens", "logprobs", "advantages")
    }


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_tttd_inputs_equal_the_anchors_own_code(anchor: SimpleNamespace, name: str) -> None:
    groups = BATCHES[name]
    data = run_anchor(anchor, groups)
    ours = recorded_batch_inputs(groups, KL_COEF)
    assert_same_inputs(ours, [as_inputs(datum) for datum in data])
    for datum, rollout in zip(data, [r for group in groups for r in group], strict=True):
        assert datum.model_input.to_ints() == list(rollout.tokens[:-1])


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_the_transcription_equals_the_anchors_own_code(anchor: SimpleNamespace, name: str) -> None:
    groups = BATCHES[name]
    theirs = [as_inputs(datum) for datum in run_anchor(anchor, groups)]
    assert_same_inputs(anchor_inputs(groups, KL_COEF), theirs)


def test_tinkers_request_types_accept_the_inputs() -> None:
    """The request Reef's Tinker client builds from tttd's inputs, in the SDK's own types."""
    tinker = pytest.importorskip("tinker", reason="needs the Tinker SDK (tinker 0.33.1)")
    groups = BATCHES["single-valid"]
    rollouts = [rollout for group in groups for rollout in group]
    data = [
        tinker.Datum(
            model_input=tinker.ModelInput.from_ints(list(rollout.tokens[:-1])), loss_fn_inputs=value
        )
        for rollout, value in zip(rollouts, recorded_batch_inputs(groups, KL_COEF), strict=True)
    ]
    request = tinker.types.ForwardBackwardInput(data=data, loss_fn="importance_sampling")
    for datum in request.data:
        lengths = {key: len(value.tolist()) for key, value in datum.loss_fn_inputs.items()}
        assert set(lengths.values()) == {datum.model_input.length}, lengths
