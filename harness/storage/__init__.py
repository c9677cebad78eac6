"""Persistence of a run's state directory: atomic writes, the archive store and its journal records,
`library.json`, `resume-state.json`, and the layout of the state directory (`run_files`). Imports
the core
only; standard library only.
"""
