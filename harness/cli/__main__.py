"""`python -m harness.cli`: the `guidance-ttt` command."""

import sys

from harness.cli.entry import main

sys.exit(main())
