"""Guidance-TTT harness: the task-agnostic search loop around a trainable guidance model.

`harness:HarborAgent` is resolved lazily so that importing the core never imports Harbor.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HarborAgent"]


def __getattr__(name: str) -> Any:
    if name == "HarborAgent":
        from harness.run.harbor_agent import HarborAgent

        return HarborAgent
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
