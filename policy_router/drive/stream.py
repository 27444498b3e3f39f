"""Routed streams, sync and async: LiteLLM's chunks, watched for a clean end.

The router hands one of these over only after the route's first chunk arrived, so any
failure before it fell through to the next route. From then on the route cannot be
replaced: a failure is raised inside the stream, with the journey attached, and the text
received so far stays readable as `stream.text`. A stream that ends without a finish
reason was cut short and raises too, rather than passing for a complete answer.
A chat stream may end before its source says so (`Watch.ends_here`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ..core.gate import Send
from ..core.journey import Journey, Routed
from ..core.plan import Plan
from ..endpoints import Endpoint, StreamShape
from . import dropped, stream_open
from .loops import adrive, drive, later, step
from .seam import raised, transport
from .stream_watch import Opened, StreamRestart, Watch
from .workers import WORKERS as _WORKERS

__all__ = ["AsyncRoutedStream", "RoutedStream", "StreamRestart", "astream", "stream"]

_END = object()  # what a worker's `next` gives back at the end of the stream


class _Routed:
    """What both stream flavours show: the journey, the route, the text so far."""

    _watch: Watch

    def __init__(
        self,
        opened: Opened,
        plan: Plan,
        send: Send,
        *,
        shape: StreamShape,
        reopen: Callable[[], Any] | None = None,
        on_restart: Callable[[StreamRestart], None] | None = None,
    ) -> None:
        """`reopen` opens the next route's answer (sync for RoutedStream, a coroutine for
        AsyncRoutedStream); given only with `stream_failure="restart"`."""
        source, iterator, first, strip = opened
        dropped.ready()
        self._watch = Watch(source, first, plan, send, strip, shape)
        self._it = iterator
        self._reopen = reopen
        self._on_restart = on_restart
        self._restarts = 0

    @property
    def restarts(self) -> int:
        """How many times the answer started again from scratch on the next route
        (`stream_failure="restart"`); 0 when it never did."""
        return self._restarts

    @property
    def journey(self) -> Journey:
        return self._watch.plan.journey

    @property
    def route(self) -> str:
        """The route whose answer is being streamed now."""
        return self._watch.send.route.name

    @property
    def text(self) -> str:
        """The content received so far (of the current answer, after a restart)."""
        return "".join(self._watch.parts)

    @property
    def usage(self) -> Any:
        """The usage the provider reported for the answer streamed (LiteLLM's `Usage`, or
        a Responses answer's usage), once the chunk carrying it was read: with
        `stream_options={"include_usage": True}`, after the stream's end. None until
        then, and when the provider reported none (LiteLLM's own estimate is no usage)."""
        watch = self._watch
        return watch.usage_object if watch.reported is not None else None

    @property
    def _hidden_params(self) -> dict[str, Any]:
        return self._watch.hidden_params

    def __del__(self) -> None:
        # A stream dropped unread gives back all it held, as close() does: its money is
        # settled, and the provider's connection goes back to LiteLLM's pool (which holds
        # 100: a hundred dropped streams would otherwise stall the next call for good).
        watch = getattr(self, "_watch", None)
        if watch is None:
            return
        try:
            if not watch.done:
                watch.plan.run(watch.closed(), bounded=False)
        finally:
            # Even a stream whose answer ended: the provider's last bytes ([DONE]) may be
            # unread, its response open, and one collected later from inside the HTTP
            # client's own lock hangs that thread (see `dropped`).
            self._dropped()

    def _dropped(self) -> None:
        """Release the connection of a stream collected unread (see `dropped`)."""
        raise NotImplementedError

    def _release_connection(self) -> None:
        raise NotImplementedError


class RoutedStream(_Routed, Iterator[Any]):
    """A sync stream of LiteLLM `ModelResponseStream` chunks from the route that answered.

    Iterate it as you would LiteLLM's `CustomStreamWrapper`. `journey` and
    `_hidden_params["policy_router"]` give the request's journey; `text` is the content
    received so far. By default a failure after the first chunk is raised here; with
    `Router(stream_failure="restart")` the answer starts again from scratch on the next
    route, after `on_restart` is told. Two models' text is never spliced silently.
    """

    _it: Iterator[Any]
    _reopen: Callable[[], tuple[Opened, Send]] | None
    _reading = False  # a worker still reads the stream (a stall): it gives it back

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        dropped.keep(self._it)  # until the router closes it (see `dropped`)

    def __iter__(self) -> RoutedStream:
        return self

    def __next__(self) -> Any:
        while True:
            w = self._watch
            if w.pending is not None:
                return w.take_pending()
            if w.done:
                if not self._reading:  # the answer is whole: its response is closed now
                    stream_open.release(self._it)
                raise StopIteration
            stall = w.send.route.stall_timeout
            try:
                chunk = next(self._it) if stall is None else self._next_within(stall)
            except StopIteration:
                error = w.plan.run(w.ended(), bounded=False)
                if error is None:
                    raise
                self._fail(error)
                continue
            except Exception as exc:
                self._fail(exc)
                continue
            shown = w.passes(chunk)
            if w.ends_here():  # settled and closed now; a usage chunk asked for is shown
                w.plan.run(w.ended(), bounded=False)
                stream_open.release(self._it)
                if not shown:
                    raise StopIteration
            if shown:
                return chunk

    def _next_within(self, seconds: float) -> Any:
        """The next chunk, pulled on a worker the reader stops waiting for after `seconds`:
        a stall ends the answer as a cut. The worker is let go, not interrupted (closing a
        response another thread reads from can hang both): its read ends when the provider
        goes on or at the attempt's socket timeout, which a stall limit keeps short."""
        future = _WORKERS.submit(next, self._it, _END)
        try:
            chunk = future.result(timeout=seconds)
        except FutureTimeout:
            # The stream is given back when the worker's read ends (`_fail` leaves it).
            self._reading = True
            source = self._it
            future.add_done_callback(lambda _read: stream_open.release(source))
            w = self._watch
            raise raised.stall_error(w.send.route, seconds, w.chunks, self.text) from None
        if chunk is _END:
            raise StopIteration
        return chunk

    def _fail(self, exc: BaseException) -> None:
        watch = self._watch
        error = watch.plan.run(watch.failed(exc, restart=self._reopen is not None), bounded=False)
        if not self._reading:  # raised or restarted, the failed stream is given back now
            stream_open.release(self._it)
        self._reading = False
        _raise(error, exc)
        assert self._reopen is not None
        opened, send = self._reopen()
        self._watch = self._watch.restarted(opened, send, self._on_restart)
        self._it = opened[1]
        dropped.keep(self._it)
        self._restarts += 1

    def close(self) -> None:
        """Stop reading: the connection is released and the call's cost settled."""
        self._watch.plan.run(self._watch.closed(), bounded=False)
        self._release_connection()

    def _release_connection(self) -> None:
        close = getattr(self._it, "close", None)
        try:
            if close is not None:
                close()
        finally:
            dropped.let_go(self._it)

    def _dropped(self) -> None:
        # Collected, maybe inside the HTTP client's own lock on this thread: closed on
        # another thread (`dropped`), never here.
        dropped.hand(self._it)

    def __enter__(self) -> RoutedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRoutedStream(_Routed, AsyncIterator[Any]):
    """The async twin of `RoutedStream`: `async for chunk in stream`."""

    _it: AsyncIterator[Any]
    _reopen: Callable[[], Awaitable[tuple[Opened, Send]]] | None
    _loop: asyncio.AbstractEventLoop | None = None
    _closing = False  # a stall's close of the stream is under way

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop = asyncio.get_running_loop()

    def __aiter__(self) -> AsyncRoutedStream:
        return self

    async def __anext__(self) -> Any:
        while True:
            w = self._watch
            if w.pending is not None:
                return w.take_pending()
            if w.done:
                raise StopAsyncIteration
            stall = w.send.route.stall_timeout
            try:
                if stall is None:
                    chunk = await self._it.__anext__()
                else:
                    try:
                        async with asyncio.timeout(stall):
                            chunk = await self._it.__anext__()
                    except TimeoutError:
                        # A stall ends the answer as a cut; its connection is closed.
                        if (close := getattr(self._it, "aclose", None)) is not None:
                            _close_later(close)
                        self._closing = True
                        raise raised.stall_error(
                            w.send.route, stall, w.chunks, self.text
                        ) from None
            except asyncio.CancelledError:
                # Cancelled mid-stream (`asyncio.timeout`, a cancelled task): what the
                # stream holds is settled now, as for a close, not when it is collected.
                later(w.plan, w.closed())
                close = getattr(self._it, "aclose", None)
                if close is not None:
                    _close_later(close)
                raise
            except StopAsyncIteration:
                error = await step(w.plan, w.ended(), bounded=False)
                if error is None:
                    raise
                await self._fail(error)
                continue
            except Exception as exc:
                await self._fail(exc)
                continue
            shown = w.passes(chunk)
            if w.ends_here():
                await step(w.plan, w.ended(), bounded=False)
                await stream_open.arelease(self._it)
                if not shown:
                    raise StopAsyncIteration
            if shown:
                return chunk

    async def _fail(self, exc: BaseException) -> None:
        watch = self._watch
        error = await step(
            watch.plan, watch.failed(exc, restart=self._reopen is not None), bounded=False
        )
        if not self._closing:  # raised or restarted, the failed stream is given back now
            await stream_open.arelease(self._it)
        self._closing = False
        _raise(error, exc)
        assert self._reopen is not None
        opened, send = await self._reopen()
        self._watch = self._watch.restarted(opened, send, self._on_restart)
        self._it = opened[1]
        self._restarts += 1

    async def aclose(self) -> None:
        """Stop reading: the connection is released and the call's cost settled."""
        await step(self._watch.plan, self._watch.closed(), bounded=False)
        close = getattr(self._it, "aclose", None)
        if close is not None:
            await close()

    def _dropped(self) -> None:
        self._release_connection()

    def _release_connection(self) -> None:
        # Dropped without aclose(): the connection can only be released on its own event
        # loop, so the close is handed to it (a loop that is gone took its sockets along).
        close = getattr(self._it, "aclose", None)
        loop = self._loop
        if close is None or loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(_close_later, close)

    async def __aenter__(self) -> AsyncRoutedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _raise(error: BaseException | None, exc: BaseException) -> None:
    """Raise what the plan made of a failure `exc` mid-stream; return (None) to restart.
    The provider's own exception keeps its traceback; one the plan made in its place
    stands alone."""
    if error is exc:
        raise error
    if error is not None:
        raise error from None


# Closes scheduled for dropped async streams; held so they are not collected mid-way.
_CLOSING: set[asyncio.Task[Any]] = set()


def _close_later(close: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    task = asyncio.ensure_future(close())
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


def stream(
    plan: Plan,
    endpoint: Endpoint,
    kwargs: dict[str, Any],
    *,
    restart: bool,
    on_restart: Callable[[StreamRestart], None] | None,
) -> Routed[RoutedStream]:
    """Route a streamed call: fall through until a route's first chunk, then hand over."""
    shape = endpoint.stream
    assert shape is not None

    def open_stream(send: Send) -> Opened:
        call_kwargs, strip = stream_open.stream_kwargs(kwargs, send, shape, plan.observed)
        source = transport.send(endpoint.function, call_kwargs, plan, send)
        return stream_open.opened(source, shape, send, strip)

    opened, send = drive(plan, open_stream, final=False)
    reopen = (lambda: drive(plan, open_stream, final=False)) if restart else None
    # No local holds the stream: a failed attempt's traceback keeps this frame.
    return Routed(
        RoutedStream(opened, plan, send, shape=shape, reopen=reopen, on_restart=on_restart),
        send.route,
        plan.journey,
    )


async def astream(
    plan: Plan,
    endpoint: Endpoint,
    kwargs: dict[str, Any],
    *,
    restart: bool,
    on_restart: Callable[[StreamRestart], None] | None,
) -> Routed[AsyncRoutedStream]:
    """The async twin of `stream`."""
    shape = endpoint.stream
    assert shape is not None

    async def open_stream(send: Send) -> Opened:
        call_kwargs, strip = stream_open.stream_kwargs(kwargs, send, shape, plan.observed)
        source = await transport.asend(endpoint.afunction, call_kwargs, plan, send)
        return await stream_open.aopened(source, shape, send, strip)

    opened, send = await adrive(plan, open_stream, final=False)
    reopen = (lambda: adrive(plan, open_stream, final=False)) if restart else None
    return Routed(
        AsyncRoutedStream(opened, plan, send, shape=shape, reopen=reopen, on_restart=on_restart),
        send.route,
        plan.journey,
    )
