"""The preflight (`guidance-ttt doctor`): machine, services and task checks and their report table.

`python -m harness.preflight` runs it.
"""
