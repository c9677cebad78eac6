"""The seed's name `harness.run_controller`, kept for readers and users: the module is
`harness.run.controller`.

A permanent face: it re-exports that module's public names. Nothing inside the project imports it.
"""

from harness.run.controller import *  # noqa: F403
from harness.run.controller import __all__ as __all__
