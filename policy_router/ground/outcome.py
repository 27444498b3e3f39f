"""What an outcome means: a failed attempt's fault, and what it is about.

The router moves on after faults about the provider or the route's configuration, and
stops after faults about the request or the work (DESIGN §2). `transport` classifies
LiteLLM's exceptions into these; everything else only reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "RETRY_AFTER_CAP",
    "Fault",
    "FaultKind",
    "OffDeviceConnection",
    "StopAtWire",
    "Wire",
    "WireRefusal",
]

RETRY_AFTER_CAP = 3600.0
"""The longest Retry-After honoured, in seconds: a wait of days, or `inf`, would close a
route (its rest, its rate window) for good; after an hour it is asked again, and rests
again if it still refuses."""


class FaultKind(StrEnum):
    """What a failed attempt was about; decides whether the router moves on or stops."""

    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    STREAM_CUT = "stream_cut"
    ACCESS = "access"
    BAD_REQUEST = "bad_request"
    TOO_LONG = "context_window"
    """The prompt was too long for the route's context window (a context-length 400)."""
    REFUSED = "refused"

    @property
    def about(self) -> str:
        """ "provider", "route" (its configuration), "request" or "work" (content policy).
        A prompt too long is about the request, for this route's window."""
        if self in (FaultKind.BAD_REQUEST, FaultKind.TOO_LONG):
            return "request"
        if self is FaultKind.REFUSED:
            return "work"
        if self is FaultKind.ACCESS:
            return "route"
        return "provider"

    @property
    def falls_through(self) -> bool:
        """True when another route may succeed where this one failed: a fault about the
        provider or the route, or a prompt too long for this route's window (a route with
        a larger one may take it)."""
        return self.about in ("provider", "route") or self is FaultKind.TOO_LONG


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
    _: KW_ONLY  # what follows is named at every construction
    retry_after: float | None = None
    sent: bool = True
    local: str | None = None
    billed: bool = False
    """The provider may have billed it: the request was written and no answer of the
    provider's says it was refused (a timeout, a connection dropped after the write, a
    gateway timeout). Such an attempt is charged its reservation; only evidence that
    nothing was billed (a refused connection, an error status, a local error) releases it."""
    stale: bool = False
    """The server reset or closed the connection before any byte of an answer: most often
    a kept-alive connection it had closed while idle, reused as the close crossed the
    request. A reset (not `billed`: never read) is asked again at once on a fresh
    connection, once per request, the breaker not told; so is a close, on a route that has
    answered through this router before (a connection to it can have been kept). See
    `core.outcomes`."""


# LiteLLM logs its own answers (`mock_response`) as a call made with this key.
_MOCK_KEY = "mock-key"


Judge = Callable[[Mapping[str, Any], "Wire"], Fault | None]
"""An attempt's checkpoint at the wire: given LiteLLM's pre-call details (the URL, headers
and body it is about to send) and the attempt's wire, the reason not to send them, or
None."""


class StopAtWire(BaseException):
    """Raised from LiteLLM's pre-call log to stop an attempt before its HTTP client is
    called. A `BaseException`: LiteLLM swallows every `Exception` its `logger_fn` raises
    (litellm 1.110.2, `Logging.pre_call`) and would send the request anyway. The transport
    turns it into `WireRefusal` as soon as LiteLLM's call unwinds, so it never reaches a
    caller."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


class WireRefusal(Exception):
    """An attempt the checkpoint at the wire stopped: nothing was sent (`fault.sent` is
    False); the driver records it as "not sent to ROUTE (why)"."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


class OffDeviceConnection(ConnectionRefusedError):
    """A connection off this machine refused during an on-device attempt (`drive.guard`).

    A `ConnectionRefusedError`, so the HTTP client reports a connection that was never
    made; the router reads it in the error's chain and records the attempt as not sent."""


class Wire:
    """Whether one attempt's request left this process, as LiteLLM itself reports it, and
    the checkpoint every promise is judged at before it does.

    LiteLLM logs every provider call just before it is handed to the HTTP client or the
    provider's SDK (its pre-API-call log, which SDK-based providers such as Bedrock and
    Vertex reach only once their client and credentials are ready), with the URL, headers
    and body it built; the transport passes `saw` as the call's `logger_fn`, chained to a
    caller's own. There `judge`, when the attempt has one, reads what is about to leave and
    may stop it (`StopAtWire`). After the call:

    - `left`: the request was handed to a provider;
    - `local`: LiteLLM answered it itself (`mock_response`), or from its cache (`cached`,
      set by the driver when the answer says so): nothing was sent, nothing is owed;
    - `stopped`: the checkpoint refused it, naming why;
    - none of these: the request failed while being built (a bad argument, a missing SDK,
      a client that could not be made), before anything was sent.

    `details` keeps the part of LiteLLM's pre-call details that names the secrets the
    request carried (its key, headers and URL; read only if the attempt fails);
    `unbounded` says why the body as sent has no finite bound, when the checkpoint let it
    go anyway (the budget then counts overshoot possible). The
    router counts an attempt, bills it and tells the breaker only when it was sent.
    """

    __slots__ = ("cached", "details", "judge", "left", "mocked", "stopped", "unbounded", "user")

    def __init__(self, judge: Judge | None = None) -> None:
        self.left = False
        self.mocked = False
        self.cached = False
        self.user: Callable[[Mapping[str, Any]], Any] | None = None
        self.judge = judge
        self.stopped: Fault | None = None
        self.details: Mapping[str, Any] | None = None
        self.unbounded = ""

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
                # What redaction reads, not LiteLLM's dict itself: that dict holds this
                # method as its `logger_fn`, so keeping it would make every call's logging
                # state (request, answer and all) a reference cycle, freed only by the
                # cyclic collector (2x its collections in a server, measured).
                self.details = {"api_key": details.get("api_key"), "additional_args": details.get("additional_args")}
                if self.judge is not None:
                    refused = self.judge(details, self)
                    if refused is not None:
                        self.stopped = refused
                        raise StopAtWire(refused)
                self.left = True
        if self.user is not None:
            self.user(details)
