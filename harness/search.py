"""The seed's name `harness.search`, kept for readers and users: the module is
`harness.answers` (reading model answers back: the guidance parser, summary and solution
extraction, the entry a rollout leaves).

A permanent face: it re-exports that module's public names. Nothing inside the project imports it.
"""

from harness.answers import *  # noqa: F403
from harness.answers import __all__ as __all__
