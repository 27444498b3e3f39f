"""The steps a FakeProvider script is made of: one per request, in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Cut", "Drop", "Fail", "Hang", "Malformed", "NoDone", "NoFinish", "Refuse", "Reply", "Stall",
    "Step", "StreamError", "Trickle",
]


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer normally: text, or tool calls, with the usage given (else counted honestly:
    see `FakeProvider`). `usage` is (prompt, completion) tokens for the whole answer.

    `report_usage` says how the answer reports what it billed: `"yes"` (a `usage` object,
    and a stream's usage chunk when asked for), `"missing"` (no `usage` key at all) or
    `"null"` (`"usage": null`), as some providers and proxies answer. The fake bills the
    request all the same (`FakeProvider.bills`). `choices` is how many choices a whole chat
    answer carries (None: the request's `n`); 0 answers 200 with `choices: []`."""

    text: str = "Hello from FakeProvider."
    tool_calls: Sequence[dict[str, Any]] = ()
    """Tool calls to answer with, each `{"name": ..., "arguments": {...}}` (a dict or JSON)."""
    usage: tuple[int, int] | None = None
    finish_reason: str | None = None
    """The finish reason sent (None: "tool_calls" with tool calls, else "stop")."""
    report_usage: Literal["yes", "missing", "null"] = "yes"
    choices: int | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """Answer with HTTP `status`, an OpenAI-shaped error body, and Retry-After if given."""

    status: int
    message: str = ""
    """The error body's `message` (empty: a message of the status's own)."""
    retry_after: float | None = None
    """Seconds sent as the `Retry-After` header (None: no header)."""
    code: str | None = None
    """The error body's `code` (`"context_length_exceeded"`, ...)."""


@dataclass(frozen=True, slots=True)
class Hang:
    """Say nothing for `seconds` (the connection stays open), then answer like `then`."""

    seconds: float
    then: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class Trickle:
    """Answer `reply` in `pieces` parts `gap` seconds apart: bytes of the body, or stream
    chunks."""

    reply: Reply = field(default_factory=Reply)
    pieces: int = 10
    gap: float = 0.4


@dataclass(frozen=True, slots=True)
class Drop:
    """Close the connection without sending a byte back."""


@dataclass(frozen=True, slots=True)
class Cut:
    """Stream `after` chunks of `reply`, then close the connection with no finish reason
    and no [DONE].

    A request that did not ask for a stream gets half of its body, then the close.
    """

    after: int = 2
    reply: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class NoFinish:
    """Stream every chunk of `reply` and `[DONE]`, but never a finish reason: a reply cut
    short."""

    reply: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class Refuse:
    """Refuse the work as OpenAI does: 400 with code `content_policy_violation` and `message`."""

    message: str = (
        "Your request was rejected as a result of our safety system. "
        "Your prompt may contain text that is not allowed by our safety system."
    )


@dataclass(frozen=True, slots=True)
class StreamError:
    """Stream `after` events, then say the answer failed, in the stream, and close.

    On `/responses` the failure is a `response.failed` event (a response whose `status` is
    "failed" with `error: {code, message}`), or with `event="error"` an `error` event
    (`code`, `message`, `param`), as OpenAI sends them. On `/chat/completions` it is a
    `data: {"error": {...}}` line. The request was answered with 200: the failure is only
    in the stream. `reply` gives the text streamed before it.
    """

    after: int = 3
    event: str = "response.failed"
    code: str = "server_error"
    message: str = "The model produced an error while generating a response."
    reply: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class Stall:
    """Stream `after` chunks, then say nothing for `seconds` (the connection stays open),
    then go on to the end of `reply`: a stream that stalls mid-answer. A request that did not ask for
    a stream gets its headers and half its body, then the pause, then the rest."""

    after: int = 2
    seconds: float = 5.0
    reply: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class Malformed:
    """Stream `after` chunks, then one event whose data is `data` (not JSON), then the rest of
    `reply`: a
    provider (or a proxy) that mangled an event."""

    after: int = 2
    data: str = "{this is not json"
    reply: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class NoDone:
    """Stream every chunk of `reply`, the finish reason included, but never the closing
    `[DONE]` line: the connection just closes. A complete answer all the same."""

    reply: Reply = field(default_factory=Reply)


Step = (
    Reply | Fail | Hang | Trickle | Drop | Cut | NoFinish | Refuse | StreamError | Stall
    | Malformed | NoDone
)
