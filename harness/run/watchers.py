"""The run's optional watchers beyond the event log and the live display: today the W&B sink
(`harness.observe.wandb_sink`), built from `observability.wandb` in the run's settings file."""

from __future__ import annotations

from harness.observe.cost import PriceTable
from harness.observe.wandb_sink import WandbOptions, WandbSink
from harness.settings.run_settings import RunSettings


def wandb_sink(
    settings: RunSettings,
    *,
    prices: PriceTable | None = None,
    models: tuple[str, str] | None = None,
) -> WandbSink | None:
    """The W&B sink of the run, or None when `observability.wandb` is off (then `wandb` is never
    imported). Its W&B run is keyed by the run's identity and state directory, so a resume
    continues it."""
    options = WandbOptions.from_block(settings.wandb, settings.scenario)
    if options is None:
        return None
    identity = {**settings.identity(), "state_dir": str(settings.state_dir)}
    config = {
        key: value
        for key, value in settings.safe_dict().items()
        if key not in ("wandb", "guidance_upstream_url")
    }
    return WandbSink(options, identity=identity, config=config, prices=prices, models=models)
