"""A request's life as records for observers: it started, an attempt started, it ended.

The journey's own records (`Skip`, `Attempt`, `Waited`) say what happened to each route;
these three frame them, so an observer can open a span when a request starts, a child span
when an attempt is sent, and close both with what happened. Every record carries the
request's `journey_id`, the id also on `exc.journey.id`, in log lines, attempt log rows and
LiteLLM's callback metadata.

`RequestStarted` is emitted in the caller's thread (or task), before any route is asked, so
an observer may read the caller's current tracing context there. Attempts of one request
are sequential: an `AttemptStarted` is followed by that attempt's `Attempt` (or, when the
request never left this process, a `Skip` of check `send`) before the next one starts.
`RequestEnded` comes once, when the caller has the answer or the error: for a stream, when
the stream ends, is closed, or fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ground.route import Route
    from ..policies.requirements import Requirements
    from .journey import Journey

__all__ = ["AttemptStarted", "RequestEnded", "RequestStarted", "request_attributes"]

# The call's arguments an observer may describe a request by (OpenTelemetry's GenAI
# request attributes): never its content.
_DESCRIBED = (
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "seed",
    "n",
    "frequency_penalty",
    "presence_penalty",
    "stream",
)


def request_attributes(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a call worth describing it by (caps, sampling, `n`, `stream`),
    without its messages, input or tools."""
    return {k: kwargs[k] for k in _DESCRIBED if kwargs.get(k) is not None}


@dataclass(kw_only=True, frozen=True, slots=True)
class RequestStarted:
    """A request reached the router and is about to be routed.

    `operation` is the endpoint ("chat", "embedding", "responses", "completion"), `group`
    the group it goes to, `settings` the call's caps and sampling settings (see
    `request_attributes`), never its content.
    """

    journey_id: str
    group: str
    operation: str
    needs: Requirements
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True, slots=True)
class AttemptStarted:
    """The request is being sent to `route`: the `attempt`-th send of the request (1-based),
    the `number`-th to this route (a retry is 2), `probe` when it is the one half-open probe
    of a resting route."""

    journey_id: str
    group: str
    route: Route
    attempt: int
    number: int = 1
    probe: bool = False


@dataclass(frozen=True, slots=True)
class RequestEnded:
    """The request is over: answered, or ended by `error_type` (the class name of the
    exception the caller got). `journey` is complete: every skip, attempt and wait, the
    route that answered, the costs."""

    journey: Journey
    error_type: str | None = None

    @property
    def journey_id(self) -> str:
        return self.journey.id

    @property
    def ok(self) -> bool:
        return self.error_type is None
