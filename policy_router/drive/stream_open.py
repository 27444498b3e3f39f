"""Opening a routed stream, sync and async: one route's stream asked for, its first chunk
read, or its failure raised with the connection given back; and giving a stream back.

A stream the router is done with (it failed before its first chunk and the next route is
asked, or failed later and is raised or restarted) is closed then (`release`), so its HTTP
response is released now, on this thread or loop. Left to the garbage collector, an unread
response is closed wherever collection runs, which may be inside the HTTP client's own
connection-pool lock, taken again from the same thread: a deadlock (seen here with httpcore
1.0, a Responses stream failed at its first event, the process hung on the next call).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.gate import Send
from ..endpoints import StreamShape
from . import dropped
from .seam import raised, stream_events
from .stream_watch import Opened

__all__ = ["aopened", "arelease", "opened", "release", "stream_kwargs"]


def stream_kwargs(
    kwargs: dict[str, Any], send: Send, shape: StreamShape, observed: bool = False
) -> tuple[dict[str, Any], bool]:
    """Ask for the final usage chunk when the call is priced, counts tokens against a
    `tpm`, or is observed (an observer records usage), and the endpoint streams usage only
    when asked; the returned flag says to strip that chunk, which the caller did not ask for."""
    options = kwargs.get("stream_options") or {}
    counted = send.slot_tokens is not None and send.route.tpm is not None
    if (
        not shape.ask_usage
        or options.get("include_usage")
        or (send.candidate.price is None and send.held is None and not counted and not observed)
    ):
        return kwargs, False
    return {**kwargs, "stream_options": {**options, "include_usage": True}}, True


def opened(source: Any, shape: StreamShape, send: Send, strip: bool) -> Opened:
    """`source` (LiteLLM's stream) with its first chunk read; on a failure before it the
    stream is closed and the failure raised, typed as the endpoint says."""
    _tap(source, shape)
    iterator = iter(source)
    try:
        first = next(iterator, None)
    except Exception as exc:
        error = stream_events.typed(source, exc, send.route)
        release(source)
        raise error from exc
    try:
        return source, iterator, _real(first, shape, send), strip
    except Exception:
        release(source)
        raise


async def aopened(source: Any, shape: StreamShape, send: Send, strip: bool) -> Opened:
    """The async twin of `opened`."""
    _tap(source, shape)
    iterator = source.__aiter__()
    try:
        first = await anext(iterator, None)
    except Exception as exc:
        error = stream_events.typed(source, exc, send.route)
        await arelease(source)
        raise error from exc
    try:
        return source, iterator, _real(first, shape, send), strip
    except Exception:
        await arelease(source)
        raise


def _tap(source: Any, shape: StreamShape) -> None:
    """Let the endpoint's failure events through to the first chunk's reader."""
    if shape.failure_events:
        stream_events.tap(source)


def _real(first: Any, shape: StreamShape, send: Send) -> Any:
    """The first chunk, unless the stream ended before one or LiteLLM made it up."""
    if first is None or shape.hollow(first):
        raise raised.stream_cut_error(send.route, "")
    return first


def release(source: Any) -> None:
    """Close a stream the router is done with, now (see the module docstring)."""
    close: Callable[[], Any] | None = getattr(source, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):  # a stream already broken may refuse: it is gone
            close()
    dropped.let_go(source)


async def arelease(source: Any) -> None:
    """The async twin of `release`."""
    close: Callable[[], Awaitable[Any]] | None = getattr(source, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
