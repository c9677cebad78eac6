"""`python -m harness.adapters.guidance_proxy`: the key forwarder (`server.main`)."""

import sys

from harness.adapters.guidance_proxy.server import main

sys.exit(main())
