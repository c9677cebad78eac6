"""The seed's name `harness.agent`, kept for readers and users: the module is `harness.run.agent`.

A permanent face: it re-exports that module's public names. Nothing inside the project imports it.
"""

from harness.run.agent import *  # noqa: F403
from harness.run.agent import __all__ as __all__
