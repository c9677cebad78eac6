"""The run's optional watchers beyond the event log and the live display: today the W&B sink
(`harness.observe.wandb_sink`), built from `observability.wandb` in the run's settings file."""

from __future__ import annotations

from harness.observe.cost import PriceTable
from harness.observe.wandb_sink import RunNames, WandbOptions, WandbSink
from harness.settings.run_settings import RunSettings
from harness.storage.run_files import run_id


def wandb_sink(
    settings: RunSettings,
    *,
    prices: PriceTable | None = None,
    models: tuple[str, str] | None = None,
) -> WandbSink | None:
    """The W&B sink of the run, or None when `observability.wandb` is off (then `wandb` is never
    imported). Its W&B id is derived from the state directory's run id (a resume continues
    it, another run never shares it); its group and name are `run_names`'."""
    if WandbOptions.from_block(settings.wandb, settings.scenario) is None:
        return None
    options = WandbOptions.from_block(
        settings.wandb,
        settings.scenario,
        run_id=run_id(settings.state_dir),
        experiment=experiment_names(settings),
    )
    assert options is not None
    identity = {**settings.identity(), "state_dir": str(settings.state_dir)}
    config = {
        key: value
        for key, value in settings.safe_dict().items()
        if key not in ("wandb", "guidance_upstream_url")
    }
    return WandbSink(options, identity=identity, config=config, prices=prices, models=models)


def experiment_names(settings: RunSettings) -> RunNames | None:
    """The experiment, arm and seed a run of an experiment is named by (None: a plain run)."""
    if settings.experiment_name is None:
        return None
    return RunNames(settings.experiment_name, settings.arm, settings.run_seed)
