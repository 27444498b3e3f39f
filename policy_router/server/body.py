"""A request's body, read within the server's limits: no more bytes than `max_body_mb`
(refused as soon as the length is announced, or as soon as the read passes it), and JSON
no deeper than `MAX_DEPTH`, so no body can hold the server on a read or blow its stack.
"""

from __future__ import annotations

import json
from typing import Any

from ..ground.errors import ConfigError

__all__ = ["DEFAULT_MAX_BODY_MB", "MAX_DEPTH", "TooLarge", "json_of", "read_body"]

DEFAULT_MAX_BODY_MB = 32.0
"""The largest body the server reads by default, in MiB: a 20 MB image (OpenAI's own
limit per image) is 27 MB once base64-encoded, and fits."""

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects a body may have: far past any real message,
tool or schema, and far short of what would exhaust Python's stack."""


class TooLarge(Exception):
    """A body longer than the server reads: a 413, whatever else the request says."""

    def __init__(self, limit: int, announced: int | None = None) -> None:
        said = f"announces {announced} bytes" if announced is not None else "is longer"
        super().__init__(
            f"the request body {said}; this server reads at most {limit} bytes "
            f"({limit / 2**20:g} MiB, server.max_body_mb)"
        )
        self.limit = limit


async def read_body(request: Any, limit: int) -> bytes:
    """The whole body of a Starlette `request`, or `TooLarge` the moment it cannot fit:
    at once when its `Content-Length` says so (nothing read), else as the read passes it."""
    announced = request.headers.get("content-length")
    if announced is not None:
        try:
            length = int(announced)
        except ValueError:
            raise ConfigError("the Content-Length header is not a number") from None
        if length > limit:
            raise TooLarge(limit, length)
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(limit)
        parts.append(chunk)
    return b"".join(parts)


def json_of(raw: bytes) -> Any:
    """The body as JSON, or a `ConfigError` saying why not (not JSON, not UTF-8, nested
    past `MAX_DEPTH`)."""
    try:
        # What `json.loads` does with bytes, with one decoder made once: `json.loads`
        # given `parse_constant` builds a decoder and its scanner for every body.
        found = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except RecursionError:
        raise ConfigError(f"the request body is nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError):
        raise ConfigError("the request body is not JSON") from None
    # Every level of nesting opens with a bracket, in every encoding JSON may come in (a
    # bracket is one byte 0x5B or 0x7B beside zeros), so a body with no more of those bytes
    # than MAX_DEPTH cannot nest past it: most bodies are not walked.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth_over(found, MAX_DEPTH):
        raise ConfigError(f"the request body is nested deeper than {MAX_DEPTH} levels")
    return found


def _not_json(constant: str) -> Any:
    # Python reads NaN and Infinity; JSON has neither, and no provider takes them.
    raise ValueError(f"{constant} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_not_json)


def _depth_over(value: Any, most: int) -> bool:
    """Whether `value` nests arrays and objects more than `most` deep (without recursion)."""
    level: list[Any] = [value]
    for _ in range(most):
        inner: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                inner.extend(v for v in item.values() if isinstance(v, dict | list))
            elif isinstance(item, list):
                inner.extend(v for v in item if isinstance(v, dict | list))
        if not inner:
            return False
        level = inner
    return True
