"""Preflight checks of this machine: Python, GPUs, the guidance model, git-lfs and free disk.

Each check returns a `CheckResult` and never raises for what it finds missing. Nothing is
installed or downloaded: the model is only looked for in its directory, or found fetchable
because huggingface_hub is importable (`run.sh` fetches it when the row says so). torch and
huggingface_hub are optional for the harness, so they are imported through an injectable
`import_module` and their absence is a missing row, not an import error.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from harness.preflight.report import CheckResult, missing_check, ready_check

MIN_PYTHON = (3, 12)
DEFAULT_MODEL_ID = "Qwen/Qwen3-8B"
DEFAULT_MIN_FREE_GB = 100.0
_WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
_GPU_FIX = (
    "run on a CUDA host with a CUDA build of torch; check nvidia-smi and CUDA_VISIBLE_DEVICES"
)


def check_python(version: Sequence[int] = tuple(sys.version_info)) -> CheckResult:
    """Python must be at least 3.12 (the project's `requires-python`)."""
    shown = ".".join(str(part) for part in version[:3])
    if tuple(version[:2]) >= MIN_PYTHON:
        return ready_check("python", f"Python {shown}")
    return missing_check(
        "python",
        f"Python {shown} is older than 3.12",
        "install Python ≥ 3.12; ./test.sh finds it ($PYTHON, python3.1x, pyenv) and makes .venv",
    )


def check_gpus(
    min_gpus: int = 1, *, import_module: Callable[[str], ModuleType] = importlib.import_module
) -> CheckResult:
    """GPUs visible to torch: at least `min_gpus`, and at least as many as CUDA_VISIBLE_DEVICES
    lists when it is set. torch is optional for the harness, so its absence is reported as a
    missing row, not an import error. `import_module` is injectable for tests."""
    visible_env = os.environ.get("CUDA_VISIBLE_DEVICES")
    listed = [d for d in (visible_env or "").split(",") if d.strip()]
    needed = max(min_gpus, len(listed))
    scope = f"CUDA_VISIBLE_DEVICES={visible_env!r}" if visible_env is not None else "all devices"
    try:
        torch = import_module("torch")
    except ImportError:
        return missing_check(
            "GPUs", "torch not installed", "pip install -e '.[train]' on the GPU host"
        )
    try:
        count = int(torch.cuda.device_count())
    except Exception as exc:  # a broken CUDA install must not crash the preflight
        return missing_check("GPUs", f"torch.cuda failed: {type(exc).__name__}: {exc}", _GPU_FIX)
    if count >= needed:
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(count))
        return ready_check("GPUs", f"{count} visible to torch ({scope}): {names}")
    return missing_check(
        "GPUs",
        f"{count} GPUs visible to torch, {needed} needed ({scope}, torch {torch.__version__})",
        _GPU_FIX,
    )


def check_model(
    model_dir: Path,
    model_id: str = DEFAULT_MODEL_ID,
    *,
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> CheckResult:
    """The guidance model is present in `model_dir` (config.json plus every weight file, all
    shards of an index), or can be fetched because huggingface_hub is importable. Nothing is
    downloaded here: `run.sh` fetches when the row says so."""
    problem = _model_dir_problem(model_dir)
    if problem is None:
        return ready_check("model", f"{model_dir} has config.json and weights")
    try:
        hub = import_module("huggingface_hub")
    except ImportError:
        return missing_check(
            "model",
            f"{model_dir}: {problem}; huggingface_hub not installed, so it cannot be fetched",
            f"pip install huggingface_hub, or put {model_id} into {model_dir} "
            "(MODEL_ID in run.sh picks the model)",
        )
    return ready_check(
        "model",
        f"{model_dir}: {problem}; fetchable as {model_id} (huggingface_hub {hub.__version__})",
    )


def _model_dir_problem(model_dir: Path) -> str | None:
    """What is wrong with a local model directory, or None when it looks complete."""
    if not (model_dir / "config.json").is_file():
        return "no config.json"
    for index_path in model_dir.glob("*.index.json"):
        try:
            shards = set(json.loads(index_path.read_text())["weight_map"].values())
        except (ValueError, KeyError, TypeError, AttributeError):
            return f"unreadable weight index {index_path.name}"
        absent = sorted(s for s in shards if not (model_dir / s).is_file())
        if absent:
            return f"{len(absent)} shards of {index_path.name} absent (first: {absent[0]})"
        return None
    if not any(any(model_dir.glob(pattern)) for pattern in _WEIGHT_PATTERNS):
        return "no weight files (*.safetensors, pytorch_model*.bin)"
    return None


def check_git_lfs() -> CheckResult:
    """`git-lfs` is on PATH (the artifact store uses it)."""
    path = shutil.which("git-lfs")
    if path is None:
        return missing_check(
            "git-lfs", "git-lfs not on PATH", "install git-lfs (apt install git-lfs)"
        )
    try:
        version = subprocess.run(
            [path, "version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return missing_check("git-lfs", f"{path} does not run: {exc}", "reinstall git-lfs")
    return ready_check("git-lfs", version or path)


def check_disk(
    state_dir: Path,
    min_free_gb: float = DEFAULT_MIN_FREE_GB,
    settings_key: Callable[[str], str] = lambda name: f"training.config.{name}",
) -> CheckResult:
    """At least `min_free_gb` GB free on the file system that holds (or will hold) `state_dir`.
    `settings_key` spells a run-level key as the settings file in use does (the fix names it)."""
    probe = state_dir.absolute()
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return missing_check(
            "disk",
            f"{probe} is a file, not a directory: the state directory cannot be made there",
            f"move the file away, or set {settings_key('state_dir')} to a directory",
        )
    free_gb = shutil.disk_usage(probe).free / 1e9
    detail = f"{free_gb:.1f} GB free at {probe} (need {min_free_gb:g} GB)"
    if free_gb >= min_free_gb:
        return ready_check("disk", detail)
    return missing_check(
        "disk",
        detail,
        f"free space, set {settings_key('state_dir')} to a larger disk, or lower "
        f"{settings_key('harness.min_free_gb')} (GB)",
    )


def check_trial_environment(kind: str) -> CheckResult:
    """Where run.sh's Harbor trial runs (run.py chose it: Docker when its daemon answers).
    `docker` needs the docker command; `local` (no Docker daemon on this host) runs the trial's
    commands under bubblewrap in a host directory (`harness.run.local_environment`), so bwrap
    must be on PATH."""
    if kind == "docker":
        path = shutil.which("docker")
        if path is None:
            return missing_check(
                "trial", "docker not on PATH", "install Docker, or set GUIDANCE_TTT_TRIAL=local"
            )
        return ready_check("trial", f"Harbor trial in Docker ({path}, its daemon answers)")
    if shutil.which("bwrap") is None:
        return missing_check(
            "trial",
            "no Docker, and bubblewrap (bwrap) is not on PATH for the local trial environment",
            "install bubblewrap (apt install bubblewrap), or Docker",
        )
    return ready_check(
        "trial",
        "no Docker: the Harbor trial runs in the local non-Docker environment (bubblewrap on "
        "this host; its network is not restricted)",
    )
