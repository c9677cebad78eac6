"""The seed's name `harness.execution`, kept for readers and users: the module is
`harness.adapters.executor.client`.

A permanent face: it re-exports that module's public names. Nothing inside the project imports it.
"""

from harness.adapters.executor.client import *  # noqa: F403
from harness.adapters.executor.client import __all__ as __all__
