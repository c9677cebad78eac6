"""Persistence of a run's state directory: the directory as one object that opens it and owns the
ordered commit of a step (`state_dir`), atomic writes, the archive store and its journal records,
`library.json`, `resume-state.json`, and the layout of the state directory (`run_files`).
Imports the core only; standard library only.
"""
