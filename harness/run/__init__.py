"""The loop: one rollout (`rollout`), one step (`step`), the run controller and its training gate
(`controller`, `gate`), qualification, Reef cross-checks, repairs on resume, the spend limit, the
services and watchers a run builds, the steps of a run (`step_loop`), the one place a run is
assembled (`assembly`), the processes `guidance-ttt run` starts (`stack`), crash points for
tests, and the Harbor agent with its local trial environment.
"""
