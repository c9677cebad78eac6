"""The seed's name `harness.harbor_agent`, kept for readers and users: the module is
`harness.run.harbor_agent`.

A permanent face: it re-exports that module's public names. Nothing inside the project imports it.
"""

from harness.run.harbor_agent import *  # noqa: F403
from harness.run.harbor_agent import __all__ as __all__
