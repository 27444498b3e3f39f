"""What the server sends back, in OpenAI's shapes: an answer as JSON or as server-sent
events, the journey beside it, and every error as `{"error": {...}}` with the status an
OpenAI client acts on.

The journey rides in the response headers (`x-policy-router-route`, `-attempts`, `-cost`,
`-journey`) and in the body's `policy_router` field (a stream's, once it ends, as an SSE
comment line, which clients skip). An error's body says why in words the router wrote:
each skip and failure, secrets already taken out.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

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

__all__ = ["amount", "error_body", "events", "headers_of", "journey_of", "shaped"]


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
    """The journey in response headers; a stream's cost is not known when they are sent."""
    journey = routed.journey
    found = {
        "x-policy-router-route": routed.route.name,
        "x-policy-router-attempts": str(len(journey.attempts)),
        "x-policy-router-journey": journey.id,
    }
    cost = journey.cost
    if cost is not None and not streamed:
        found["x-policy-router-cost"] = f"{amount(cost)} {cost.currency}"
    return found


def shaped(routed: Routed[Any]) -> dict[str, Any]:
    """A whole answer as OpenAI's JSON, with the journey in `policy_router`."""
    body: dict[str, Any] = json.loads(routed.response.model_dump_json())
    body["policy_router"] = journey_of(routed.journey)
    return body


async def events(routed: Routed[Any], endpoint: str) -> AsyncIterator[bytes]:
    """A streamed answer as server-sent events: chat's `data:` chunks and `[DONE]`, or the
    Responses API's named events; an error mid-stream as an `error` event, after which the
    stream ends. The journey follows as a comment line."""
    stream = routed.response
    try:
        async for item in stream:
            data = item.model_dump_json(exclude_none=endpoint == "chat")
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
    if endpoint == "chat":
        yield b"data: [DONE]\n\n"
    yield f": policy_router {json.dumps(journey_of(stream.journey))}\n\n".encode()


def error_body(error: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, OpenAI-shaped body and headers for `error` (see the module docstring)."""
    message = str(error)
    headers: dict[str, str] = {}
    kind, code, status = "api_error", None, 500
    if isinstance(error, ConfigError):
        kind, status = "invalid_request_error", 400
    elif isinstance(error, OverBudgetError):
        # OpenAI's own "over your quota": a retry would be refused alike, so the SDK's
        # automatic retries are told not to.
        kind, code, status = "insufficient_quota", "insufficient_quota", 429
        headers["x-should-retry"] = "false"
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
    elif isinstance(error, NoRouteError):
        kind, code, status = "invalid_request_error", "no_route", 503
        headers["x-should-retry"] = "false"
    else:
        status, kind, code = _provider(error)
        after = getattr(getattr(error, "response", None), "headers", {}) or {}
        if status == 429 and "retry-after" in after:
            headers["retry-after"] = str(after["retry-after"])
    body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    journey = getattr(error, "journey", None)
    if isinstance(journey, Journey):  # in the error object: what an SDK hands its caller
        body["error"]["policy_router"] = journey_of(journey)
    return status, body, headers


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
