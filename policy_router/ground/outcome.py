"""What an outcome means: a failed attempt's fault, and what it is about.

The router moves on after faults about the provider or the route's configuration, and
stops after faults about the request or the work (DESIGN §2). `transport` classifies
LiteLLM's exceptions into these; everything else only reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Fault", "FaultKind", "Wire"]


class FaultKind(StrEnum):
    """What a failed attempt was about; decides whether the router moves on or stops."""

    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    STREAM_CUT = "stream_cut"
    ACCESS = "access"
    BAD_REQUEST = "bad_request"
    REFUSED = "refused"

    @property
    def about(self) -> str:
        """ "provider", "route" (its configuration), "request" or "work" (content policy)."""
        if self in (FaultKind.BAD_REQUEST,):
            return "request"
        if self is FaultKind.REFUSED:
            return "work"
        if self is FaultKind.ACCESS:
            return "route"
        return "provider"

    @property
    def falls_through(self) -> bool:
        """True when another route may succeed where this one failed."""
        return self.about in ("provider", "route")


@dataclass(frozen=True, slots=True)
class Fault:
    """A classified failure: its kind, the HTTP status if any, the text, and Retry-After.

    `sent` is False when the request never left this process: it failed while being built
    or encoded (a lone surrogate, a non-string content, a bad timeout), on LiteLLM's own
    parameter checks, or for want of a credential. Such a failure is no attempt and tells
    the breaker nothing: it says nothing about the provider. `local` names the Python error
    underneath when LiteLLM dressed one up as a provider error (a 500 "InternalServerError"
    around a `UnicodeEncodeError`), so the router can raise it for what it is.
    """

    kind: FaultKind
    status: int | None = None
    message: str = ""
    retry_after: float | None = None
    sent: bool = True
    local: str | None = None


# LiteLLM logs its own answers (`mock_response`) as a call made with this key.
_MOCK_KEY = "mock-key"


class Wire:
    """Whether one attempt's request left this process, as LiteLLM itself reports it.

    LiteLLM logs every provider call just before it is handed to the HTTP client or the
    provider's SDK (its pre-API-call log, which SDK-based providers such as Bedrock and
    Vertex reach only once their client and credentials are ready); the transport passes
    `saw` as the call's `logger_fn`, chained to a caller's own. After the call:

    - `left`: the request was handed to a provider;
    - `local`: LiteLLM answered it itself (`mock_response`), or from its cache (`cached`,
      set by the driver when the answer says so): nothing was sent, nothing is owed;
    - neither: the request failed while being built (a bad argument, a missing SDK, a
      client that could not be made), before anything was sent.

    The router counts an attempt, bills it and tells the breaker only when it was sent.
    """

    __slots__ = ("cached", "left", "mocked", "user")

    def __init__(self) -> None:
        self.left = False
        self.mocked = False
        self.cached = False
        self.user: Callable[[Mapping[str, Any]], Any] | None = None

    @property
    def local(self) -> bool:
        """LiteLLM answered without sending (a mock, or its cache)."""
        return (self.mocked or self.cached) and not self.left

    def saw(self, details: Mapping[str, Any]) -> None:
        """LiteLLM's `logger_fn`: called with the call's details before and after it."""
        if details.get("log_event_type") == "pre_api_call":
            if details.get("api_key") == _MOCK_KEY:
                self.mocked = True
            else:
                self.left = True
        if self.user is not None:
            self.user(details)
