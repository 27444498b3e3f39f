"""The opt-in same-route retry: a second chance before falling through to the next route.

Only faults about the provider are retried (5xx, connection errors, 429s, a stream cut
before its first chunk); a refusal, a bad request or a wrong key never is. A timeout is
not retried unless asked (`Retry(on=...)` naming it): a route that did not answer in time
is more often slow than unlucky, and the next route may answer at once, so a timed-out
attempt moves on. A 429 is retried only when no other route is left to ask (the provider
said "not now"), after its Retry-After when that is no longer than `max_backoff`; a longer
one moves on too. `attempts` is the *total*: `Retry(attempts=2)` sends at most two
requests to a route. A wait that would pass the deadline is not taken.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..ground.errors import ConfigError
from ..ground.outcome import Fault, FaultKind

__all__ = ["RETRIED", "Retry"]

PROVIDER_FAULTS = frozenset(k for k in FaultKind if k.about == "provider")
RETRIED = PROVIDER_FAULTS - {FaultKind.TIMEOUT}
"""What a `Retry` retries unless told otherwise: every fault about the provider but a
timeout."""


@dataclass(frozen=True, slots=True)
class Retry:
    """How many requests a route may get per request, and how long to wait between them.

    The n-th wait is `backoff * 2**(n-1)` capped at `max_backoff`, or the provider's
    Retry-After when it sent one no longer than `max_backoff` (a longer one is not waited
    for: the next route is asked); with `jitter` a wait is drawn uniformly from its upper
    half so that many callers do not retry in step. `on` says which faults are retried: by
    default every fault about the provider but a timeout (`RETRIED`); name `"timeout"` in it
    to retry timeouts on the same route too.
    """

    attempts: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    jitter: bool = True
    on: frozenset[FaultKind] = field(default=RETRIED)

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 1
        ):
            raise ConfigError(f"Retry attempts must be a whole number >= 1, got {self.attempts!r}")
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"Retry {name} must be seconds >= 0, got {value!r}")
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

    def wait(self, fault: Fault, sent: int, rng: random.Random) -> float | None:
        """Seconds to wait before request number `sent + 1`, or None when not to retry."""
        if sent >= self.attempts or fault.kind not in self.on:
            return None
        if fault.retry_after is not None:
            # Honoured when it is a wait worth making here; a longer one moves on.
            return fault.retry_after if fault.retry_after <= self.max_backoff else None
        wait = min(self.backoff * 2 ** (sent - 1), self.max_backoff)
        return rng.uniform(wait / 2, wait) if self.jitter else wait


def _iter(on: Iterable[FaultKind | str] | FaultKind | str) -> Iterable[FaultKind | str]:
    return [on] if isinstance(on, str) else on
