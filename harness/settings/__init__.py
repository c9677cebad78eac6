"""Run settings: `serve.yaml` / `serve-frozen.yaml` read once (Reef's interpolation), validated by
the
section models, and built into one `RunSettings` record; where task directories are.
"""
