"""Executable checks of the GPU boundary against the real Slime, Megatron-LM and Reef code.

Four checks, each a function returning ``CheckResult`` rows (``name``, ``ok``, ``detail``,
``figures``); ``python -m tttd.gpu_check`` (``scripts/gpu-check.sh``) prints them as one table:

- ``arguments`` (``tttd.gpu_check.arguments``): Reef 0.1.3's own launch code turns ``serve.yaml``
  (the 2×4 qualification grid and the 8×16 variant) into the Slime command line, and Slime's
  real parser (with Reef's added arguments and Reef's driver-side validation) parses it: every
  option is accepted and lands on the intended value;
- ``loss`` (``tttd.gpu_check.loss_path``): Slime's real ``compute_advantages_and_returns`` and
  ``loss_function`` (through Reef's worker-hook wrapper) run our tttd hooks with Megatron's
  parallel state for one process; the loss Megatron back-propagates equals the token sum of
  ``tttd.slime.terms`` and the gradient reaches the logits;
- ``loss-tp2`` (``tttd.gpu_check.tensor_parallel``): the same loss path on two ranks at
  Megatron TP 2 (``tttd.gpu_check.launcher``: NCCL on two GPUs, gloo on CPU), the logits split
  over the vocabulary by Megatron's ``ColumnParallelLinear``; every rank back-propagates the
  full-vocabulary token sum, each shard gets its part of the gradient, and the step's metrics
  are reported once;
- ``step`` (``tttd.gpu_check.optimizer_step``, meant for a GPU, runs on CPU too): one optimizer
  step of a tiny random-weight Qwen3 with LoRA through the same loss path; LoRA-B moves, the
  base does not, and the qualification gate accepts the step's metrics.

Where upstream code comes from: Slime and Megatron-LM are imported as installed, or from the
source trees named by ``GUIDANCE_TTT_SLIME_SRC`` (a Slime checkout, at ``SLIME_COMMIT``) and
``GUIDANCE_TTT_MEGATRON_SRC`` (a Megatron-LM checkout at ``MEGATRON_COMMIT`` with Slime's
``docker/patch/latest/megatron*.patch`` applied, as Slime's image builds it);
``GUIDANCE_TTT_UPSTREAM_SITE`` may name one more directory of packages (SGLang, transformers)
for a machine that has none installed. ``upstream_missing()`` names what is absent, so tests
skip with one line and the CLI reports it. Nothing here downloads anything.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SLIME_SRC_ENV = "GUIDANCE_TTT_SLIME_SRC"
MEGATRON_SRC_ENV = "GUIDANCE_TTT_MEGATRON_SRC"
UPSTREAM_SITE_ENV = "GUIDANCE_TTT_UPSTREAM_SITE"
#: The Slime commit Reef 0.1.3's Slime adapters are written against (README's install line).
SLIME_COMMIT = "41014d1f29e201137fdffce737bb8bac65bc5219"
#: The Megatron-LM commit Slime's own image builds at that Slime commit (docker/Dockerfile).
MEGATRON_COMMIT = "1dcf0dafa884ad52ffb243625717a3471643e087"

__all__ = [
    "MEGATRON_COMMIT",
    "MEGATRON_SRC_ENV",
    "SLIME_COMMIT",
    "SLIME_SRC_ENV",
    "UPSTREAM_SITE_ENV",
    "CheckResult",
    "upstream_missing",
    "upstream_paths",
    "use_upstream_sources",
]


@dataclass(frozen=True)
class CheckResult:
    """One row of the table: a named check, whether it held, why, and what it measured.

    A ``skipped`` row (``ok`` stays true) says a check could not run here and why.
    """

    name: str
    ok: bool
    detail: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "figures": self.figures,
            "skipped": self.skipped,
        }


def upstream_paths(environ: Mapping[str, str] | None = None) -> list[str]:
    """The source directories the environment names, in import-precedence order."""
    source = os.environ if environ is None else environ
    names = (UPSTREAM_SITE_ENV, SLIME_SRC_ENV, MEGATRON_SRC_ENV)
    return [source[name] for name in names if source.get(name, "").strip()]


def use_upstream_sources(environ: Mapping[str, str] | None = None) -> list[str]:
    """Put the named source directories first on ``sys.path``; returns them.

    Raises ``FileNotFoundError`` naming the variable when a named directory does not exist.
    """
    source = os.environ if environ is None else environ
    for name in (UPSTREAM_SITE_ENV, SLIME_SRC_ENV, MEGATRON_SRC_ENV):
        value = source.get(name, "").strip()
        if value and not os.path.isdir(value):
            raise FileNotFoundError(
                f"{name}={value!r} is not a directory; unset it or fix the path"
            )
    paths = upstream_paths(source)
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    return paths


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def upstream_missing(environ: Mapping[str, str] | None = None) -> str | None:
    """``None`` when Slime, Megatron-LM and torch are importable, else a one-line reason."""
    paths = upstream_paths(environ)
    missing = [
        module
        for module in ("torch", "slime", "megatron.training", "megatron.core")
        if not _importable(module) and not _in_paths(module, paths)
    ]
    if not missing:
        return None
    return (
        f"{', '.join(missing)} not importable: install Slime {SLIME_COMMIT[:8]} and its "
        f"Megatron-LM, or set {SLIME_SRC_ENV} and {MEGATRON_SRC_ENV} to their source trees"
    )


def _in_paths(module: str, paths: list[str]) -> bool:
    relative = module.replace(".", os.sep)
    return any(
        os.path.isdir(os.path.join(path, relative)) or os.path.isfile(f"{path}/{relative}.py")
        for path in paths
    )
