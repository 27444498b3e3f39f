"""Routed streams, sync and async: LiteLLM's chunks, watched for a clean end.

The router hands one of these over only after the route's first chunk arrived, so any
failure before it fell through to the next route. From then on the route cannot be
replaced: a failure is raised inside the stream, with the journey attached, and the text
received so far stays readable as `stream.text`. A stream that ends without a finish
reason was cut short and raises too, rather than passing for a complete answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from . import transport
from .journey import Journey
from .plan import FaultKind, Plan, Send
from .prices import Usage

__all__ = ["AsyncRoutedStream", "RoutedStream"]


class _Watch:
    """What both stream flavours track: the text so far, the finish reason, the usage."""

    def __init__(self, source: Any, first: Any, plan: Plan, send: Send, strip_usage: bool) -> None:
        self.source = source
        self.pending: Any = first
        self.plan = plan
        self.send = send
        self.strip_usage = strip_usage
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False
        self.passes(first)

    def passes(self, chunk: Any) -> bool:
        """Record what the chunk says; False for a usage chunk the caller did not ask for."""
        usage = transport.usage_of(chunk)
        if usage is not None:
            self.usage = usage
        carries = False
        for choice in getattr(chunk, "choices", None) or ():
            delta = getattr(choice, "delta", None)
            content = getattr(delta, "content", None)
            if content:
                self.parts.append(content)
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason
            carries = carries or bool(
                content
                or getattr(choice, "finish_reason", None)
                or getattr(delta, "tool_calls", None)
                or getattr(delta, "role", None)
            )
        return not (self.strip_usage and usage is not None and not carries)

    def take_pending(self) -> Any:
        chunk, self.pending = self.pending, None
        return chunk

    def ended(self) -> BaseException | None:
        """The source is exhausted: None for a clean end, else the error to raise."""
        if self.done:
            return None
        if self.finish_reason is None:
            return self.failed(transport.stream_cut_error(self.send.route, "".join(self.parts)))
        self.done = True
        self.plan.finished(self.send, self.usage)
        return None

    def closed(self) -> None:
        """The caller stopped reading: settle with whatever usage arrived."""
        if not self.done:
            self.done = True
            self.plan.finished(self.send, self.usage)

    def failed(self, exc: BaseException) -> BaseException:
        """Record a failure after the first chunk and dress the exception with the journey."""
        if self.done:
            return exc
        self.done = True
        fault = transport.classify(exc)
        if fault is None:
            self.plan.finished(self.send, self.usage)
            return exc
        if fault.kind is not FaultKind.STREAM_CUT:
            fault = type(fault)(FaultKind.STREAM_CUT, fault.status, fault.message)
        self.plan.failed_after_answer(self.send, fault, self.usage)
        journey = self.plan.journey
        exc.journey = journey  # type: ignore[attr-defined]
        exc.add_note(f"policy_router: {journey}")
        return exc

    @property
    def hidden_params(self) -> dict[str, Any]:
        params = dict(getattr(self.source, "_hidden_params", None) or {})
        params["policy_router"] = self.plan.journey
        return params


class RoutedStream(Iterator[Any]):
    """A sync stream of LiteLLM `ModelResponseStream` chunks from the route that answered.

    Iterate it as you would LiteLLM's `CustomStreamWrapper`. `journey` and
    `_hidden_params["policy_router"]` give the request's journey; `text` is the content
    received so far. It does not restart on another route after a failure.
    """

    def __init__(
        self,
        source: Any,
        iterator: Iterator[Any],
        first: Any,
        plan: Plan,
        send: Send,
        *,
        strip_usage: bool = False,
    ) -> None:
        self._watch = _Watch(source, first, plan, send, strip_usage)
        self._it = iterator

    def __iter__(self) -> RoutedStream:
        return self

    def __next__(self) -> Any:
        w = self._watch
        if w.pending is not None:
            return w.take_pending()
        while not w.done:
            try:
                chunk = next(self._it)
            except StopIteration:
                error = w.ended()
                if error is not None:
                    raise error from None
                raise
            except Exception as exc:
                raise w.failed(exc)  # noqa: B904 - the same exception, dressed with the journey
            if w.passes(chunk):
                return chunk
        raise StopIteration

    def close(self) -> None:
        """Stop reading: the connection is released and the call's cost settled."""
        self._watch.closed()
        close = getattr(self._it, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> RoutedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def journey(self) -> Journey:
        return self._watch.plan.journey

    def __del__(self) -> None:
        # A stream dropped unread still settles its reservation: nothing stays held.
        watch = getattr(self, "_watch", None)
        if watch is not None:
            watch.closed()

    @property
    def text(self) -> str:
        """The content received so far."""
        return "".join(self._watch.parts)

    @property
    def _hidden_params(self) -> dict[str, Any]:
        return self._watch.hidden_params


class AsyncRoutedStream(AsyncIterator[Any]):
    """The async twin of `RoutedStream`: `async for chunk in stream`."""

    def __init__(
        self,
        source: Any,
        iterator: AsyncIterator[Any],
        first: Any,
        plan: Plan,
        send: Send,
        *,
        strip_usage: bool = False,
    ) -> None:
        self._watch = _Watch(source, first, plan, send, strip_usage)
        self._it = iterator

    def __aiter__(self) -> AsyncRoutedStream:
        return self

    async def __anext__(self) -> Any:
        w = self._watch
        if w.pending is not None:
            return w.take_pending()
        while not w.done:
            try:
                chunk = await self._it.__anext__()
            except StopAsyncIteration:
                error = w.ended()
                if error is not None:
                    raise error from None
                raise
            except Exception as exc:
                raise w.failed(exc)  # noqa: B904 - the same exception, dressed with the journey
            if w.passes(chunk):
                return chunk
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop reading: the connection is released and the call's cost settled."""
        self._watch.closed()
        close = getattr(self._it, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> AsyncRoutedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def journey(self) -> Journey:
        return self._watch.plan.journey

    def __del__(self) -> None:
        # A stream dropped unread still settles its reservation: nothing stays held.
        watch = getattr(self, "_watch", None)
        if watch is not None:
            watch.closed()

    @property
    def text(self) -> str:
        """The content received so far."""
        return "".join(self._watch.parts)

    @property
    def _hidden_params(self) -> dict[str, Any]:
        return self._watch.hidden_params
