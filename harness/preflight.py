"""Preflight: can this machine run a Guidance-TTT run? (issue 5 item 6)

Each check returns a `CheckResult` — ready or missing, one line of detail and, when missing, how
to fix it — and never raises: a check that crashes is itself reported as missing. `run.sh` runs
this module before it starts anything, and `guidance-ttt doctor` can call `run_preflight` alone.
Nothing here downloads, trains or writes: the model is only looked for (or found fetchable), the
judge scores one given seed candidate, and the executor answers one 1-token request.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import httpx
from rich import box
from rich.console import Console
from rich.table import Table

from harness.backends import BUILTIN_BACKENDS, ExecutionBackend, backend_from_name
from harness.contract import ContractError, load_harbor_task
from harness.execution import ExecutionClient, ExecutionError, MissingAPIKeyError
from harness.frontiercs_client import FrontierCSScorer
from harness.run_settings import DEFAULT_SERVE_YAML, RunSettings, RunSettingsError
from harness.state import VerificationResult
from harness.suites import seed_suite, suite_name
from harness.task_dirs import bundled_task_dir

MIN_PYTHON = (3, 12)
DEFAULT_MODEL_ID = "Qwen/Qwen3-8B"
DEFAULT_MIN_FREE_GB = 100.0
#: The seed record the judge row scores, relative to the task directory.
DEFAULT_SEED = Path("solution/seed.json")
HEALTH_TIMEOUT_S = 5.0
EXECUTOR_PROBE_TIMEOUT_S = 60.0
_WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
_GPU_FIX = (
    "run on a CUDA host with a CUDA build of torch; check nvidia-smi and CUDA_VISIBLE_DEVICES"
)


@dataclass(frozen=True)
class CheckResult:
    """One row of the preflight table. `fix` is empty when the check is ready."""

    name: str
    ready: bool
    detail: str
    fix: str = ""


def _ready(name: str, detail: str) -> CheckResult:
    return CheckResult(name, True, detail)


def _missing(name: str, detail: str, fix: str) -> CheckResult:
    return CheckResult(name, False, detail, fix)


@dataclass(frozen=True)
class PreflightReport:
    """All check results in table order; `ok` only when every check is ready."""

    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(check.ready for check in self.checks)

    @property
    def missing(self) -> tuple[CheckResult, ...]:
        return tuple(check for check in self.checks if not check.ready)

    def table(self, *, ascii_only: bool = False) -> Table:
        """The report as a rich table; `ascii_only` draws it with plain ASCII for logs."""
        table = Table(title="Guidance-TTT preflight", box=box.ASCII if ascii_only else box.ROUNDED)
        for column in ("check", "status", "detail", "how to fix"):
            table.add_column(column, overflow="fold")
        for check in self.checks:
            status = "[green]ready[/]" if check.ready else "[bold red]missing[/]"
            table.add_row(check.name, status, check.detail, check.fix)
        return table

    def render(self, console: Console) -> None:
        """Print the table: coloured on a terminal, plain ASCII text otherwise."""
        console.print(self.table(ascii_only=not console.is_terminal))

    def failure_message(self) -> str:
        """One line naming every missing check, for the end of a failed run."""
        names = ", ".join(check.name for check in self.missing)
        return f"preflight failed: missing {names} (see the table above for how to fix each)"


# ------------------------------------------------------------------------------------ checks


def check_python(version: Sequence[int] = tuple(sys.version_info)) -> CheckResult:
    """Python must be at least 3.12 (the project's `requires-python`)."""
    shown = ".".join(str(part) for part in version[:3])
    if tuple(version[:2]) >= MIN_PYTHON:
        return _ready("python", f"Python {shown}")
    return _missing(
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
        return _missing("GPUs", "torch not installed", "pip install -e '.[train]' on the GPU host")
    try:
        count = int(torch.cuda.device_count())
    except Exception as exc:  # a broken CUDA install must not crash the preflight
        return _missing("GPUs", f"torch.cuda failed: {type(exc).__name__}: {exc}", _GPU_FIX)
    if count >= needed:
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(count))
        return _ready("GPUs", f"{count} visible to torch ({scope}): {names}")
    return _missing(
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
        return _ready("model", f"{model_dir} has config.json and weights")
    try:
        hub = import_module("huggingface_hub")
    except ImportError:
        return _missing(
            "model",
            f"{model_dir}: {problem}; huggingface_hub not installed, so it cannot be fetched",
            f"pip install huggingface_hub, or put {model_id} into {model_dir} "
            "(MODEL_ID in run.sh picks the model)",
        )
    return _ready(
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


def check_judge(judge_url: str, score_seed: Callable[[], VerificationResult] | None) -> CheckResult:
    """The judge answers `GET /health` with `{"ok": true}` and, unless `score_seed` is None, judges
    the seed candidate as valid with a non-zero score. `score_seed` is the caller's scorer bound
    to the seed program (e.g. `FrontierCSScorer`), so the check exercises the same client the run
    uses."""
    url = judge_url.rstrip("/")
    fix = (
        f"start the judge at {url} (guidance-ttt judge, or the FrontierCS compose stack), or "
        "point FRONTIERCS_JUDGE_URL at a running one"
    )
    try:
        response = httpx.get(f"{url}/health", timeout=HEALTH_TIMEOUT_S)
        healthy = response.status_code == 200 and response.json().get("ok") is True
        answer = f"{response.status_code} {response.text[:120]!r}"
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        healthy, answer = False, f"{type(exc).__name__}: {exc}"
    if not healthy:
        return _missing("judge", f"GET {url}/health failed: {answer}", fix)
    if score_seed is None:
        return _ready("judge", f"{url} healthy (seed scoring skipped)")
    try:
        verdict = score_seed()
    except Exception as exc:  # JudgeUnavailableError, unreadable seed, ...: all are "not ready"
        return _missing("judge", f"{url} healthy but scoring the seed failed: {exc}", fix)
    if not verdict.valid or not verdict.raw_score:
        # A seed on which every case scored 0 is a valid candidate to the run, but as a
        # preflight answer it says the judge's problem package does not fit the task.
        return _missing(
            "judge",
            f"{url} judged the seed {verdict.status} with score {verdict.raw_score}: "
            f"{verdict.message}",
            "check the judge's problem package and the problem id (FRONTIERCS_PROBLEM_ID, "
            "else judge_problem_id in the task's contract.json)",
        )
    return _ready("judge", f"{url} healthy; " + seed_on_suite(verdict))


def seed_on_suite(verdict: VerificationResult) -> str:
    """The judge row's seed line. Scores of two suites are never put side by side: when the
    seed file measured the seed on another suite than the judge's, the line says so and that
    the run re-scores the seed on the judge's suite at start."""
    suite = suite_name(verdict.artifacts.get("judge_suite"))
    text = f"seed scored {verdict.raw_score:.4f} on suite {suite}"
    recorded = verdict.artifacts.get("seed_file")
    if not isinstance(recorded, dict):
        return text
    if recorded.get("suite") is None:
        return text + " (the seed record names no suite for its score: not compared)"
    if recorded.get("suite") == suite:
        return text + f" (seed.json: {recorded.get('score', 0.0):.4f} on {suite})"
    return (
        text + f"; seed.json measured it on {recorded.get('suite')}, not compared: the run "
        f"re-scores the seed on {suite} at start and records it"
    )


def check_guidance(url: str) -> CheckResult:
    """Frozen-guidance mode: the OpenAI-compatible endpoint answers `GET <url>/v1/models`."""
    target = url.rstrip("/") + "/v1/models"
    fix = (
        "start the guidance server, or set GUIDANCE_TTT_GUIDANCE_URL (without /v1) and "
        "GUIDANCE_TTT_GUIDANCE_MODEL for serve-frozen.yaml"
    )
    key = os.environ.get("GUIDANCE_TTT_GUIDANCE_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(target, headers=headers, timeout=HEALTH_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return _missing("guidance", f"GET {target} failed: {type(exc).__name__}: {exc}", fix)
    if response.status_code != 200:
        return _missing("guidance", f"GET {target} answered {response.status_code}", fix)
    return _ready("guidance", f"{url} answers (frozen guidance: no GPUs or weights needed)")


def check_task(task_dir: Path, seed_file: Path | None = None) -> CheckResult:
    """The Harbor task directory is valid: `contract.json`, `task.toml` and `instruction.md`
    pass the same validation the run applies at its start (`harness.contract`), and the seed
    the judge row scores (`seed_file`, default `solution/seed.json`) holds a program."""
    try:
        task = load_harbor_task(task_dir)
    except ContractError as exc:
        return _missing("task", str(exc), "fix the named file (see docs/task.md for each key)")
    contract, seed = task.contract, seed_file or task_dir / DEFAULT_SEED
    try:
        seed_program(seed)
    except (OSError, ValueError) as exc:
        return _missing("task", f"no seed program: {exc}", "add the task's seed record")
    return _ready(
        "task",
        f"{task_dir}: {contract.solution_language}, score {contract.score_direction}, "
        f"judge problem {contract.judge_problem_id!r}",
    )


def check_executor(
    backend: ExecutionBackend, *, timeout_s: float = EXECUTOR_PROBE_TIMEOUT_S
) -> CheckResult:
    """The executor answers a 1-token chat request (no retries, bounded by `timeout_s`). A missing
    API key is reported by the name of its environment variable, never its value."""
    probe_backend = replace(backend, timeout_s=min(backend.timeout_s, timeout_s), max_retries=0)
    label = f"{backend.name} at {backend.base_url}"
    try:
        with ExecutionClient(probe_backend) as client:
            detail = client.probe()
    except ExecutionError as exc:
        if isinstance(exc, MissingAPIKeyError):
            fix = f"export {backend.api_key_env}=<your key>"
        else:
            fix = (
                f"start the executor at {backend.base_url}, or set GUIDANCE_TTT_EXECUTOR_URL "
                "to where it runs (GUIDANCE_TTT_EXECUTOR picks another backend)"
            )
        return _missing("executor", f"{label}: {exc}", fix)
    return _ready("executor", f"{label}: {detail}")


def check_git_lfs() -> CheckResult:
    """`git-lfs` is on PATH (the artifact store uses it)."""
    path = shutil.which("git-lfs")
    if path is None:
        return _missing("git-lfs", "git-lfs not on PATH", "install git-lfs (apt install git-lfs)")
    try:
        version = subprocess.run(
            [path, "version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return _missing("git-lfs", f"{path} does not run: {exc}", "reinstall git-lfs")
    return _ready("git-lfs", version or path)


def check_disk(state_dir: Path, min_free_gb: float = DEFAULT_MIN_FREE_GB) -> CheckResult:
    """At least `min_free_gb` GB free on the file system that holds (or will hold) `state_dir`."""
    probe = state_dir.absolute()
    while not probe.exists():
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 1e9
    detail = f"{free_gb:.1f} GB free at {probe} (need {min_free_gb:g} GB)"
    if free_gb >= min_free_gb:
        return _ready("disk", detail)
    return _missing(
        "disk",
        detail,
        "free space, or set training.config.state_dir in serve.yaml to a larger disk",
    )


def run_preflight(
    *,
    state_dir: Path,
    model_dir: Path,
    judge_url: str,
    executor: ExecutionBackend,
    score_seed: Callable[[], VerificationResult] | None = None,
    min_free_gb: float = DEFAULT_MIN_FREE_GB,
    min_gpus: int = 1,
    model_id: str = DEFAULT_MODEL_ID,
    task_dir: Path | None = None,
    seed_file: Path | None = None,
    guidance_url: str | None = None,
) -> PreflightReport:
    """Run every check in table order and collect the rows; never raises for a failing check.
    `score_seed=None` checks the judge's health only; `task_dir` adds the task row.
    `guidance_url` (frozen-guidance mode: the OpenAI-compatible endpoint Reef proxies) replaces
    the GPU and model rows by a guidance row: a frozen run trains nothing and loads no weights."""
    checks: list[tuple[str, Callable[[], CheckResult]]] = [("python", check_python)]
    if guidance_url is None:
        checks += [
            ("GPUs", lambda: check_gpus(min_gpus)),
            ("model", lambda: check_model(model_dir, model_id)),
        ]
    else:
        checks.append(("guidance", lambda: check_guidance(guidance_url)))
    if task_dir is not None:
        checks.append(("task", lambda: check_task(task_dir, seed_file)))
    checks += [
        ("judge", lambda: check_judge(judge_url, score_seed)),
        ("executor", lambda: check_executor(executor)),
        ("git-lfs", check_git_lfs),
        ("disk", lambda: check_disk(state_dir, min_free_gb)),
    ]
    results = []
    for name, check in checks:
        try:
            results.append(check())
        except Exception as exc:  # a bug in one check must not hide the others
            results.append(_missing(name, f"check crashed: {type(exc).__name__}: {exc}", "report"))
    return PreflightReport(tuple(results))


# ----------------------------------------------------------------------------------------- CLI


def seed_program(path: Path) -> str:
    """The program of a seed: the `entry.solution` of a seed record (`.json`), else the file."""
    text = path.read_text()
    if path.suffix != ".json":
        return text
    try:
        return str(json.loads(text)["entry"]["solution"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a seed record with an entry.solution ({exc})") from None


def seed_scorer(
    task_dir: Path, judge_url: str, *, problem_id: str | None = None, seed_file: Path | None = None
) -> Callable[[], VerificationResult]:
    """A `score_seed` callable for a Harbor task directory: the seed program judged by the run's
    own `FrontierCSScorer`, one attempt. `seed_file` is a seed record (`.json`: its entry's
    program is judged) or a program file; `solution/seed.json` unless given. The task directory
    is validated first, as the run does (a broken task is a `ContractError`, so the judge row is
    not ready); the problem id comes from `contract.json` unless given."""

    def score() -> VerificationResult:
        contract = load_harbor_task(task_dir).contract
        pid = contract.judge_problem_id if problem_id is None else problem_id
        record = Path(seed_file or task_dir / DEFAULT_SEED)
        code = seed_program(record)
        with FrontierCSScorer.for_task(task_dir, judge_url, pid, attempts=1) as scorer:
            verdict = scorer(code)
        if record.suffix == ".json":  # a seed record: its measured score names its suite
            try:
                score = json.loads(record.read_text())["entry"]["verifier_raw_score"]
                recorded = {"suite": seed_suite(record), "score": score}
            except (KeyError, TypeError, ValueError):
                recorded = {"suite": None, "score": None}
            verdict = replace(verdict, artifacts={**verdict.artifacts, "seed_file": recorded})
        return verdict

    return score


def build_parser(prog: str = "python -m harness.preflight") -> argparse.ArgumentParser:
    """The preflight's flags (also `guidance-ttt doctor`'s). Flags left out take their values
    from `serve.yaml` (`--config`), so the command works from any directory; every help text
    names its default."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Check that this machine can run Guidance-TTT; exit 1 naming what is missing.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_SERVE_YAML,
        help="serve.yaml whose settings give the defaults below (default: the project's)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="the run's state directory (default: serve.yaml's training.config.state_dir)",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="where the guidance model is (default: work/model beside serve.yaml, where "
        "run.sh fetches it)",
    )
    parser.add_argument(
        "--model-id",
        default=os.environ.get("MODEL_ID", DEFAULT_MODEL_ID),
        help="the guidance model (default: $MODEL_ID, else %(default)s)",
    )
    parser.add_argument(
        "--judge-url", help="the judge (default: serve.yaml's, set by $FRONTIERCS_JUDGE_URL)"
    )
    parser.add_argument(
        "--task-dir",
        type=Path,
        help="the Harbor task (default: serve.yaml's task, from the installed package)",
    )
    parser.add_argument(
        "--problem-id", help="judge problem id (default: serve.yaml's, else contract.json)"
    )
    parser.add_argument(
        "--seed-file",
        type=Path,
        help="seed record (.json) or program to judge (default: serve.yaml's seed in the task)",
    )
    parser.add_argument(
        "--skip-judge-score",
        action="store_true",
        help="check the judge's /health only (default: also score the seed)",
    )
    parser.add_argument(
        "--executor",
        choices=list(BUILTIN_BACKENDS),
        help="executor backend (default: serve.yaml's, set by $GUIDANCE_TTT_EXECUTOR)",
    )
    parser.add_argument(
        "--executor-url",
        default=os.environ.get("GUIDANCE_TTT_EXECUTOR_URL"),
        help="executor base URL (default: $GUIDANCE_TTT_EXECUTOR_URL, else the backend's)",
    )
    parser.add_argument(
        "--reasoning-effort",
        help="gpt_oss_120b reasoning effort (default: serve.yaml's, "
        "set by $GUIDANCE_TTT_REASONING_EFFORT)",
    )
    parser.add_argument(
        "--min-free-gb",
        type=float,
        default=DEFAULT_MIN_FREE_GB,
        help="free disk needed at the state directory, in GB (default: %(default)s)",
    )
    parser.add_argument(
        "--min-gpus", type=int, default=1, help="GPUs needed (default: %(default)s)"
    )
    parser.add_argument(
        "--guidance-url",
        help="frozen-guidance mode: the guidance endpoint, checked instead of GPUs and model "
        "(default: serve-frozen.yaml's when --config names one, else none)",
    )
    return parser


def resolve_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the flags left out from `args.config` (paths relative to its folder, the task
    directory from the installed package). Raises `RunSettingsError` for a broken serve.yaml
    or `FileNotFoundError` for a task that is not installed, when a value is needed from them."""
    needed = ("state_dir", "model_dir", "judge_url", "task_dir", "executor", "reasoning_effort")
    if all(getattr(args, name) is not None for name in needed):
        return args
    config = Path(args.config)
    settings = RunSettings.load(config, base_dir=config.parent)
    task_dir = args.task_dir or bundled_task_dir(settings.task)
    return argparse.Namespace(
        **{
            **vars(args),
            "state_dir": args.state_dir or settings.state_dir,
            "model_dir": args.model_dir or config.parent / "work" / "model",
            "judge_url": args.judge_url or settings.judge_url,
            "task_dir": task_dir,
            "problem_id": args.problem_id or settings.judge_problem_id,
            "seed_file": args.seed_file or task_dir / settings.seed_file,
            "guidance_url": args.guidance_url or settings.guidance_upstream_url,
            "executor": args.executor or settings.executor_backend,
            "reasoning_effort": args.reasoning_effort or settings.gpt_oss_reasoning_effort,
        }
    )


def main(argv: Sequence[str] | None = None, prog: str = "python -m harness.preflight") -> int:
    """Run the preflight from command-line flags, print the table, and return 0 when every
    check is ready, 1 otherwise (with a line on stderr naming the missing checks), 2 for bad
    flags."""
    args = build_parser(prog).parse_args(argv)
    try:
        args = resolve_defaults(args)
    except (RunSettingsError, FileNotFoundError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    try:
        executor = backend_from_name(
            args.executor, reasoning_effort=args.reasoning_effort, base_url=args.executor_url
        )
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    score_seed = None
    if not args.skip_judge_score:
        score_seed = seed_scorer(
            args.task_dir, args.judge_url, problem_id=args.problem_id, seed_file=args.seed_file
        )
    report = run_preflight(
        state_dir=args.state_dir,
        model_dir=args.model_dir,
        judge_url=args.judge_url,
        executor=executor,
        score_seed=score_seed,
        min_free_gb=args.min_free_gb,
        min_gpus=args.min_gpus,
        model_id=args.model_id,
        task_dir=args.task_dir,
        seed_file=args.seed_file,
        guidance_url=args.guidance_url,
    )
    report.render(Console())
    if report.ok:
        return 0
    print(report.failure_message(), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
