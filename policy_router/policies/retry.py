"""The opt-in same-route retry: a second chance before falling through to the next route.

Only faults about the provider are retried (5xx, connection errors, 429s, a stream cut
before its first chunk); a refusal, a bad request or a wrong key never is. A timeout is
not retried unless asked (`Retry(on=...)` naming it): a route that did not answer in time
is more often slow than unlucky, and the next route may answer at once, so a timed-out
attempt moves on. A 429 naming a short Retry-After (up to `rate_limited_wait`, 5 seconds by
default, and no longer than `max_backoff`) is waited out on the same route, as a 5xx's
backoff is, before any other route is asked: the provider said when to come back, and the
route you preferred (the cheapest, in a price ordering) answers then. A longer Retry-After,
or a 429 that names no wait, moves on to the next route at once while one is left; with
none left it is retried after its Retry-After when that is no longer than `max_backoff`.
`Retry(rate_limited_wait=0)` asks the next route at once on every 429 (the answer sooner,
from another route). `attempts` is the *total*: `Retry(attempts=2)` sends at most two
requests to a route. A wait that would pass the deadline is not taken: the next route is
asked, or, with none left, the call ends with the deadline's error.

`Retry(routes="first")` gives the retries only to the first route the request was sent to
(the ordering's best, when it could be asked); the others get their one request each.
`Retry(decide=fn)` replaces `on` and `rate_limited_wait` with your own decision, called
with a `RetryContext` for each fault about the provider, a 429 with other routes queued
included: it must return exactly `True` or `False`. No decision can
retry what is never retried (a bad request, a refusal, a wrong key), pass `attempts`, or
retry a route the breaker has just rested.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..ground.errors import ConfigError
from ..ground.numbers import check_number
from ..ground.outcome import Fault, FaultKind

__all__ = ["RETRIED", "Retry", "RetryContext"]

PROVIDER_FAULTS = frozenset(k for k in FaultKind if k.about == "provider")
RETRIED = PROVIDER_FAULTS - {FaultKind.TIMEOUT}
"""What a `Retry` retries unless told otherwise: every fault about the provider but a
timeout."""


@dataclass(kw_only=True, frozen=True, slots=True)
class RetryContext:
    """What a custom retry decision (`Retry(decide=...)`) is told about one failed attempt:
    the route's name, how many requests it has had for this request (`attempt`, from 1),
    the fault's kind ("server_error", "timeout", ...), its HTTP status, the provider's text
    with every secret redacted, and the Retry-After it sent (seconds, or None)."""

    route: str
    """The route's name."""
    attempt: int
    """How many requests the route has had for this request, from 1."""
    kind: str
    """The fault's kind: "server_error", "timeout", "rate_limited", ... (`FaultKind`)."""
    status: int | None
    """The HTTP status, or None when no answer came (a timeout, a dropped connection)."""
    error: str
    """The provider's text, every secret redacted."""
    retry_after: float | None
    """The Retry-After the provider sent, in seconds, or None."""


@dataclass(frozen=True, slots=True)
class Retry:
    """How many requests a route may get per request, and how long to wait between them.

    The n-th wait is `backoff * 2**(n-1)` capped at `max_backoff`, or the provider's
    Retry-After when it sent one no longer than `max_backoff` (a longer one is not waited
    for: the next route is asked); with `jitter` a wait is drawn uniformly from its upper
    half so that many callers do not retry in step. `on` says which faults are retried: by
    default every fault about the provider but a timeout (`RETRIED`); name `"timeout"` in it
    to retry timeouts on the same route too.

    Args:
        attempts: Requests a route may get per request, the first included (2: one retry).
        backoff: Seconds before the first retry, doubling each time.
        max_backoff: The longest wait; a longer Retry-After moves on to the next route.
        jitter: Draw each wait from its upper half.
        on: The faults retried: one fault's name or several (`{"rate_limited",
            "timeout"}`); once made, `retry.on` is a frozenset of them.
        routes: `"all"` (every route may be retried) or `"first"` (only the first sent to).
        decide: Your own decision in place of `on`: called with a `RetryContext`, it
            returns exactly `True` or `False`.
        rate_limited_wait: The longest Retry-After a 429 may name and still be waited out
            on the same route while other routes are queued (default 5 s; 0: the next
            route is asked at once).

    Raises:
        ConfigError: a field is wrong, or `on` names a fault that is not about the provider.
    """

    attempts: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    jitter: bool = True
    on: Iterable[FaultKind | str] | FaultKind | str = field(default=RETRIED)
    routes: str = "all"
    decide: Callable[[RetryContext], bool] | None = None
    rate_limited_wait: float = 5.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 1
        ):
            raise ConfigError(f"Retry attempts must be a whole number >= 1, got {self.attempts!r}")
        for name in ("backoff", "max_backoff", "rate_limited_wait"):
            check_number(getattr(self, name), f"Retry {name}", at_least=0)
        try:
            kinds = frozenset(FaultKind(k) for k in _iter(self.on))
        except ValueError as error:
            raise ConfigError(
                f"Retry on= names an unknown fault ({error}); name faults about the provider: "
                f"{', '.join(sorted(k.value for k in PROVIDER_FAULTS))}"
            ) from None
        bad = kinds - PROVIDER_FAULTS
        if bad:
            raise ConfigError(
                f"Retry on={sorted(k.value for k in bad)} is not retried: only faults about the "
                f"provider are ({', '.join(sorted(k.value for k in PROVIDER_FAULTS))})"
            )
        object.__setattr__(self, "on", kinds)
        if self.routes not in ("all", "first"):
            raise ConfigError(f'Retry routes must be "all" or "first", got {self.routes!r}')
        if self.decide is not None and not callable(self.decide):
            raise ConfigError(
                f"Retry decide must be a callable taking a RetryContext, got {self.decide!r}"
            )

    def wait(
        self,
        fault: Fault,
        sent: int,
        rng: random.Random,
        *,
        route: str = "",
        first: bool = True,
        error: str = "",
    ) -> float | None:
        """Seconds to wait before request number `sent + 1` to `route`, or None when not to
        retry. `first` says whether `route` is the first the request was sent to; `error`
        is the fault's text, redacted, for a custom decision."""
        if sent >= self.attempts or (self.routes == "first" and not first):
            return None
        if self.decide is None:
            if fault.kind not in self.on:
                return None
        elif fault.kind not in PROVIDER_FAULTS or not self._decided(
            RetryContext(route=route, attempt=sent, kind=fault.kind.value, status=fault.status, error=error, retry_after=fault.retry_after)
        ):
            return None
        if fault.retry_after is not None:
            # Honoured when it is a wait worth making here; a longer one moves on.
            return fault.retry_after if fault.retry_after <= self.max_backoff else None
        wait = min(self.backoff * 2 ** (sent - 1), self.max_backoff)
        return rng.uniform(wait / 2, wait) if self.jitter else wait


    def waits_out(self, fault: Fault) -> bool:
        """Whether a 429 is retried on its route although other routes are queued: your
        decision asks itself (`decide`); else when its Retry-After is short."""
        if self.decide is not None:
            return True
        after = fault.retry_after
        return after is not None and after <= min(self.rate_limited_wait, self.max_backoff)

    def _decided(self, context: RetryContext) -> bool:
        assert self.decide is not None
        verdict = self.decide(context)
        if type(verdict) is not bool:
            raise ConfigError(
                f"Retry decide={self.decide!r} returned {verdict!r}: it must return exactly "
                "True (retry) or False (move on)"
            )
        return verdict


def _iter(on: Iterable[FaultKind | str] | FaultKind | str) -> Iterable[FaultKind | str]:
    return [on] if isinstance(on, str) else on
