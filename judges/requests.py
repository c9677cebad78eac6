"""Reading a submission out of an HTTP request, refusing malformed ones with a reason.

`submission_fields(request)` returns `pid`, `lang` and `code` (each a str, or None when
absent) from the query string and the body — multipart (a file part or text fields), JSON,
urlencoded or a `text/*` body — or raises `BadRequest` whose status (400, or 408 for a body
that does not arrive in time) and message say what is wrong. It persists nothing, so a refused
request consumes no submission id and leaves no folder.

Refused, each with a message naming the problem: a body that cannot be decoded
(`Content-Encoding` that does not match it, a truncated multipart body), an unknown `charset`,
invalid JSON, JSON nested deeper than MAX_JSON_DEPTH, a lone UTF-16 surrogate in a JSON
string, and any field that is not valid UTF-8 (or the declared charset): the judge compiles
exactly the bytes it was sent or nothing, never a silently repaired copy, and the message names
the byte offset. A body still arriving after `body_timeout` seconds is a 408.

Running out of descriptors while reading (multipart file parts are spooled to temporary files)
is not the client's fault: that OSError propagates, and the service answers 503.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import errno
import json
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

BODY_TIMEOUT_S = 30.0
MAX_JSON_DEPTH = 64
FIELDS = ("pid", "lang", "code")
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


class BadRequest(Exception):
    """A request the judge refuses; `status` is the HTTP status, the message says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def is_resource_exhaustion(error: BaseException) -> bool:
    """True for an OSError meaning the judge ran out of descriptors or memory (a 503)."""
    return isinstance(error, OSError) and error.errno in _RESOURCE_ERRNOS


async def submission_fields(
    request: web.Request, body_timeout: float = BODY_TIMEOUT_S
) -> dict[str, str | None]:
    """pid, lang and code from the request; BadRequest when it is malformed (see the module)."""
    charset = _charset(request)
    try:
        async with asyncio.timeout(body_timeout):
            raw = await _raw_fields(request, charset)
    except TimeoutError:
        raise BadRequest(
            f"the request body did not arrive within {body_timeout:g} s", status=408
        ) from None
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
    return {name: _field(name, raw.get(name), charset) for name in FIELDS}


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


async def _raw_fields(request: web.Request, charset: str) -> dict[str, Any]:
    raw: dict[str, Any] = dict(_form_pairs(request.rel_url.raw_query_string, "query string"))
    kind = request.content_type
    if kind == "application/json":
        raw.update(await _json_object(await request.read(), charset))
    elif kind == "application/x-www-form-urlencoded":
        body = await request.read()
        try:
            text = body.decode("ascii")
        except UnicodeDecodeError as error:
            raise _not_text("urlencoded body", body, error, "ascii") from None
        raw.update(_form_pairs(text, "urlencoded body", charset))
    elif kind == "multipart/form-data":
        form = await request.post()
        for key, value in form.items():
            raw[key] = value.file.read() if isinstance(value, web.FileField) else value
    elif kind.startswith("text/") and request.can_read_body:
        raw["code"] = await request.read()
    return raw


def _form_pairs(text: str, where: str, charset: str = "utf-8") -> list[tuple[str, bytes]]:
    """Pairs of a query string or urlencoded body, values kept as bytes (decoded strictly later)."""
    try:
        pairs = parse_qsl(text, keep_blank_values=True, encoding="latin-1", errors="strict")
    except ValueError as error:
        raise BadRequest(f"malformed {where}: {error}") from None
    return [(key.encode("latin-1").decode(charset, "replace"), value.encode("latin-1"))
            for key, value in pairs]  # fmt: skip


async def _json_object(body: bytes, charset: str) -> dict[str, Any]:
    try:
        text = body.decode(charset)
    except UnicodeDecodeError as error:
        raise _not_text("JSON body", body, error, charset) from None
    depth = _nesting_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise BadRequest(
            f"JSON body nests {depth} levels deep (at most {MAX_JSON_DEPTH}); send an object "
            "with pid, lang and code"
        )
    try:
        value = await asyncio.to_thread(json.loads, text)
    except ValueError as error:
        raise BadRequest(f"body is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise BadRequest("JSON body must be an object with pid, lang and code")
    return value


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting outside strings (exact for valid JSON, cheap for any text)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        elif char in "]}":
            depth -= 1
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
