"""Run settings: `serve.yaml` / `serve-frozen.yaml` read once (Reef's interpolation), validated by
the section models and built into one `RunSettings` record; a run's own settings copy (`run_copy`,
the one writer of settings YAML); where the repository, its defaults (`paths`) and the task
directories are.
"""
