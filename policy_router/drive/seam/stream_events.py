"""A Responses stream's failure events, kept for the error the router raises.

LiteLLM reads a `response.failed` or `error` event and raises its own exception for it
(a `MidStreamFallbackError`, or the mapped 4xx class) without the event: what the
provider said, beyond a message, is gone. `tap(source)` puts a reader in front of LiteLLM's
SSE iterator (its `stream_iterator`) that keeps the last such event; `typed(source, exc,
route)` then makes the exception a `ResponseFailedError` carrying it. A LiteLLM iterator
without that attribute is left alone: its failures are raised as LiteLLM raised them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ...ground.errors import ResponseFailedError
from ...ground.route import Route
from ...ground.secrets import scrubbed

__all__ = ["tap", "typed"]

_FAILED = ("response.failed", "error")
_KEPT = "_policy_router_failure_event"


def _seen(source: Any, sse: Any) -> None:
    data = getattr(sse, "data", None)
    # Cheap test first: most events are deltas, and only two kinds matter here.
    if not isinstance(data, str) or ("response.failed" not in data and '"error"' not in data):
        return
    try:
        event = json.loads(data)
    except ValueError:
        return
    if isinstance(event, dict) and event.get("type") in _FAILED:
        setattr(source, _KEPT, event)


def tap(source: Any) -> None:
    """Keep the last failure event `source` (LiteLLM's Responses stream iterator) reads."""
    inner = getattr(source, "stream_iterator", None)
    if inner is None:
        return

    def sync(it: Iterator[Any]) -> Iterator[Any]:
        for sse in it:
            _seen(source, sse)
            yield sse

    async def later(it: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for sse in it:
            _seen(source, sse)
            yield sse

    try:
        source.stream_iterator = later(inner) if hasattr(inner, "__anext__") else sync(inner)
    except AttributeError:  # a read-only attribute: left as LiteLLM made it
        return


def typed(source: Any, exc: BaseException, route: Route, text: str = "") -> BaseException:
    """`exc` as a `ResponseFailedError` when `source` carried a failure event (the event
    is taken, so it explains one exception), else `exc` itself."""
    event = getattr(source, _KEPT, None)
    if not isinstance(event, dict) or isinstance(exc, ResponseFailedError):
        return exc
    setattr(source, _KEPT, None)
    body = event.get("error") if event.get("type") == "error" else (
        (event.get("response") or {}).get("error") if isinstance(event.get("response"), dict) else None
    )
    found = body if isinstance(body, dict) else event
    code = found.get("code") if isinstance(found.get("code"), str) else None
    said = found.get("message") if isinstance(found.get("message"), str) else ""
    message = route.redact(
        f"{route.name}: the Responses stream said {event.get('type')}"
        + (f" ({code})" if code else "")
        + (f": {said}" if said else "")
    )
    error = ResponseFailedError(
        message,
        event=scrubbed(event, route.secrets, depth=None),
        code=code,
        model=route.model,
        llm_provider=route.provider,
        provider_error=exc,
        generated_content=text,
    )
    error.status_code = getattr(exc, "status_code", error.status_code)
    error.__cause__ = exc
    return error
