"""The loop: one rollout, one step (`agent`), the run controller and its training gate,
qualification,
Reef cross-checks, crash recovery, the services a run builds, the runner, and the Harbor agent.
"""
