"""What the server sends back, in OpenAI's shapes: an answer as JSON or as server-sent
events, the journey beside it, and every error as `{"error": {...}}` with the status an
OpenAI client acts on.

The journey rides in the response headers (`x-policy-router-route`, `-attempts`, `-cost`,
`-journey`) and in the body's `policy_router` field (a stream's, once it ends, as an SSE
comment line, which clients skip). An error's body says why in words the router wrote:
each skip and failure, secrets already taken out.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from ..core.journey import Journey, Routed
from ..ground.errors import (
    AllRestingError,
    ConfigError,
    DeadlineExceededError,
    NoRouteError,
    OverBudgetError,
    RateLimitedError,
    RefusedError,
    StoreUnavailableError,
)
from ..ground.money import Money
from ..ground.records import Check

__all__ = ["amount", "as_base64", "error_body", "events", "header_text", "headers_of", "journey_of", "shaped"]


def journey_of(journey: Journey) -> dict[str, Any]:
    """The journey as the body's `policy_router` field."""
    cost = journey.cost
    return {
        "journey_id": journey.id,
        "route": journey.answered_by,
        "attempts": len(journey.attempts),
        "cost": None if cost is None else amount(cost),
        "currency": None if cost is None else cost.currency,
        "journey": str(journey),
    }


def headers_of(routed: Routed[Any], *, streamed: bool = False) -> dict[str, str]:
    """The journey in response headers; a stream's cost is not known when they are sent.
    A route's name beyond ASCII is percent-encoded (UTF-8), since a header holds Latin-1."""
    journey = routed.journey
    found = {
        "x-policy-router-route": header_text(routed.route.name),
        "x-policy-router-attempts": str(len(journey.attempts)),
        "x-policy-router-journey": journey.id,
    }
    cost = journey.cost
    if cost is not None and not streamed:
        found["x-policy-router-cost"] = f"{amount(cost)} {cost.currency}"
    return found


def header_text(text: str) -> str:
    """`text` as a header value: as it is when ASCII, else percent-encoded UTF-8."""
    return text if text.isascii() and text.isprintable() else quote(text, safe=_SAFE)


_SAFE = " !#$&'()*+,/:;=?@[]~-._"


def shaped(routed: Routed[Any]) -> bytes:
    """A whole answer as the JSON sent: OpenAI's, with the journey in `policy_router`.

    The response's own JSON (LiteLLM's `model_dump_json`) with the field written after its
    last one, rather than parsed and written out again: the same document, for ~0.1 ms
    less a request in a server's traffic (measured). An answer that has a `policy_router`
    field of its own takes the long way, so the journey replaces it rather than repeating
    the key."""
    raw = routed.response.model_dump_json()
    if raw.startswith("{") and raw.endswith("}") and '"policy_router"' not in raw:
        joint = "" if raw == "{}" else ","
        return f'{raw[:-1]}{joint}"policy_router":{_compact(journey_of(routed.journey))}}}'.encode()
    return _with_journey(json.loads(raw), routed)


def as_base64(routed: Routed[Any]) -> bytes:
    """An embeddings answer as `shaped` sends it, with each vector as OpenAI sends it for
    `encoding_format="base64"`: its float32 values, little-endian, in base64 (the SDKs
    ask for that by default and decode it; a vector already in base64 stays as it is)."""
    body = json.loads(routed.response.model_dump_json())
    for item in body.get("data") or ():
        vector = item.get("embedding") if isinstance(item, dict) else None
        if isinstance(vector, list):
            item["embedding"] = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return _with_journey(body, routed)


def _with_journey(body: dict[str, Any], routed: Routed[Any]) -> bytes:
    body["policy_router"] = journey_of(routed.journey)
    return _compact(body).encode()


def _compact(value: Any) -> str:
    """`value` as JSON the way Starlette's `JSONResponse` writes it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _completion_chunk(item: Any) -> str:
    """A legacy completion's chunk as OpenAI sends it: every choice has its `text`, the
    last one an empty one (LiteLLM leaves it out, and SDK code joins the texts)."""
    found = item.model_dump(exclude_none=True)
    for choice in found.get("choices") or ():
        choice.setdefault("text", "")
    return json.dumps(found)


async def events(
    routed: Routed[Any], endpoint: str, record: Callable[[Any], Awaitable[None]] | None = None
) -> AsyncIterator[bytes]:
    """A streamed answer as server-sent events: chat's `data:` chunks and `[DONE]`, or the
    Responses API's named events; an error mid-stream as an `error` event, after which the
    stream ends. The journey follows as a comment line. `record` is shown each item before
    the client is (the server records which key owns a response it streams)."""
    stream = routed.response
    try:
        async for item in stream:
            if record is not None:
                await record(item)
            data = _completion_chunk(item) if endpoint == "completion" else item.model_dump_json(exclude_none=endpoint == "chat")
            if endpoint == "responses":
                yield f"event: {getattr(item, 'type', 'message')}\ndata: {data}\n\n".encode()
            else:
                yield f"data: {data}\n\n".encode()
    except Exception as error:  # the router's words for it, scrubbed; the status is sent
        status, body, _ = error_body(error)
        body["error"]["status"] = status
        name = "event: error\n" if endpoint == "responses" else ""
        yield f"{name}data: {json.dumps(body)}\n\n".encode()
        return
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()  # a client that went away: the stream's money is settled
    if endpoint in ("chat", "completion"):
        yield b"data: [DONE]\n\n"
    yield f": policy_router {json.dumps(journey_of(stream.journey))}\n\n".encode()


def error_body(error: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, OpenAI-shaped body and headers for `error` (see the module docstring).

    Whenever a provider was sent the request (the journey has attempts), or the refusal
    would be the same on a retry, `x-should-retry: false` tells the SDKs not to retry on
    their own: the router already decided, and a retry would send every route the request
    again. Only refusals that sent nothing and may pass later (a rate window, resting
    routes, a budget held by calls in flight, the store down) invite a retry."""
    message = str(error)
    headers: dict[str, str] = {}
    kind, code, status, param = "api_error", None, 500, None
    journey = getattr(error, "journey", None)
    if isinstance(error, ConfigError):
        kind, status = "invalid_request_error", 400
    elif isinstance(error, OverBudgetError):
        kind, code, status, headers = _over_budget(error)
    elif isinstance(error, RateLimitedError):
        kind, code, status = "rate_limit_error", "rate_limit_exceeded", 429
        headers |= _retry_after(error.retry_after)
    elif isinstance(error, AllRestingError):
        kind, code, status = "api_error", "all_routes_resting", 503
        headers |= _retry_after(error.wakes_in)
    elif isinstance(error, DeadlineExceededError):
        kind, code, status = "timeout", "deadline_exceeded", 504
    elif isinstance(error, RefusedError):
        kind, code, status = "invalid_request_error", "content_policy_violation", 400
    elif isinstance(error, StoreUnavailableError):
        kind, code, status = "api_error", "store_unavailable", 503
        headers["retry-after"] = "1"
    elif isinstance(error, NoRouteError):
        kind, code, status, param = _no_route(error)
    else:
        status, kind, code = _provider(error)
        after = getattr(getattr(error, "response", None), "headers", {}) or {}
        if status == 429 and "retry-after" in after:
            headers["retry-after"] = str(after["retry-after"])
    if "retry-after" not in headers or (isinstance(journey, Journey) and journey.attempts):
        headers["x-should-retry"] = "false"
    body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    if isinstance(journey, Journey):  # in the error object: what an SDK hands its caller
        body["error"]["policy_router"] = journey_of(journey)
    return status, body, headers


def not_found(message: str, *, code: str | None = None, param: str | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    """OpenAI's 404 for an unknown path, model or stored object."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return 404, body, {"x-should-retry": "false"}


# The checks that say a request can never be served here, whatever happens meanwhile: what
# it needs, its size, the floor it asked for. Every other skip may pass later.
_FOREVER = frozenset({Check.REQUIREMENTS, Check.CONTEXT_WINDOW, Check.FLOOR})


def _no_route(error: NoRouteError) -> tuple[str, str, int, str | None]:
    """An unknown model is OpenAI's 404 `model_not_found`; a request no route could ever
    serve is the caller's 400; anything else (routes switched off, a pinned route that
    cannot serve now) is a 503."""
    journey = error.journey
    if not isinstance(journey, Journey):
        return "invalid_request_error", "model_not_found", 404, "model"
    if journey.skips and all(s.check in _FOREVER for s in journey.skips) and not journey.attempts:
        return "invalid_request_error", "no_route", 400, None
    return "api_error", "no_route", 503, None


def _over_budget(error: OverBudgetError) -> tuple[str, str, int, dict[str, str]]:
    """Which budget refusal this is: the store that keeps the budget is down (503
    `store_unavailable`); the budget is held only by calls in flight, so a retry may fit
    once they settle (429 with Retry-After); or it is spent (429 `insufficient_quota`, not
    to be retried, with Retry-After until the period resets when that is what frees it)."""
    skips = [s for s in getattr(error.journey, "skips", ()) if s.check is Check.BUDGET]
    if skips and all(s.detail.get("store_unreachable") for s in skips):
        return "api_error", "store_unavailable", 503, {"retry-after": "1"}
    if skips and all(s.detail.get("may_fit") for s in skips):
        return "rate_limit_error", "budget_in_flight", 429, {"retry-after": "1"}
    headers = {"x-should-retry": "false"}
    resets = getattr(error, "resets_at", None)
    tightest = min(skips, key=lambda s: s.detail.get("left", 0), default=None)
    fits_anew = tightest is not None and tightest.detail.get("worst_case", 0) <= tightest.detail.get("cap", -1)
    if resets is not None and fits_anew:
        # The period, not the call, is why: the call fits a fresh period's cap.
        headers |= _retry_after((resets - datetime.now(UTC)).total_seconds())
    return "insufficient_quota", "insufficient_quota", 429, headers


def _provider(error: BaseException) -> tuple[int, str, str | None]:
    """A provider's own error (a LiteLLM exception, read by its status): the request's
    fault stays the client's (400); a key or model the provider refused is the server's
    (502); a provider's 429 stays 429; its timeout is a gateway timeout."""
    status = getattr(error, "status_code", None)
    if isinstance(error, TimeoutError) or status == 408:
        return 504, "timeout", "provider_timeout"
    if status in (400, 413, 422):
        return 400, "invalid_request_error", "provider_rejected_request"
    if status == 429:
        return 429, "rate_limit_error", "rate_limit_exceeded"
    if isinstance(status, int) and status >= 400:
        return 502, "api_error", "provider_error"
    return 500, "api_error", None


def amount(money: Money) -> str:
    """An amount as exact decimal text (`0.001500`), never a float."""
    return str(Decimal(money.micros).scaleb(-6))


def _retry_after(seconds: float) -> dict[str, str]:
    if not math.isfinite(seconds) or seconds < 0:
        return {}
    return {"retry-after": str(max(1, math.ceil(seconds)))}
