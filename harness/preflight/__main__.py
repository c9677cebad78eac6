"""`python -m harness.preflight`: the preflight (`guidance-ttt doctor`)."""

import sys

from harness.preflight.doctor import main

sys.exit(main())
