"""The local judge service: the FrontierCS judge HTTP API on 127.0.0.1, and `main()`.

    python -m judges --port 8081 [--host 127.0.0.1] [--state-dir DIR] [--workers K]
                     [--frontiercs DIR] [--problems DIR] [--task DIR] [--public-cases DIR]
                     [--testlib DIR] [--generated-cases N --seed S]

    python -m judges --ray [ADDRESS] [--ray-option resource=NAME] [--ray-option label=K=V] ...
    python -m judges --limit max-queue=64 --limit verdict-cache-mb=512 ...

(problem sources: `judges.service.sources`; the verdict cache and Ray workers:
`judges.service.setup`; the `--limit` settings: `LIMITS` below; the test-only switches, no
flags: `judges.service.testing`)

| call                  | answer                                                          |
|-----------------------|-----------------------------------------------------------------|
| GET /health           | {"ok": true, "caseRuns", "verdictCache": {...}, "ray": {...}}   |
| GET /problems         | {"problems": [{"id": "0", "cases": N, "suite": {...}}]}         |
| POST /submit          | {"sid": <int>}; 400 malformed request, missing field, unknown pid  |
|                       | or lang; 408 body too slow; 413 body over 10 MiB; 503 queue full  |
| GET /result/{sid}     | {"status": "queued"} until final; the final record; 404 unknown |

`/submit` takes `pid`, `lang`, `code` as multipart (a file part named `code`, or text fields),
JSON or urlencoded, like FrontierCS (`judges.service.requests` reads and validates them). Any call
may be answered 503 with Retry-After under overload (`judges.service.connections`), and, where the
token GUIDANCE_TTT_JUDGE_TOKEN is set (required to bind anything but loopback), any call but /health
401 without `Authorization: Bearer <token>` (`judges.service.auth`). It prints
`judge listening on http://HOST:PORT` once ready (`--port 0` picks a free port) and stops
cleanly on SIGTERM or SIGINT (exit status 0).

Server stack: aiohttp. The judge's work is waiting on sandboxed subprocesses, which an asyncio
server handles with one event loop and a small thread pool; aiohttp parses multipart bodies
(file parts included) itself, so no hand-built parsing, and it is a long-maintained library.

Longer than the project's ~400 lines on purpose: the routes, the flags and `main()`'s start-up
read as one description of the service; what each route does is in the modules named above.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import urllib.request
from pathlib import Path

from aiohttp import web

from judges.gpu.judge import GpuJudge, add_gpu_arguments, options_from
from judges.problems.folders import STATEMENT_LIMIT, read_statement
from judges.problems.package import ProblemError, parse_memory_limit
from judges.sandbox.bounds import memory_bound
from judges.sandbox.runner import DEFAULT_SANDBOX_UID, Sandbox, SandboxUnavailable
from judges.service import testing
from judges.service.access_log import add_access_log_argument, route_access_log
from judges.service.auth import (
    authorized,
    require_token_off_loopback,
    token_from_env,
    token_middleware,
    unauthorized,
)
from judges.service.clients import client_of
from judges.service.connections import descriptor_budget, error_middleware, listen
from judges.service.engine import DISPATCHERS, EngineSettings, JudgeEngine, SubmissionRefused
from judges.service.named_flags import Named, add_named_flag
from judges.service.requests import (
    BODY_TIMEOUT_S,
    MAX_BODY_BYTES,
    BadRequest,
    oversize,
    refuse_oversize,
    submission_fields,
)
from judges.service.setup import add_ray_arguments, open_verdict_cache, start_remote
from judges.service.sources import absolute_path, add_problem_arguments, load_served_problems
from judges.verdicts.cache import CACHE_FILE, DEFAULT_LIMIT_MB
from judges.verdicts.judging import OUTPUT_FIELD_CAP, STDOUT_CAP, CompileLimits
from judges.verdicts.state_lock import hold_state_dir
from judges.verdicts.store import SubmissionStore

log = logging.getLogger("judges.service.app")

ENGINE_KEY = web.AppKey("engine", JudgeEngine)
BODY_TIMEOUT_KEY = web.AppKey("body_timeout", float)
TOKEN_KEY = web.AppKey("token", str)


def create_app(
    engine: JudgeEngine, body_timeout: float = BODY_TIMEOUT_S, token: str | None = None
) -> web.Application:
    """The aiohttp application serving `engine` (routes only; no background work); with a
    `token`, every call but /health needs it (`judges.service.auth`)."""
    middlewares = [error_middleware, *([token_middleware(token)] if token else [])]
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
    app[ENGINE_KEY] = engine
    app[BODY_TIMEOUT_KEY] = body_timeout
    app[TOKEN_KEY] = token or ""
    app.router.add_get("/health", _health)
    app.router.add_get("/problems", _problems)
    app.router.add_get("/problem/{pid}/statement", _statement)
    app.router.add_post("/submit", _submit, expect_handler=_expect_continue)
    app.router.add_get("/result/{sid}", _result)
    return app


async def _expect_continue(request: web.Request) -> web.StreamResponse | None:
    """`Expect: 100-continue` (before any middleware): 401 without the token, 413 for a body
    declared over the limit, else `100 Continue` — never for a body that will be refused."""
    token = request.app[TOKEN_KEY]
    if token and not authorized(request, token):
        return unauthorized()
    message = oversize(request)
    if message is not None:
        return await refuse_oversize(request, message, drain=False)
    expect = request.headers.get("Expect", "")
    if request.version != (1, 1) or expect.lower() != "100-continue":
        return web.json_response(
            {"error": f"unknown expectation {expect[:64]!r}; send Expect: 100-continue or none"},
            status=417,
        )
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the final answer's head has not started yet
    return None


async def _health(request: web.Request) -> web.Response:
    engine = request.app[ENGINE_KEY]
    if engine.healthy():
        token = request.app[TOKEN_KEY]
        if token and not authorized(request, token):
            return web.json_response({"ok": True})  # the counts only for callers with the token
        return web.json_response({"ok": True, **await asyncio.to_thread(engine.counters)})
    return web.json_response({"ok": False, "error": "the judge engine stopped"}, status=503)


async def _problems(request: web.Request) -> web.Response:
    problems = request.app[ENGINE_KEY].problems
    return web.json_response({"problems": [problems[pid].listing() for pid in sorted(problems)]})


async def _statement(request: web.Request) -> web.Response:
    """A problem's statement.txt, read only inside its folder and bounded (`read_statement`):
    404 when there is none, 403 naming the rule when it is refused (the path stays in the log)."""
    problem = request.app[ENGINE_KEY].problems.get(request.match_info["pid"])
    if problem is None:
        return web.Response(status=404, text="statement not found")
    try:
        text = await asyncio.to_thread(read_statement, problem.directory)
    except ProblemError as refusal:
        log.warning("statement of problem %s refused: %s", problem.id, refusal)
        return web.Response(
            status=403,
            text=f"statement refused: it must be a UTF-8 regular file inside the problem "
            f"folder, at most {STATEMENT_LIMIT >> 20} MiB",
        )
    if text is None:
        return web.Response(status=404, text="statement not found")
    return web.Response(text=text, content_type="text/plain")


async def _submit(request: web.Request) -> web.StreamResponse:
    message = oversize(request)
    if message is not None:
        return await refuse_oversize(request, message)
    try:
        fields = await submission_fields(request, request.app[BODY_TIMEOUT_KEY])
    except BadRequest as refusal:
        if refusal.status == 413:
            return await refuse_oversize(request, str(refusal))
        return web.json_response({"error": str(refusal)}, status=refusal.status)
    missing = [name for name in ("pid", "lang", "code") if not fields.get(name)]
    if missing:
        return web.json_response(
            {
                "error": "pid/lang/code required",
                "missing": missing,
                "hint": "send multipart with a file part `code`, JSON or urlencoded fields",
            },
            status=400,
        )
    try:
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        server = transport.get_extra_info("sockname") if transport is not None else None
        client = await asyncio.to_thread(client_of, peer, server)
        sid = await request.app[ENGINE_KEY].submit(
            str(fields["pid"]), str(fields["lang"]), str(fields["code"]), client
        )
    except SubmissionRefused as refusal:
        headers = {"Retry-After": "5"} if refusal.status == 503 else None
        return web.json_response({"error": str(refusal)}, status=refusal.status, headers=headers)
    return web.json_response({"sid": sid})


async def _result(request: web.Request) -> web.Response:
    try:
        sid = int(request.match_info["sid"])
    except ValueError:
        return web.json_response({"error": "sid must be number"}, status=400)
    record = await request.app[ENGINE_KEY].result(sid)
    if record is None:
        return web.json_response({"error": "not found"}, status=404)
    if request.query.get("short"):
        final = await asyncio.to_thread(json.loads, record)
        return web.json_response({"status": final["status"], "passed": final.get("passed")})
    return web.Response(body=record, content_type="application/json")


def build_parser(prog: str = "guidance-ttt-judge") -> argparse.ArgumentParser:
    """The judge's flags; every help text names the default."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Local judge speaking the FrontierCS protocol, with a bubblewrap sandbox.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8081, help="port; 0 picks a free one (default: %(default)s)"
    )
    add_problem_arguments(parser)
    parser.add_argument(
        "--state-dir",
        type=absolute_path,
        default="work/judge-state",
        help="where submissions and verdicts are kept (default: %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=_cores(),
        help="parallel sandboxes (default: this machine's cores, %(default)s)",
    )
    parser.add_argument(
        "--generated-cases",
        type=int,
        default=70,
        metavar="N",
        help="cases of the generated suite (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the generated suite (default: %(default)s)"
    )
    add_named_flag(parser, "--limit", LIMITS, "a bound of the service, NAME=VALUE")
    parser.add_argument(
        "--sandbox-uid",
        type=int,
        default=DEFAULT_SANDBOX_UID,
        help="user id candidates run as inside the sandbox (default: %(default)s)",
    )
    parser.add_argument(
        "--accept-per-process-limits",
        action="store_true",
        help="start even where no cgroup can be used, with only per-process rlimits "
        "(a candidate's processes together can then exceed its memory limit; default: off)",
    )
    add_gpu_arguments(parser)
    add_ray_arguments(parser)
    add_access_log_argument(parser)
    return parser


# `--limit NAME=VALUE`: bounds of the service that few operators change, one flag for all
LIMITS = {
    "max-queue": Named("max_queue", int, 64, "submissions waiting; beyond it /submit answers 503"),
    "max-connections": Named(
        "max_connections",
        int,
        256,
        "connections served at once; more are answered 503, fewer where the descriptor limit "
        "needs it",
    ),
    "idle-timeout": Named(
        "idle_timeout",
        float,
        10.0,
        "seconds before an idle connection, or one still sending its request head, is closed",
        "S",
    ),
    "body-timeout": Named(
        "body_timeout",
        float,
        BODY_TIMEOUT_S,
        "seconds a request body may take to arrive, then 408",
        "S",
    ),
    "output-field-bytes": Named(
        "output_field_bytes",
        int,
        OUTPUT_FIELD_CAP,
        "stdout bytes kept in a case's stored output; the rest is summarised by its size and "
        "sha256",
    ),
    "compile-time": Named("compile_time", float, 10.0, "compiler CPU seconds", "S"),
    "compile-memory": Named("compile_memory", str, "1g", "compiler address space", "SIZE"),
    "verdict-cache-mb": Named(
        "verdict_cache_mb",
        float,
        DEFAULT_LIMIT_MB,
        "size bound of the verdict cache (compressed records, least recently used out) in "
        f"<state-dir>/{CACHE_FILE}; 0 turns it off",
        "MB",
    ),
}


def _cores() -> int:
    return len(os.sched_getaffinity(0)) or 1


async def serve(args: argparse.Namespace) -> None:
    """Start everything, announce the address, serve until SIGTERM/SIGINT, then stop cleanly.

    A signal during startup ends the service as soon as the current startup step is done.
    """
    if args.workers < 1 or args.max_queue < 1 or args.generated_cases < 1:
        raise ValueError("--workers, --generated-cases and --limit max-queue=N must be at least 1")
    if min(args.idle_timeout, args.body_timeout) <= 0 or args.max_connections < 1:
        raise ValueError(
            "--limit idle-timeout=S and body-timeout=S must be positive, max-connections=N at "
            "least 1"
        )
    cap = descriptor_budget(args.max_connections, args.workers)
    if not 0 <= args.output_field_bytes <= STDOUT_CAP:
        raise ValueError(
            f"--limit output-field-bytes={args.output_field_bytes} is outside 0..{STDOUT_CAP}"
        )
    switches = testing.read()
    token = token_from_env()
    require_token_off_loopback(args.host, token)
    state = Path(args.state_dir)
    if state.exists() and not state.is_dir():
        raise ValueError(
            f"--state-dir {state} is a file, not a directory; move it away or choose another path"
        )
    state_lock = hold_state_dir(state)  # one judge per state directory, before anything there
    port_taken(args.host, args.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    problems = await asyncio.to_thread(load_served_problems, args)
    store = SubmissionStore(args.state_dir)
    access = route_access_log(getattr(args, "access_log", None), state)
    bound = None  # with --ray, every node sets up its own bound and sandbox
    if args.ray is None:
        bound = await asyncio.to_thread(
            memory_bound, switches.cgroup, args.accept_per_process_limits, args.workers
        )
    scratch = Path(tempfile.mkdtemp(prefix="guidance-ttt-judge-"))
    remote = verdicts = None
    try:
        if args.ray is None:
            sandbox = await asyncio.to_thread(Sandbox, scratch, args.sandbox_uid, None, bound)
            await asyncio.to_thread(sandbox.check)
        else:
            sandbox, remote = None, await asyncio.to_thread(start_remote, args, problems, switches)
        if stop.is_set():
            return
        settings = EngineSettings(
            workers=args.workers,
            max_queue=args.max_queue,
            output_field_bytes=args.output_field_bytes,
            sandbox_sessions=switches.kept_sandbox,
            compile_limits=CompileLimits(
                cpu_seconds=args.compile_time,
                memory_bytes=parse_memory_limit(args.compile_memory, "--limit compile-memory"),
            ),
            dispatchers=remote.dispatchers if remote is not None else DISPATCHERS,
        )
        verdicts = await asyncio.to_thread(
            open_verdict_cache, args, problems, settings, bound, switches.cgroup
        )
        engine = JudgeEngine(
            problems, store, sandbox, settings, remote=remote, verdicts=verdicts, scratch=scratch
        )
        remote = None  # the engine closes it when it stops
        if sandbox is not None:  # with --ray no GPU problem is served (judges.service.setup)
            engine.gpu_judge = await asyncio.to_thread(
                GpuJudge.start, problems, options_from(args, switches), sandbox, args.state_dir
            )
        await engine.start()
        runner = web.AppRunner(
            create_app(engine, args.body_timeout, token),
            access_log=logging.getLogger("judges.access"),
            keepalive_timeout=args.idle_timeout,
            lingering_time=0,  # an unread (malformed or stalled) body is not waited for
        )
        await runner.setup()
        listener = None
        try:
            listener = await listen(runner, args.host, args.port, cap)
            host, port = listener.sockets[0].getsockname()[:2]
            log.info(
                "at most %d connections at once (more get 503); idle or partial requests are "
                "closed after %g s",
                cap,
                args.idle_timeout,
            )
            log.info(
                "serving problems %s with %d workers; state in %s; access log %s",
                sorted(problems),
                args.workers,
                args.state_dir,
                "on stderr" if access is None else access,
            )
            log.info(
                "access: %s",
                "every call but /health needs Authorization: Bearer <the token>"
                if token
                else "open to any local client (loopback only; no token set)",
            )
            print(f"judge listening on http://{host}:{port}", flush=True)
            await stop.wait()
            log.info("stopping: unfinished submissions will be judged at the next start")
        finally:
            if listener is not None:
                listener.close()
            await runner.cleanup()
            await engine.stop()
    finally:
        if remote is not None:
            remote.close()
        if verdicts is not None:
            verdicts.store.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if bound is not None:
            bound.close()
        state_lock.release()


def port_taken(host: str, port: int) -> None:
    """Refuse a port something already listens on, in one line that says whether a judge
    answers there (then it can be used as it is) and how to pick a free one (`--port 0`)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
            return
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return  # another problem: the real bind reports it
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else shown}:{port}"
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
            judge = json.loads(answer.read().decode() or "{}").get("ok") is True
    except (OSError, ValueError, AttributeError):
        judge = False
    who = (
        f"a judge already answers there (use it: --judge-url {url})"
        if judge
        else "something that is not a judge listens there"
    )
    raise OSError(
        f"port {port} on {host} is already in use: {who}; or start with --port 0 to pick a "
        "free port"
    )


def main(argv: list[str] | None = None, prog: str = "guidance-ttt-judge") -> None:
    """Console entry (`guidance-ttt-judge`, `python -m judges`): parse flags and serve.

    Exits 0 after SIGTERM/SIGINT, 2 with a one-line reason when the problems, the state
    directory, the port or the sandbox cannot be set up.
    """
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve(args))
    except (ProblemError, SandboxUnavailable, ValueError, OSError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
        sys.exit(2)
