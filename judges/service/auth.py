"""The judge's access token: required off loopback, then needed by every call but `/health`.

A Harbor task container reaches the judge at the host's gateway address, so a real deployment
binds a non-loopback address, where anyone on that network could otherwise submit programs and
read every result. The token comes from the environment variable TOKEN_ENV only (never a flag,
which `ps` shows, nor a file in the repository), is never logged, and is compared in constant
time. With it set, every request but `GET /health` must carry `Authorization: Bearer <token>`,
else 401 with `WWW-Authenticate: Bearer`; without it, the judge refuses to bind anything but a
loopback address.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Awaitable, Callable

from aiohttp import web

TOKEN_ENV = "GUIDANCE_TTT_JUDGE_TOKEN"
MIN_TOKEN_CHARS = 16
OPEN_PATHS = frozenset({"/health"})
_MAKE_ONE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def token_from_env() -> str | None:
    """The token in TOKEN_ENV (surrounding blanks dropped), None when unset or empty; ValueError
    (one line, never showing the value) when it is too short to be a secret."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"{TOKEN_ENV} holds {len(token)} characters; use at least {MIN_TOKEN_CHARS} random "
            f"ones, e.g. from {_MAKE_ONE}"
        )
    return token


def is_loopback(host: str) -> bool:
    """True for a loopback address (127.0.0.0/8, ::1) or `localhost`."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def require_token_off_loopback(host: str, token: str | None) -> None:
    """ValueError naming the address and the variable when `host` is not loopback and no token
    is set."""
    if token is None and not is_loopback(host):
        raise ValueError(
            f"--host {host} is not a loopback address: set {TOKEN_ENV} (at least "
            f"{MIN_TOKEN_CHARS} random characters, e.g. from {_MAKE_ONE}) so that only "
            "clients holding it can submit and read results, or bind 127.0.0.1"
        )


def authorized(request: web.BaseRequest, token: str) -> bool:
    """Whether the request carries `Authorization: Bearer <token>` (constant-time compare).

    aiohttp decodes header bytes that are not UTF-8 as lone surrogates (`surrogateescape`);
    they are encoded back the same way, so such a header is a wrong token (401), never an
    exception (a 500)."""
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), f"Bearer {token}".encode())


def unauthorized() -> web.Response:
    """The 401 answer (it never echoes what was sent)."""
    return web.json_response(
        {"error": f"missing or wrong Authorization: Bearer token; send the judge's {TOKEN_ENV}"},
        status=401,
        headers={"WWW-Authenticate": 'Bearer realm="guidance-ttt-judge"'},
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def token_middleware(token: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    """An aiohttp middleware answering 401 to any request without the token, but /health."""

    @web.middleware
    async def check_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS or authorized(request, token):
            return await handler(request)
        return unauthorized()

    return check_token
