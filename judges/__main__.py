"""`python -m judges` starts the local judge service (same as the `guidance-ttt-judge` script)."""

from __future__ import annotations

from judges.service.app import main

if __name__ == "__main__":
    main()
