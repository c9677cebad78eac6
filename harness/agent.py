"""The seed's name `harness.agent`, kept for readers and users: the module is `harness.run.step`.

A permanent face: it re-exports that module's public names. Nothing inside the project imports it.
"""

from harness.run.step import *  # noqa: F403
from harness.run.step import __all__ as __all__
