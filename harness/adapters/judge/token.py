"""The judge's access token, as every client of the judge sends it.

A judge bound off loopback (a Harbor task container reaches it at the host's gateway) needs
its token on every call but `/health` (judges/README.md, "Access"). The token comes from the
environment variable TOKEN_ENV only, the same one the judge reads, and is never logged or
written: where it is missing or wrong the judge answers 401 and the message names the variable.
"""

from __future__ import annotations

import os

TOKEN_ENV = "GUIDANCE_TTT_JUDGE_TOKEN"


def judge_headers() -> dict[str, str]:
    """`Authorization: Bearer <token>` when TOKEN_ENV is set, else no header."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def unauthorized_hint(status: int) -> str:
    """What to add to a message about a judge answer with HTTP `status` (only 401 has one)."""
    if status != 401:
        return ""
    state = "is wrong" if os.environ.get(TOKEN_ENV, "").strip() else "is not set"
    return f"; the judge wants its access token and {TOKEN_ENV} {state}: set it to the judge's"
