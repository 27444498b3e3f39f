"""What an outcome means: a failed attempt's fault, and what it is about.

The router moves on after faults about the provider or the route's configuration, and
stops after faults about the request or the work (DESIGN §2). `transport` classifies
LiteLLM's exceptions into these; everything else only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Fault", "FaultKind"]


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
