"""The tttd Slime loss family, driver side: lazy registration and argument validation.

These run without torch, Slime or a GPU: they use Reef's own loss-family registry and the
spec's argument checks on a plain ``Namespace`` holding the arguments Slime would parse.
"""

from __future__ import annotations

import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import yaml
from reef.train.algos.registry import loss_family_refs

import tttd
from tttd.slime import TTTDAlgorithm

SERVE_YAML = Path(__file__).resolve().parents[2] / "serve.yaml"


def slime_args(**overrides: object) -> Namespace:
    """The serve.yaml arguments the family cares about, as Slime parses them."""
    values: dict[str, object] = {
        "loss_type": "custom_loss",
        "use_rollout_logprobs": True,
        "kl_coef": 0.1,
        "use_kl_loss": False,
        "compute_advantages_and_returns": True,
        "num_steps_per_rollout": None,
        "calculate_per_token_loss": False,
        "entropy_coef": 0.0,
    }
    values.update(overrides)
    return Namespace(**values)


def test_importing_the_recipe_registers_the_family_by_reference_only():
    assert loss_family_refs()["tttd"] == tttd.LOSS_FAMILY_REFERENCE == "tttd.slime:TTTDAlgorithm"


def test_reef_resolves_the_family_lazily_to_the_spec():
    from reef.train.slime_backend.loss_families import resolve_loss_family

    spec = resolve_loss_family("tttd")
    assert isinstance(spec, TTTDAlgorithm)
    assert spec.loss_type == "custom_loss"
    assert spec.requires_rollout_logprobs
    assert spec.advantages == "required"


def test_serve_yaml_arguments_pass_validation():
    TTTDAlgorithm().validate_backend_args(slime_args(), recipe="tttd.recipe:TTTDRecipe")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"use_rollout_logprobs": False}, "requires --use-rollout-logprobs"),
        ({"kl_coef": 0.0}, "needs --kl-coef > 0"),
        ({"kl_coef": -0.1}, "needs --kl-coef > 0"),
        ({"kl_coef": None}, "needs --kl-coef > 0"),
        ({"num_steps_per_rollout": 2}, "requires --num-steps-per-rollout=1"),
        ({"use_kl_loss": True}, "remove --use-kl-loss"),
        ({"compute_advantages_and_returns": False}, "--disable-compute-advantages-and-returns"),
        ({"calculate_per_token_loss": True}, "--calculate-per-token-loss"),
        ({"entropy_coef": 0.01}, "--entropy-coef 0"),
        ({"loss_type": "policy_loss"}, "requires --loss-type custom_loss"),
    ],
)
def test_arguments_that_would_train_something_else_are_refused(overrides, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        TTTDAlgorithm().validate_backend_args(
            slime_args(**overrides), recipe="tttd.recipe:TTTDRecipe"
        )


def test_worker_hooks_are_the_registered_objective_paths():
    pytest.importorskip("torch")
    from reef.train.slime_backend.algorithm import resolve_objective_paths

    args = Namespace(loss_family="tttd", loss_family_ref=tttd.LOSS_FAMILY_REFERENCE)
    resolve_objective_paths(args)
    assert args.custom_loss_function_path == "tttd.slime.objective.tttd_loss"
    assert args.custom_advantage_function_path == "tttd.slime.objective.tttd_advantages"
    # serve.yaml names the same hooks, so Slime's argument checks and the workers agree.
    options = yaml.safe_load(SERVE_YAML.read_text())["training"]["options"]
    assert options["custom-loss-function-path"] == args.custom_loss_function_path
    assert options["custom-advantage-function-path"] == args.custom_advantage_function_path


def test_driver_side_spec_never_imports_torch():
    code = (
        "import sys, tttd.slime\n"
        "from reef.train.slime_backend.loss_families import resolve_loss_family\n"
        "resolve_loss_family('tttd')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
