"""Reef's Tinker backend on a machine without the network: ``reef serve`` on the stand-in.

What runs for real: ``reef serve -c STATE_DIR/serve-tinker.yaml`` — the repository's
``serve-tinker.yaml`` (``tttd.deployment:TTTDTinkerDeployment``, Reef's in-process Tinker
topology: Reef's Tinker trainer and sampler, the tttd recipe, ``TTTDTinkerLoss``) with the
rehearsal's ports, grid, STEPS and judge filled in. What stands in: Tinker's service
(``harness.rehearsal.tinker_stand_in``, whose sampler answers with the scripted guidance; in the
caller's process with :func:`tinker_reef`, its own with :func:`tinker_rehearsal`) and the
base model's tokenizer (``harness.rehearsal.tinker_tokenizer``, in a Hugging Face cache under
``STATE_DIR/tinker-stand-in``, beside the stand-in's durable checkpoints, which a resumed
rehearsal's stand-in reads back). Reef gets the stand-in's address and a placeholder key of
Tinker's form in its own environment only; the key is no secret and is written nowhere.

    with tinker_reef(state_dir, settings_path, port, completion) as (reef, tinker):
        ...  # guidance calls through reef.url; Reef trains every full step on `tinker`
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.adapters.reef.process import ReefService, running_reef
from harness.rehearsal.tinker_process import running_stand_in
from harness.rehearsal.tinker_service import Completion
from harness.rehearsal.tinker_stand_in import TinkerStandIn
from harness.rehearsal.tinker_tokenizer import offline_env, publish_tokenizer
from harness.settings.paths import REPO_ROOT
from harness.settings.run_copy import RunValues, fill_run, load_document, write_copy
from harness.settings.run_settings import RunSettings
from harness.settings.tinker import DEFAULT_API_KEY_ENV

TINKER_TEMPLATE = REPO_ROOT / "serve-tinker.yaml"
SETTINGS_FILE = "serve-tinker.yaml"
TOKEN = "reef-local"
#: A placeholder of the form Tinker's SDK requires (``tml-``), given to Reef's process only.
PLACEHOLDER_KEY = "tml-stand-in-placeholder"
#: Reef's readiness deadline: its in-process Tinker topology opens SDK sessions at start.
READY_TIMEOUT_S = 120.0


def write_tinker_settings(
    path: Path, values: RunValues, *, judge_url: str, reef_port: int, seed: str
) -> RunSettings:
    """The repository's serve-tinker.yaml with the rehearsal's values, written to ``path``:
    Reef on ``127.0.0.1:reef_port``, ``values`` (state directory, grid, STEPS, arm), the judge
    at ``judge_url`` (the template task's problem ``0``) and the seed record ``seed``."""
    document = load_document(TINKER_TEMPLATE)
    document["reef"].update(host="127.0.0.1", port=reef_port, token=TOKEN)
    run = fill_run(document, values)
    run["harness"].update(
        executor_backend="gpt_oss_120b",
        gpt_oss_reasoning_effort="high",
        judge_url=judge_url,
        judge_problem_id="0",
        seed=seed,
    )
    run["harness"].pop("executor", None)  # the stand-in executor's address is given at run time
    header = (
        "# Written by the Tinker rehearsal: the repository's serve-tinker.yaml with the\n"
        "# stand-in Tinker service's run values, judge, ports, grid and STEPS filled in.\n"
    )
    write_copy(document, path, header)
    return RunSettings.load(path, environ={}, base_dir=path.parent)


@contextmanager
def tinker_rehearsal(
    values: RunValues, *, judge_url: str, seed: str, port: int
) -> Iterator[RunSettings]:
    """``guidance-ttt rehearse --backend tinker``'s Reef: write ``<state>/serve-tinker.yaml``
    (:func:`write_tinker_settings`), start the stand-in as a process of its own
    (``harness.rehearsal.tinker_process``: it outlives a killed rehearsal until Reef has
    stopped, and keeps its checkpoints in ``<state>/tinker-stand-in``), then ``reef serve`` on
    it; yields the run's settings."""
    state_dir = Path(values.state_dir)
    path = state_dir / SETTINGS_FILE
    settings = write_tinker_settings(path, values, judge_url=judge_url, reef_port=port, seed=seed)
    own = state_dir / "tinker-stand-in"
    with (
        running_stand_in(own / "checkpoints.json") as base_url,
        _reef_on(state_dir, path, port, base_url),
    ):
        yield settings


@contextmanager
def tinker_reef(
    state_dir: Path, settings_path: Path, port: int, completion: Completion
) -> Iterator[tuple[ReefService, TinkerStandIn]]:
    """Start the Tinker stand-in (its sampler answering with ``completion``) and ``reef serve
    -c settings_path`` on ``port`` pointed at it; stop both on exit (Reef first)."""
    with (
        TinkerStandIn(completion=completion) as tinker,
        _reef_on(Path(state_dir), settings_path, port, tinker.base_url) as reef,
    ):
        yield reef, tinker


@contextmanager
def _reef_on(
    state_dir: Path, settings_path: Path, port: int, base_url: str
) -> Iterator[ReefService]:
    """``reef serve -c settings_path`` on ``port``, its Tinker calls to ``base_url``, with the
    stand-in tokenizer published under ``state_dir/tinker-stand-in``."""
    document = load_document(settings_path)
    key_env = document["training"]["options"].get("api-key-env") or DEFAULT_API_KEY_ENV
    hf_home = state_dir / "tinker-stand-in" / "hf"
    publish_tokenizer(hf_home, document["training"]["config"]["model"])
    env = {"TINKER_BASE_URL": base_url, key_env: PLACEHOLDER_KEY, **offline_env(hf_home)}
    with running_reef(
        state_dir / "reef",
        config=settings_path,
        port=port,
        token=TOKEN,
        env=env,
        ready_timeout_s=READY_TIMEOUT_S,
    ) as reef:
        yield reef
