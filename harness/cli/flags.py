"""What several `guidance-ttt` commands share: the service flags and reading them.

`add_service_flags` adds `--config`, `--reef-url`, `--judge-url`, `--scenario`, `--pricing` and
`--reef-records`; `services_from_flags` resolves the service URLs, token and settings file in the
one order of `harness.settings.precedence`: the flags, then the run's own recorded settings,
then serve.yaml (where the environment sets what its `${VAR:-...}` values name), then the
defaults named here; `run_task` finds a run's task directory from its recorded settings.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness import results
from harness.adapters.judge.frontiercs import DEFAULT_JUDGE_URL
from harness.cli.views import (
    Services,
)
from harness.observe.cost import PriceTable, ReefRecordUsage, Usage, load_prices
from harness.settings.precedence import COPY_NAMES, first_given
from harness.settings.run_settings import RunSettings, RunSettingsError

DEFAULT_REEF_URL = "http://127.0.0.1:8900"
#: `--judge-url`'s help where no run is read (`score`, `task check`, `task seed`): `judge_url_of`.
JUDGE_URL_HELP = (
    "default: serve.yaml's harness.judge_url, which $FRONTIERCS_JUDGE_URL sets (or, with no "
    f"readable serve.yaml, that variable), else {DEFAULT_JUDGE_URL}"
)


# --- the shared flags --------------------------------------------------------------------------


def add_service_flags(p: argparse.ArgumentParser) -> None:
    """The flags of the commands that read the run's services: settings file, URLs, scenario,
    prices, Reef's records."""
    p.add_argument(
        "--config",
        help="serve.yaml to read the URLs, token, scenario and prices from "
        "(default: the project's serve.yaml)",
    )
    p.add_argument(
        "--reef-url", help=f"Reef's address (default: from serve.yaml, else {DEFAULT_REEF_URL})"
    )
    p.add_argument(
        "--judge-url",
        help="the judge's address (default: the run's own settings, else serve.yaml's "
        f"harness.judge_url, which $FRONTIERCS_JUDGE_URL sets, else {DEFAULT_JUDGE_URL})",
    )
    p.add_argument("--scenario", help="Reef scenario (default: from serve.yaml)")
    p.add_argument(
        "--pricing",
        type=Path,
        help="price table YAML (default: $GUIDANCE_TTT_PRICING, else serve.yaml's "
        "training.config.harness.pricing over harness/observe/pricing.yaml)",
    )
    p.add_argument(
        "--reef-records",
        action="store_true",
        help="read guidance tokens missing from the archive from Reef's records (default: off)",
    )


def add_passthrough(subparsers: argparse._SubParsersAction, name: str, help: str, doc: str) -> None:
    """A subcommand whose arguments go, unparsed, to its own parser (`args.rest`): its `--help`
    is that parser's."""
    parser = subparsers.add_parser(name, help=help, description=doc.splitlines()[0], add_help=False)
    parser.set_defaults(passthrough=True)


# --- reading them -------------------------------------------------------------------------------


def services_from_flags(args: argparse.Namespace, state_dir: Path | None = None) -> Services:
    """The service URLs, token, scenario and settings file: the flags, then the run's own
    recorded settings (a state directory's settings file, or the one its `run_started` event
    names, else the URLs that event recorded), then the project's serve.yaml (or, with none,
    `$FRONTIERCS_JUDGE_URL`), then the defaults."""
    flag = vars(args).get
    recorded = _recorded_run(state_dir) if state_dir is not None and not flag("config") else {}
    settings = None
    candidates = [Path(flag("config"))] if flag("config") else []
    candidates += [Path(p) for p in recorded.get("settings_files", [])]
    for config in [*candidates, None] if not flag("config") else candidates:
        try:
            settings = RunSettings.load(config) if config else RunSettings.load()
            break
        except (RunSettingsError, OSError):
            settings = None
    own = settings is not None and settings.config_path in {
        p.resolve() for p in candidates if p.exists()
    }
    # The one order (harness.settings.precedence): the flag, the run's own settings (its copy,
    # else what its run_started event recorded), the settings file (whose ${VAR:-...} lets the
    # environment in), the default. Without any settings file the environment stands in for it.
    run = settings if own else None
    file = settings if not own else None
    env_judge = os.environ.get("FRONTIERCS_JUDGE_URL")
    return Services(
        reef_url=first_given(
            flag("reef_url"),
            run.reef_url if run else recorded.get("reef_url"),
            file.reef_url if file else None,
            DEFAULT_REEF_URL,
        ),
        judge_url=first_given(
            flag("judge_url"),
            run.judge_url if run else recorded.get("judge_url"),
            file.judge_url if file else env_judge,
            DEFAULT_JUDGE_URL,
        ),
        token=settings.reef_token if settings else os.environ.get("REEF_TOKEN", "reef-local"),
        scenario=first_given(
            flag("scenario"),
            run.scenario if run else recorded.get("scenario"),
            file.scenario if file else None,
        ),
        config=settings.config_path if settings else None,
    )


def prices_from_flags(args: argparse.Namespace, services: Services) -> PriceTable:
    """The price table of `--pricing` over the prices of the run's settings file (the one
    `services_from_flags` found) over the packaged defaults."""
    pricing = RunSettings.load(services.config).pricing if services.config else None
    return load_prices(vars(args).get("pricing"), settings_prices=pricing)


def _recorded_run(state_dir: Path) -> dict:
    """What a state directory records about its run's settings: the settings files it holds
    (a rehearsal writes its own) or its last `run_started` event names, and the URLs and
    scenario that event recorded."""
    files = [state_dir / name for name in COPY_NAMES]
    found: dict = {"settings_files": [str(p) for p in files if p.is_file()]}
    try:
        started = results.load_run(state_dir).events_of("run_started")
    except (results.RunNotFound, ValueError, OSError):
        started = []
    if started:
        last = started[-1]
        if last.get("settings_file"):
            found["settings_files"].append(str(last["settings_file"]))
        for key in ("reef_url", "judge_url", "scenario"):
            if last.get(key):
                found[key] = last[key]
    return found


def guidance_usage(view: results.RunView, services: Services, enabled: bool) -> dict[str, Usage]:
    """Guidance usage from Reef's records, for entries whose metadata lacks it (opt-in)."""
    if not enabled or not services.scenario:
        return {}
    receipts = [
        str(e.metadata.get("agent_record_id"))
        for e in [*view.archive.entries.values(), *(x for _, _, x in view.in_flight)]
        if e.timestep >= 1 and "guidance_response_usage" not in e.metadata
    ]
    with ReefRecordUsage(services.reef_url, services.scenario, token=services.token) as reader:
        return reader.fetch(receipts)


def run_task(state_dir: Path) -> Path | None:
    """The task directory of the run in `state_dir`, from its recorded settings; None when they
    cannot say."""
    from harness.settings.task_dirs import task_dir_of

    for path in _recorded_run(state_dir).get("settings_files", []):
        try:
            return task_dir_of(RunSettings.load(path))
        except (RunSettingsError, OSError):
            continue
    return None


def judge_url_of(flag: str | None) -> str:
    """The judge to use, in the one order of `harness.settings.precedence`: the flag, serve.yaml
    (whose `${FRONTIERCS_JUDGE_URL:-...}` lets the environment set it; with no readable
    serve.yaml, the variable itself), the local default."""
    try:
        configured = RunSettings.load().judge_url
    except (RunSettingsError, OSError):
        configured = os.environ.get("FRONTIERCS_JUDGE_URL")
    return first_given(flag, configured, DEFAULT_JUDGE_URL) or DEFAULT_JUDGE_URL
