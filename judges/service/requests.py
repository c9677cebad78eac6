"""Reading a submission out of an HTTP request, refusing malformed ones with a reason.

`submission_fields(request)` returns `pid`, `lang` and `code` (each a str, or None when
absent) from the query string and the body — multipart (a file part or text fields), JSON,
urlencoded or a `text/*` body — or raises `BadRequest` whose status (400, or 408 for a body
that does not arrive in time) and message say what is wrong. It persists nothing, so a refused
request consumes no submission id and leaves no folder.

Refused, each with a message naming the problem: a body that cannot be decoded
(`Content-Encoding` that does not match it, a truncated multipart body), an unknown `charset`,
invalid JSON, JSON nested deeper than MAX_JSON_DEPTH, a multipart body of more than MAX_PARTS
parts or MAX_BODY_BYTES, a lone UTF-16 surrogate in a JSON string, and any field that is not
valid UTF-8 (or the declared charset): the judge compiles exactly the bytes it was sent or
nothing, never a silently repaired copy, and the message names the byte offset. A body still
arriving after `body_timeout` seconds is a 408. A body over MAX_BODY_BYTES is a 413 naming the
limit: at once when its Content-Length says so (`oversize`; no `100 Continue` is sent for it),
else as soon as the bytes read pass it; `refuse_oversize` answers it and then discards what
the client is still sending for up to OVERSIZE_DRAIN_S, so that the client, busy uploading,
is not cut off (a reset) before it reads the answer.

Bodies are read into memory (never spooled to temporary files) and parsed in worker threads.
Running out of descriptors or memory while reading is not the client's fault: that OSError
propagates, and the service answers 503.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import itertools
import json
import logging
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import BodyPartReader, web

from judges.sandbox.outcome import is_resource_exhaustion

BODY_TIMEOUT_S = 30.0
MAX_BODY_BYTES = 10 * 1024 * 1024  # FrontierCS accepts request bodies up to 10 MB
OVERSIZE_DRAIN_S = 5.0
MAX_JSON_DEPTH = 64
MAX_PARTS = 16
FIELDS = ("pid", "lang", "code")

log = logging.getLogger("judges.service.requests")


class BadRequest(Exception):
    """A request the judge refuses; `status` is the HTTP status, the message says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


async def submission_fields(
    request: web.Request, body_timeout: float = BODY_TIMEOUT_S
) -> dict[str, str | None]:
    """pid, lang and code from the request; BadRequest when it is malformed (see the module)."""
    charset = _charset(request)
    try:
        async with asyncio.timeout(body_timeout):
            raw, charsets = await _raw_fields(request, charset)
    except TimeoutError:
        raise BadRequest(
            f"the request body did not arrive within {body_timeout:g} s", status=408
        ) from None
    except web.HTTPRequestEntityTooLarge:
        raise BadRequest(_too_large(), status=413) from None
    except (BadRequest, web.HTTPException):
        raise
    except OSError as error:
        if is_resource_exhaustion(error):
            raise
        raise BadRequest(f"cannot read the request body: {error}") from None
    except Exception as error:  # any other parse failure is the body's fault, never a 500
        encoding = request.headers.get("Content-Encoding")
        raise BadRequest(
            f"malformed {request.content_type} body"
            + (f" (Content-Encoding: {encoding})" if encoding else "")
            + f": {type(error).__name__}: {' '.join(str(error).split())}"
        ) from None
    if not raw.get("code") and raw.get("codeBase64") is not None:
        raw["code"] = _base64_field(raw["codeBase64"])
    return {name: _field(name, raw.get(name), charsets.get(name, charset)) for name in FIELDS}


def oversize(request: web.BaseRequest) -> str | None:
    """The 413 message when the declared Content-Length is over the limit, else None."""
    size = request.content_length
    return _too_large(f"request body of {size} bytes") if size and size > MAX_BODY_BYTES else None


async def refuse_oversize(
    request: web.BaseRequest, message: str, *, drain: bool = True
) -> web.StreamResponse:
    """Answer 413 with `message` and close, after discarding for at most OVERSIZE_DRAIN_S what
    the client is still sending (closing with unread data would reset the connection, and a
    client still uploading would lose the answer). `drain=False` for a client that waits for
    `100 Continue` and so sends nothing."""
    response = web.json_response(
        {"error": message, "limitBytes": MAX_BODY_BYTES},
        status=413,
        headers={"Connection": "close"},
    )
    await response.prepare(request)  # type: ignore[arg-type]
    await response.write_eof()
    if drain and request.can_read_body:
        try:
            async with asyncio.timeout(OVERSIZE_DRAIN_S):
                while await request.content.readany():
                    pass
        except Exception:  # gone, still sending, or a broken body: the connection closes now
            log.debug("stopped discarding an over-size body", exc_info=True)
    return response


def _too_large(what: str = "request body") -> str:
    return (
        f"{what} exceeds the limit of {MAX_BODY_BYTES} bytes (10 MiB, as on FrontierCS); "
        "send a smaller program"
    )


def _charset(request: web.Request) -> str:
    """The declared charset (default UTF-8); an unknown one is refused before reading."""
    declared = request.charset
    if declared is None:
        return "utf-8"
    try:
        return codecs.lookup(declared).name
    except LookupError:
        raise BadRequest(
            f"unknown charset {declared!r} in Content-Type; send UTF-8 (charset=utf-8)"
        ) from None


async def _raw_fields(request: web.Request, charset: str) -> tuple[dict[str, Any], dict]:
    """The raw fields (bytes or JSON values) and, for multipart text parts, their charsets.
    Parsing a large body happens in a worker thread, never on the event loop."""
    raw: dict[str, Any] = dict(_form_pairs(request.rel_url.raw_query_string, "query string"))
    charsets: dict[str, str] = {}
    kind = request.content_type
    if kind == "application/json":
        raw.update(await asyncio.to_thread(_json_object, await request.read(), charset))
    elif kind == "application/x-www-form-urlencoded":
        raw.update(await asyncio.to_thread(_urlencoded, await request.read(), charset))
    elif kind == "multipart/form-data":
        await _multipart(request, raw, charsets)
    elif kind.startswith("text/") and request.can_read_body:
        raw["code"] = await request.read()
    return raw, charsets


async def _multipart(request: web.Request, raw: dict[str, Any], charsets: dict[str, str]) -> None:
    """Read a multipart body into memory, at most MAX_PARTS parts and MAX_BODY_BYTES in all
    (aiohttp's own form reader would spool every file part to a temporary file: a body of
    thousands of parts could exhaust the judge's descriptors)."""
    reader = await request.multipart()
    total = 0
    for count in itertools.count(1):
        part = await reader.next()
        if part is None:
            return
        if count > MAX_PARTS:
            raise BadRequest(
                f"multipart body has more than {MAX_PARTS} parts; send pid, lang and code"
            )
        if not isinstance(part, BodyPartReader):
            raise BadRequest("nested multipart parts are not accepted; send pid, lang and code")
        chunks = []
        while chunk := await part.read_chunk():
            total += len(chunk)
            if total > MAX_BODY_BYTES:
                raise BadRequest(_too_large("multipart body"), status=413)
            chunks.append(chunk)
        data = part.decode(b"".join(chunks))  # Content-Transfer-Encoding / -Encoding only
        if part.name:
            raw[part.name] = data
            if part.filename is None:
                charsets[part.name] = part.get_charset(default="utf-8")


def _urlencoded(body: bytes, charset: str) -> list[tuple[str, bytes]]:
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError as error:
        raise _not_text("urlencoded body", body, error, "ascii") from None
    return _form_pairs(text, "urlencoded body", charset)


def _form_pairs(text: str, where: str, charset: str = "utf-8") -> list[tuple[str, bytes]]:
    """Pairs of a query string or urlencoded body, values kept as bytes (decoded strictly later)."""
    try:
        pairs = parse_qsl(text, keep_blank_values=True, encoding="latin-1", errors="strict")
    except ValueError as error:
        raise BadRequest(f"malformed {where}: {error}") from None
    return [
        (key.encode("latin-1").decode(charset, "replace"), value.encode("latin-1"))
        for key, value in pairs
    ]


def _json_object(body: bytes, charset: str) -> dict[str, Any]:
    """The JSON object of a body (in a worker thread): strict decoding, bounded nesting."""
    try:
        text = body.decode(charset)
    except UnicodeDecodeError as error:
        raise _not_text("JSON body", body, error, charset) from None
    too_deep = BadRequest(
        f"JSON body nests more than {MAX_JSON_DEPTH} levels deep; send an object with pid, "
        "lang and code"
    )
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    except ValueError as error:
        raise BadRequest(f"body is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise BadRequest("JSON body must be an object with pid, lang and code")
    if _depth(value) > MAX_JSON_DEPTH:
        raise too_deep
    return value


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _base64_field(value: Any) -> bytes:
    if not isinstance(value, str | bytes):
        raise BadRequest(f"field codeBase64 must be a string, got {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("field codeBase64 is not valid base64") from None


def _field(name: str, value: Any, charset: str) -> str | None:
    """One field as text: bytes decoded strictly, strings checked for lone surrogates."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode(charset)
        except LookupError:
            raise BadRequest(f"unknown charset {charset!r} for field {name}; send UTF-8") from None
        except UnicodeDecodeError as error:
            raise _not_text(f"field {name}", bytes(value), error, charset) from None
    elif isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise BadRequest(f"field {name} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = value[error.start]
        raise BadRequest(
            f"field {name} contains a lone UTF-16 surrogate \\u{ord(bad):04x} at character "
            f"{error.start}; send valid Unicode (a surrogate pair, or UTF-8 text)"
        ) from None
    return value.strip() if name != "code" else value


def _not_text(where: str, data: bytes, error: UnicodeDecodeError, charset: str) -> BadRequest:
    return BadRequest(
        f"{where} is not valid {charset}: byte 0x{data[error.start]:02x} at byte offset "
        f"{error.start}; the judge compiles the exact source or nothing, so send it as UTF-8"
    )
