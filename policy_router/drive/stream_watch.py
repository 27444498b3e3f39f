"""What a routed stream watches: its chunks against the endpoint's stream shape, the text
so far, and how its end, its close or its failure settles the plan.

A `Watch` belongs to one routed stream; sync and async streams share it, so the settle of a
stream is written once whichever loop reads it.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from ..core.gate import Send
from ..core.plan import Plan
from ..endpoints import StreamShape
from ..ground.money import Usage
from ..ground.outcome import FaultKind
from ..policies import continuity
from ..state.store import Steps
from .seam import failures, listeners, raised, stream_events

__all__ = [
    "IncompleteResponseWarning",
    "Opened",
    "StreamRestart",
    "UncheckedStreamWarning",
    "Watch",
    "warn_caller",
]


class IncompleteResponseWarning(UserWarning):
    """An answer ended, but incomplete (a Responses answer whose status is `incomplete`,
    streamed or not: `max_output_tokens` reached, or a content filter, its reason named):
    told once per answer. The answer is still returned; nothing is retried."""


class UncheckedStreamWarning(UserWarning):
    """A stream whose cut cannot be told from its clean end here was routed (a text
    completion's: LiteLLM's wrapper ends a cut one with `finish_reason="stop"`): told once
    per process, at the first such stream. Its text may be incomplete with nothing raised."""


_UNCHECKED_TOLD: set[str] = set()


def warn_caller(warning: Warning) -> None:
    """Warn at the caller's own line: the first frame outside this package."""
    # stacklevel 1 is this function; 2 its caller, the first frame looked at.
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    warnings.warn(warning, stacklevel=level)


_PACKAGE = str(Path(__file__).resolve().parent.parent)


# What a stream's opener hands back: the source, its iterator, the first chunk, and
# whether to strip the usage chunk the caller did not ask for.
Opened = tuple[Any, Any, Any, bool]



@dataclass(frozen=True, slots=True)
class StreamRestart:
    """Told to `on_restart` before a restarted answer's first chunk: discard what you had.

    `chunks_seen` is how many chunks of the failed route's answer the caller received.
    """

    failed_route: str
    """The route whose answer died after its first chunk."""
    next_route: str
    """The route the answer starts again on."""
    chunks_seen: int
    """How many chunks of the failed answer the caller received."""



class Watch:
    """What both stream flavours track: the text so far, the finish reason, the usage."""

    def __init__(
        self,
        source: Any,
        first: Any,
        plan: Plan,
        send: Send,
        strip_usage: bool,
        shape: StreamShape,
    ) -> None:
        self.shape = shape
        self.source = source
        self.pending: Any = first
        self.plan = plan
        self.send = send
        self.strip_usage = strip_usage
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False
        # The answer is whole before its source ends (`StreamShape.usage_ends`).
        self.whole = False
        self.chunks = 0
        self.warned = False
        self.answer_id = ""
        self.usage_object: Any = None
        if shape.unchecked_end and shape.unchecked_end not in _UNCHECKED_TOLD:
            _UNCHECKED_TOLD.add(shape.unchecked_end)
            warn_caller(UncheckedStreamWarning(f"policy_router: {shape.unchecked_end}"))
        self.passes(first)

    def passes(self, chunk: Any) -> bool:
        """Record what the chunk says; False for a usage chunk the caller did not ask for."""
        self.chunks += 1
        piece = self.shape.read(chunk)
        if piece.usage is not None:
            self.usage = piece.usage
            # The provider's own usage object, as LiteLLM's final chunk (or a Responses
            # stream's final event) carries it: what `stream.usage` shows.
            self.usage_object = getattr(chunk, "usage", None) or getattr(
                getattr(chunk, "response", None), "usage", None
            )
        if piece.text:
            self.parts.append(piece.text)
        if piece.finish:
            self.finish_reason = piece.finish
        if piece.answer_id:
            self.answer_id = piece.answer_id
        if (
            self.shape.usage_ends
            and piece.usage is not None
            and self.finish_reason is not None
            and not getattr(chunk, "choices", None)
        ):
            self.whole = True
        if piece.warning and not self.warned:
            self.warned = True  # once per answer, however many events repeat it
            warn_caller(
                IncompleteResponseWarning(f"policy_router: {self.send.route.name}: {piece.warning}")
            )
        return not (self.strip_usage and piece.usage is not None and not piece.carries)

    def ends_here(self) -> bool:
        """Whether the answer is whole at the chunk just passed, before its source ends: a
        chat stream's usage chunk (no choices, after the finish reason) is its last, so it
        is settled and its response closed there. LiteLLM (1.110.2), asked for its end after
        a usage chunk, assembles the whole answer a second time for its loggers and its
        cache (~3 ms of CPU a stream, measured); so a stream is read to LiteLLM's end while
        LiteLLM has a callback or a cache to tell."""
        return self.whole and not self.done and not listeners.litellm_listens()

    def take_pending(self) -> Any:
        chunk, self.pending = self.pending, None
        return chunk

    @property
    def reported(self) -> Usage | None:
        """The usage the provider itself reported, or None. LiteLLM's stream wrapper makes
        one up when the provider sent none (an estimate from its token counter, litellm
        1.110.2): it keeps the chunks it really received (`CustomStreamWrapper.chunks`), and
        when none of them carries a usage the one seen is that estimate, which measures
        nothing."""
        if self.usage is None:
            return None
        for wrapper in (self.source, getattr(self.source, "completion_stream", None)):
            received = getattr(wrapper, "chunks", None)
            if isinstance(received, list):
                return self.usage if any(_carries_usage(c) for c in received) else None
        return self.usage

    # ended, closed and failed are plan steps (they settle the call): the sync stream runs
    # them with `plan.run`, the async one with `drive.step`.
    def ended(self) -> Steps[BaseException | None]:
        """The source is exhausted: None for a clean end, else the cut-short error."""
        if self.done:
            return None
        if self.finish_reason is None:
            return raised.stream_cut_error(self.send.route, "".join(self.parts))
        self.done = True
        yield from self.plan.finished(self.send, self.reported)
        yield from continuity.remember(self.answer_id, self.send.route)
        self.plan.ended()
        return None

    def closed(self) -> Steps[None]:
        """The caller stopped reading: settle with whatever usage arrived."""
        if not self.done:
            self.done = True
            yield from self.plan.finished(self.send, self.reported, closed=True)
            self.plan.ended()

    def failed(self, exc: BaseException, restart: bool = False) -> Steps[BaseException | None]:
        """Record a failure after the first chunk. Returns the exception to raise, dressed
        with the journey, or None when the request restarts on the next route."""
        if self.done:
            return exc
        self.done = True
        exc = stream_events.typed(self.source, exc, self.send.route, "".join(self.parts))
        fault = failures.classify(exc)
        if fault is None:  # not the provider's doing: like a close, neither success nor failure
            yield from self.plan.finished(self.send, self.reported, closed=True)
            self.plan.ended(exc)
            return self.plan.scrub(exc)
        if fault.kind is not FaultKind.STREAM_CUT and fault.kind.falls_through:
            # A failure after the answer began is the stream's cut, whatever its status;
            # one the provider says is about the request (a Responses `response.failed`
            # with `invalid_prompt`) stays so, and stops the request.
            fault = type(fault)(FaultKind.STREAM_CUT, fault.status, fault.message)
        if (
            yield from self.plan.failed_after_answer(
                self.send, fault, self.reported, restart=restart, error=exc
            )
        ):
            return None
        journey = self.plan.journey
        exc.journey = journey  # type: ignore[attr-defined]
        exc.add_note(f"policy_router: {journey}")
        self.plan.ended(exc)
        return self.plan.scrub(exc)

    def restarted(
        self, opened: Opened, send: Send, on_restart: Callable[[StreamRestart], None] | None
    ) -> Watch:
        """The watch for the next route's answer, after telling the caller to start over."""
        notice = StreamRestart(self.send.route.name, send.route.name, self.chunks)
        if on_restart is not None:
            on_restart(notice)
        elif self.chunks:
            logger.warning(
                "policy_router: {} failed after {} chunks; the answer restarts from scratch on "
                "{} (pass on_restart= to be told)",
                notice.failed_route,
                notice.chunks_seen,
                notice.next_route,
            )
        source, _, first, strip = opened
        return Watch(source, first, self.plan, send, strip, self.shape)

    @property
    def hidden_params(self) -> dict[str, Any]:
        params = dict(getattr(self.source, "_hidden_params", None) or {})
        params["policy_router"] = self.plan.journey
        return params


def _carries_usage(chunk: Any) -> bool:
    """Whether a chunk LiteLLM received carries a usage (as LiteLLM itself tests it)."""
    try:
        return "usage" in chunk and chunk["usage"] is not None
    except (AttributeError, KeyError, TypeError, IndexError):
        return False
