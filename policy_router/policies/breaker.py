"""The circuit breaker: per-route health as a pure state machine on an injected clock.

    closed ──(`failures` provider faults in a row)──▶ open (rests `cooldown`)
    closed ──(429)──▶ open (rests Retry-After, else `rate_limited_cooldown`; not a failure)
    closed ──(401/403/404)──▶ open (rests `settled`)
    open ──(rest over; the next request claims the probe)──▶ half-open
    half-open ──(probe answers)──▶ closed, failures reset
    half-open ──(probe fails)──▶ open, rest doubled (capped at `max_cooldown`)

Every router has one unless built with `breaker=None`. The defaults are chosen so that a
route that recovers is asked again soon: rests of 5, 10 and then 15 s, so a recovered
route answers a probe within 15 s of its recovery (the scenario tests measure it), and a
route that stays down costs one request every 15 s: four a minute, against the one a
request it would cost with no breaker.

Only faults about the provider or the route's configuration count. A bad request or a
refusal says nothing about the provider's health and never counts. While one request
holds the half-open probe, every other request skips the route: a failing route costs
one request per rest period. The state lives in the store (`Health` records), so a
shared store gives every process one breaker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from ..ground.errors import ConfigError
from ..ground.numbers import check_number
from ..ground.outcome import RETRY_AFTER_CAP, Fault, FaultKind
from ..ground.records import Check, Skip
from ..state.store import FRESH, Health, Steps, Store, StoreCall

__all__ = [
    "PREFLIGHT",
    "Breaker",
    "HealthBook",
    "RestClosed",
    "RestOpened",
    "breaker_of",
    "counting_for",
    "denied_at_preflight",
]

PREFLIGHT = "denied at preflight: "
"""How the last error of a route a live preflight denied begins (`router.preflight(live=
True)`): the record says why it rests, which no request's failure caused."""


def denied_at_preflight(last_error: str) -> bool:
    """Whether a health record's `last_error` is a live preflight's denial."""
    return last_error.startswith(PREFLIGHT)


@dataclass(frozen=True, slots=True)
class Breaker:
    """When a route rests, and for how long. Immutable; the state lives in the store.

    `failures` consecutive provider faults (5xx, timeout, connection, cut stream) open the
    breaker for `cooldown` seconds; a failed probe doubles the rest, up to `max_cooldown`,
    so a route that stays down is still asked once a `max_cooldown` and one that recovered
    is noticed within it. A 429 is no outage: it rests the route at once for the provider's
    Retry-After (an hour at most) or `rate_limited_cooldown` (default: `cooldown`), and
    does not count toward `failures`. 401/403/404 rest the route for `settled` seconds,
    since a wrong key or model does not heal by itself.
    """

    failures: int = 3
    cooldown: float = 5.0
    max_cooldown: float | None = None
    """The longest rest a doubling reaches (None: 15 s, or `cooldown` when that is longer)."""
    settled: float = 3600.0
    rests: bool = True
    """False: failures and last errors are counted (for `Order.HEALTHIEST` and `health()`)
    and no route ever rests."""
    rate_limited_cooldown: float | None = None
    """The rest after a 429 that names no Retry-After (None: `cooldown`)."""

    def __post_init__(self) -> None:
        if (
            isinstance(self.failures, bool)
            or not isinstance(self.failures, int)
            or self.failures < 1
        ):
            raise ConfigError(
                f"Breaker failures must be a whole number >= 1, got {self.failures!r}"
            )
        for name in ("cooldown", "max_cooldown", "settled", "rate_limited_cooldown"):
            value = getattr(self, name)
            if name in ("rate_limited_cooldown", "max_cooldown") and value is None:
                continue
            check_number(value, f"Breaker {name}")
        if self.max_cooldown is not None and self.max_cooldown < self.cooldown:
            raise ConfigError("Breaker max_cooldown must be at least cooldown")
        if not isinstance(self.rests, bool):
            raise ConfigError(f"Breaker rests must be True or False, got {self.rests!r}")

    @property
    def longest_rest(self) -> float:
        """The longest rest a failed probe's doubling reaches."""
        return self.max_cooldown if self.max_cooldown is not None else max(15.0, self.cooldown)

    # -- the pure transitions --------------------------------------------------------------
    def admit(self, h: Health, now: float) -> tuple[Health, str | None]:
        """May a request be sent now? Returns the new record and a reason when not."""
        if h.state == "closed":
            return h, None
        if h.state == "half_open" and h.probing:
            return h, f"half-open: another request is probing it (after {h.failures} failures)"
        if now < h.rest_until:
            if denied_at_preflight(h.last_error):
                why = h.last_error[len(PREFLIGHT):]
                return h, f"resting {h.rest_until - now:.1f} s more: denied at preflight ({why})"
            if h.failures == 0:  # rested by a 429 alone: a rate limit, not a failure
                return h, f"resting {h.rest_until - now:.1f} s more: the provider rate-limited it"
            return h, (
                f"resting {h.rest_until - now:.1f} s more after {h.failures} "
                f"failure{'s' * (h.failures != 1)}"
            )
        return replace(h, state="half_open", probing=True), None

    def release(self, h: Health) -> Health:
        """A probe claimed by a request that was then not sent is given back."""
        return replace(h, probing=False) if h.probing else h

    def succeeded(self, h: Health) -> Health:
        return h if h is FRESH or h == FRESH else FRESH

    def failed(self, h: Health, fault: Fault, now: float) -> Health:
        """The record after a fault; faults about the request or the work change nothing."""
        kind = fault.kind
        if kind.about in ("request", "work"):
            return self.release(h)
        # A rate limit is no outage: it rests the route without counting as a failure.
        failures = h.failures + (kind is not FaultKind.RATE_LIMITED)
        error = fault.message[:300]
        if not self.rests:
            return replace(h, failures=failures, last_error=error)
        if kind is FaultKind.ACCESS:
            rest = self.settled
        elif kind is FaultKind.RATE_LIMITED:
            given = min(fault.retry_after, RETRY_AFTER_CAP) if fault.retry_after else None
            rest = given or self.rate_limited_cooldown or self.cooldown
        elif h.state == "half_open":
            rest = min(max(h.rest, self.cooldown) * 2, self.longest_rest)
        elif failures >= self.failures:
            rest = self.cooldown
        else:
            return replace(h, failures=failures, last_error=error)
        return Health(
            state="open",
            failures=failures,
            rest_until=now + rest,
            rest=rest,
            probing=False,
            last_error=error,
            opened=h.opened + (h.state == "closed"),
        )


def breaker_of(given: Breaker | Mapping[str, Any] | None, where: str = "breaker") -> Breaker | None:
    """A `Breaker` from what a router was given: one, a mapping of its fields (as a policy
    file writes it: `{"failures": 3, "cooldown": 5}`), or None for none."""
    if given is None or isinstance(given, Breaker):
        return given
    if isinstance(given, Mapping):
        unknown = set(given) - {f.name for f in fields(Breaker)}
        if unknown:
            raise ConfigError(
                f"{where}: unknown Breaker field {sorted(unknown)[0]!r}; use "
                f"{', '.join(f.name for f in fields(Breaker))}"
            )
        return Breaker(**given)
    raise ConfigError(
        f"{where} must be a Breaker, a mapping of its fields, or None for no breaker; got "
        f"{type(given).__name__}"
    )


def counting_for(ranked: bool) -> Breaker | None:
    """A breaker that counts and never rests, for a router without one whose orderings
    rank by failures (`ranked`: see `policies.order.ranks_by_health`); else None."""
    return Breaker(rests=False) if ranked else None


@dataclass(kw_only=True, frozen=True, slots=True)
class RestOpened:
    """A route started resting. `first` is True for the first rest of an outage."""

    route: str
    """The route's name."""
    rest: float
    """Seconds it rests before a probe."""
    failures: int
    """Its consecutive failures when the rest began."""
    error: str
    """The provider's text of the failure that began it, every secret redacted."""
    first: bool
    """True for the first rest of an outage (the route was healthy before)."""


@dataclass(frozen=True, slots=True)
class RestClosed:
    """A route that had rested answered its probe: it is healthy again."""

    route: str
    """The route's name."""
    failures: int
    """The consecutive failures it had before the probe answered."""


class HealthBook:
    """A breaker bound to a store: admits routes and records outcomes, atomically.

    Each method is a `Steps` generator (see `state.store`): it yields one `update_health`
    call and does no I/O itself, so the sync and async drivers share it. `token` names the
    attempt: a probe it claims is its own, and each of its writes is applied once however
    often a shared store receives it (a retry after a lost reply counts no failure twice).
    Outcomes are writes the request need not wait for; the claim is not.
    """

    def __init__(self, breaker: Breaker, store: Store, emit: Callable[[object], None]) -> None:
        self.breaker = breaker
        self.store = store
        self._emit = emit
        self.retired: set[str] = set()
        """Ids of routes a reconfiguration removed (and forgot) while requests planned
        with this book may still be in flight: their outcomes are not written, so a route
        removed mid-request does not come back resting."""

    def admit(
        self, route: str, now: float, token: str = "", label: str | None = None
    ) -> Steps[Skip | Literal[True] | None]:
        """May the attempt `token` be sent to the route whose id is `route` at `now`? A Skip
        saying why not (under `label`, the route's name, when given); True when it may and
        holds the route's one half-open probe; None when it simply may."""
        reason: str | None = None

        def change(h: Health) -> Health:
            nonlocal reason
            new, reason = self.breaker.admit(h, now)
            return new

        h: Health = yield StoreCall("update_health", (route, change), _op(token, "admit"))
        if reason is None:
            return True if h.state == "half_open" else None
        return Skip(
            label or route,
            Check.BREAKER,
            reason,
            detail={
                "rest_left": max(h.rest_until - now, 0.0),
                "failures": h.failures,
                "last_error": h.last_error,
            },
        )

    def admits_as_is(self, h: Health, now: float) -> bool:
        """Whether the breaker admits a request to a route with record `h` at `now` without
        changing it (a closed route): what lets the store admit it in one step."""
        return self.breaker.admit(h, now) == (h, None)

    def succeeding(
        self, route: str, token: str = "", label: str | None = None
    ) -> tuple[Callable[[Health], Health], str, Callable[[], None]]:
        """`succeeded` as a change for the store to make (with its write id) and what to do
        once it is made: tell observers when a resting route answered."""
        before: Health | None = None
        # A store may write the change after the operation returned (`SQLiteStore(
        # settle_within=)`): the event is told by whichever of the two comes last.
        asked = told = False

        def tell() -> None:
            nonlocal told
            if asked and not told and before is not None and before.state != "closed":
                told = True
                self._emit(RestClosed(label or route, before.failures))

        def change(h: Health) -> Health:
            nonlocal before
            before = h
            tell()
            return h if route in self.retired else self.breaker.succeeded(h)

        def made() -> None:
            nonlocal asked
            asked = True
            tell()

        return change, _op(token, "succeeded")["op"], made

    def release(self, route: str, token: str = "") -> Steps[None]:
        """Give back a probe the attempt claimed but did not use."""
        yield StoreCall(
            "update_health", (route, self.breaker.release), _op(token, "release"), write=True
        )

    def succeeded(self, route: str, token: str = "", label: str | None = None) -> Steps[None]:
        if route in self.retired:
            return
        before: Health | None = None

        def change(h: Health) -> Health:
            nonlocal before
            before = h
            return self.breaker.succeeded(h)

        yield StoreCall("update_health", (route, change), _op(token, "succeeded"), write=True)
        if before is not None and before.state != "closed":
            self._emit(RestClosed(label or route, before.failures))

    def failed(
        self,
        route: str,
        fault: Fault,
        now: float,
        token: str = "",
        first: Callable[[float], None] | None = None,
        label: str | None = None,
    ) -> Steps[float]:
        """Record a fault; returns the seconds of rest it started (0.0 when none). `first`
        is told that figure before observers hear `RestOpened`, so the attempt's own record
        (which carries it) comes before the rest it caused."""
        if route in self.retired:
            if first is not None:
                first(0.0)
            return 0.0
        before: Health | None = None

        def change(h: Health) -> Health:
            nonlocal before
            before = h
            return self.breaker.failed(h, fault, now)

        after: Health = yield StoreCall(
            "update_health", (route, change), _op(token, "failed"), write=True
        )
        opened = after.state == "open" and before is not None and before.state != "open"
        rest = after.rest if opened else 0.0
        if first is not None:
            first(rest)
        if opened and before is not None:
            self._emit(
                RestOpened(
                    route=label or route,
                    rest=after.rest,
                    failures=after.failures,
                    error=after.last_error,
                    first=before.state == "closed",
                )
            )
        return rest


def _op(token: str, what: str) -> dict[str, str]:
    return {"token": token, "op": f"{token}:{what}" if token else ""}
