"""A loopback forwarder that adds the guidance endpoint's API key, so the key reaches no file.

Frozen-guidance mode puts Reef (record-only) in front of an OpenAI-compatible endpoint. Reef
0.1.3 writes its resolved settings, `inference.upstream-api-key` included, into
`<state>/stack/reef/runtime.yaml`, and this project never writes a secret to a file. So for an
endpoint that needs a key, Reef's upstream is this forwarder on 127.0.0.1 instead: it passes
every request through to the real endpoint unchanged (method, path, query, body; responses
streamed back as they arrive, so server-sent events stay live) and sets
`Authorization: Bearer <key>`, the key read from `GUIDANCE_TTT_GUIDANCE_API_KEY` when the
forwarder starts (held in memory only; it refuses to start without it).

    python -m harness.adapters.guidance_proxy --upstream https://api.example.com --port 8011

`run.sh` starts it by itself in frozen mode when `GUIDANCE_TTT_GUIDANCE_API_KEY` is set.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from aiohttp import ClientSession, ClientTimeout, web

from harness.adapters.guidance_proxy import KEY_VARIABLE

#: Hop-by-hop and recomputed headers that are not forwarded.
_DROPPED = {
    "host",
    "authorization",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "content-encoding",
}


def make_app(upstream: str, key: str, timeout_s: float = 3600.0) -> web.Application:
    """The forwarding application for `upstream` (scheme://host[:port], no /v1)."""
    base = upstream.rstrip("/")

    async def session_context(app: web.Application):  # type: ignore[no-untyped-def]
        app["session"] = ClientSession(timeout=ClientTimeout(total=timeout_s))
        yield
        await app["session"].close()

    async def forward(request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        headers["Authorization"] = f"Bearer {key}"
        session: ClientSession = request.app["session"]
        async with session.request(
            request.method,
            base + request.path_qs,
            headers=headers,
            data=await request.read(),
            allow_redirects=False,
        ) as answer:
            response = web.StreamResponse(status=answer.status, reason=answer.reason)
            for name, value in answer.headers.items():
                if name.lower() not in _DROPPED:
                    response.headers[name] = value
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.cleanup_ctx.append(session_context)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    """Run the forwarder until interrupted; exit 2 without the key or with a bad argument."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.adapters.guidance_proxy",
        description="Forward to the guidance endpoint, adding the key from "
        f"${KEY_VARIABLE} (never written anywhere).",
    )
    parser.add_argument("--upstream", required=True, help="the endpoint, without /v1")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8011, help="port to bind (8011)")
    args = parser.parse_args(argv)
    key = os.environ.get(KEY_VARIABLE, "").strip()
    if not key:
        print(f"guidance_proxy: {KEY_VARIABLE} is not set; nothing to add", file=sys.stderr)
        return 2
    if not args.upstream.startswith(("http://", "https://")):
        print(
            f"guidance_proxy: --upstream {args.upstream!r} is not an http(s) URL", file=sys.stderr
        )
        return 2
    print(f"guidance proxy listening on http://{args.host}:{args.port} -> {args.upstream}")
    web.run_app(make_app(args.upstream, key), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
