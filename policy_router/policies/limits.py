"""Rate limits before the 429: a route's requests and tokens per minute, counted in the store.

A provider account allows so many requests (`rpm`) and tokens (`tpm`) a minute. The router
counts them itself, in a sliding window per route, and skips a route whose window is full
before sending anything ("rpm 60 reached; a slot frees in 12.0 s"). An attempt takes a
*slot*: one request, and tokens at the request's bound (its prompt bound plus its reply
bound, as the budget computes them). When the answer comes the slot is settled to the tokens
the provider billed; when nothing was sent it is given back. A 429 on a limited route closes
its window until the reset the provider named.

A slot stays in the window `WINDOW` seconds: a minute, plus a second of margin, because the
provider counts a request a little after the router took its slot, and a request admitted
the moment a slot frees must not arrive while the provider still counts the old one.

Slots also count the calls in flight per route, which `Order.LEAST_BUSY` reads. In one
process the windows are `cachetools` TTL caches timed by the router's clock (`MemoryWindows`);
a shared store keeps them in Redis on the server's clock. Every write is keyed by the slot's
id and takes effect once.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cachetools import LRUCache, TTLCache

from ..core.journey import Check, Skip
from ..ground.errors import StoreUnavailableError
from ..state.store import Steps, StoreCall

if TYPE_CHECKING:
    from ..core.checks import Candidate
    from ..ground.clock import Clock

__all__ = ["WINDOW", "MemoryWindows", "RateBook", "Window", "describe"]

WINDOW = 61.0
"""Seconds a slot counts against its route: a minute and a second of margin."""


@dataclass(frozen=True, slots=True)
class Window:
    """One route's rate window now.

    `requests` and `tokens` were taken in the last minute; `in_flight` calls hold a slot
    and have not ended; `frees_in` is the seconds until room frees for the request that
    asked (until the oldest slot leaves, for a snapshot; `inf` when the request alone is
    larger than `tpm`); `closed_for` the seconds a provider's 429 closed it for; `taken`
    says whether `take` took the slot.
    """

    requests: int = 0
    tokens: int = 0
    in_flight: int = 0
    frees_in: float = 0.0
    closed_for: float = 0.0
    taken: bool = True


def describe(window: Window, rpm: int | None, tpm: int | None) -> str:
    """A window as a person reads it: "rpm 42/60, tpm 1200/200000"."""
    parts = []
    if rpm:
        parts.append(f"rpm {window.requests}/{rpm}")
    if tpm:
        parts.append(f"tpm {window.tokens}/{tpm}")
    if window.closed_for > 0:
        parts.append(f"closed {window.closed_for:.1f} s more by the provider's 429")
    return ", ".join(parts) or f"{window.in_flight} in flight"


def _reason(window: Window, rpm: int | None, tpm: int | None, tokens: int) -> str:
    if window.closed_for > 0:
        return (
            f"the provider's 429 closed its window: {window.closed_for:.1f} s more "
            "before it is asked again"
        )
    if math.isinf(window.frees_in):
        return f"the request's bound of {tokens} tokens is more than its tpm of {tpm}"
    if rpm and window.requests >= rpm:
        return f"rpm {rpm} reached; a slot frees in {window.frees_in:.1f} s"
    return (
        f"tpm {tpm} reached ({window.tokens} taken, this request may take {tokens}); "
        f"room frees in {window.frees_in:.1f} s"
    )


class RateBook:
    """Rate windows bound to a store: takes slots and settles them, as `Steps`.

    `tracks_all` is True when an ordering reads calls in flight (`LEAST_BUSY`): then every
    route takes slots, not only limited ones.
    """

    def __init__(self, tracks_all: bool = False) -> None:
        self.tracks_all = tracks_all

    def applies(self, candidate: Candidate) -> bool:
        route = candidate.route
        return bool(self.tracks_all or route.rpm or route.tpm)

    def admit(self, candidate: Candidate, slot: str, tokens: int) -> Steps[Skip | None]:
        """Take a slot for the attempt `slot`, or say why the route's window is full.

        A store that cannot be reached fails closed, as the budget does: a limit that
        cannot be read cannot be kept, so the route is skipped (and a slot the lost reply
        may have taken is given back by id). A route without limits, counted only for
        `LEAST_BUSY`, is not held back by it."""
        route = candidate.route
        try:
            window: Window = yield StoreCall(
                "take", (route.name, slot, tokens, route.rpm, route.tpm)
            )
        except StoreUnavailableError as error:
            yield from self.finish(route.name, slot, None)
            if not (route.rpm or route.tpm):
                return None
            return Skip(
                route.name,
                Check.RATE_LIMIT,
                f"rate window store unreachable: {error}",
                {"frees_in": math.inf, "closed_for": 0.0, "requests": 0, "tokens": 0},
            )
        if window.taken:
            return None
        return Skip(
            route.name,
            Check.RATE_LIMIT,
            _reason(window, route.rpm, route.tpm, tokens),
            {
                "frees_in": window.frees_in,
                "closed_for": window.closed_for,
                "requests": window.requests,
                "tokens": window.tokens,
            },
        )

    def finish(self, route: str, slot: str, tokens: int | None) -> Steps[None]:
        """The attempt ended: its slot keeps `tokens` (what was billed), or is given back
        when `tokens` is None (nothing was sent)."""
        yield StoreCall("finish", (route, slot, tokens), write=True)

    def close(self, route: str, seconds: float) -> Steps[None]:
        """The provider refused with a 429 and named a reset: no slot until then."""
        yield StoreCall("close_window", (route, seconds), write=True)


class _Route:
    """One route's window: its slots as a TTL cache of [taken at, tokens], with the
    tokens in it, the slots in taking order, the calls in flight and the 429's close."""

    __slots__ = ("closed", "flying", "order", "slots", "tokens")

    def __init__(self, clock: Clock) -> None:
        self.slots: TTLCache[str, list[float]] = TTLCache(
            maxsize=math.inf, ttl=WINDOW, timer=clock.now
        )
        self.tokens = 0
        self.order: deque[tuple[float, str]] = deque()
        self.flying: set[str] = set()
        self.closed = 0.0

    def expire(self, now: float) -> None:
        for _, (_, tokens) in self.slots.expire(now):
            self.tokens -= int(tokens)

    def oldest(self) -> float | None:
        """When the oldest slot still in the window was taken; slots given back or gone
        are dropped from the front of the taking order as they are met."""
        order, slots = self.order, self.slots
        while order:
            at, slot = order[0]
            if slot in slots:  # a slot id is taken once, so this entry is its own
                return at
            order.popleft()
        return None

    def snapshot(self, now: float) -> Window:
        oldest = self.oldest()
        return Window(
            requests=len(self.slots),
            tokens=self.tokens,
            in_flight=len(self.flying),
            frees_in=max(oldest + WINDOW - now, 0.0) if oldest is not None else 0.0,
            closed_for=max(self.closed - now, 0.0),
        )

    def room_in(self, need: int, tpm: int, now: float) -> float:
        """Seconds until `need` more tokens fit under `tpm` (`inf` if they never can)."""
        if need > tpm:
            return math.inf
        over = self.tokens + need - tpm
        for at, slot in self.order:
            if slot in self.slots:
                over -= int(self.slots[slot][1])
                if over <= 0:
                    return max(at + WINDOW - now, 0.0)
        return 0.0


class MemoryWindows:
    """The rate windows of one process, timed by `clock`. Used by `InMemoryStore`.

    A route's slots are a `cachetools.TTLCache` of `WINDOW` seconds on the router's clock;
    every operation freezes the cache's timer once, takes what expired out of the route's
    running token count, and works at that instant, so a take costs the same with ten
    slots in the window or a hundred thousand. Thread-safe; every operation is one short
    critical section.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._routes: dict[str, _Route] = {}
        self._done: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=4096)

    def _route(self, route: str) -> _Route:
        found = self._routes.get(route)
        if found is None:
            found = self._routes[route] = _Route(self._clock)
        return found

    def take(self, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None) -> Window:
        with self._lock:
            r = self._route(route)
            with r.slots.timer as now:
                r.expire(now)
                seen = r.snapshot(now)
                if slot in r.flying or (route, slot) in self._done:
                    return seen  # taken already (a replay): its window, once
                rpm_full = rpm is not None and seen.requests + 1 > rpm
                tpm_full = tpm is not None and seen.tokens + tokens > tpm
                if seen.closed_for > 0 or rpm_full or tpm_full:
                    frees = seen.frees_in
                    if tpm_full and not rpm_full and tpm is not None:
                        frees = r.room_in(tokens, tpm, now)
                    return Window(
                        seen.requests,
                        seen.tokens,
                        seen.in_flight,
                        frees,
                        seen.closed_for,
                        taken=False,
                    )
                r.slots[slot] = [now, float(tokens)]
                r.tokens += tokens
                r.order.append((now, slot))
                r.flying.add(slot)
                return Window(
                    seen.requests + 1,
                    r.tokens,
                    len(r.flying),
                    seen.frees_in if seen.requests else WINDOW,
                )

    def finish(self, route: str, slot: str, tokens: int | None) -> None:
        with self._lock:
            if (route, slot) in self._done:
                return
            self._done[(route, slot)] = True
            r = self._route(route)
            r.flying.discard(slot)
            with r.slots.timer as now:
                r.expire(now)
                try:
                    held = r.slots[slot]
                except KeyError:  # given back already, or out of the window
                    return
                if tokens is None:
                    del r.slots[slot]
                    r.tokens -= int(held[1])
                else:
                    # Settled in place: the slot still leaves when it was taken + WINDOW.
                    r.tokens += tokens - int(held[1])
                    held[1] = float(tokens)

    def close_window(self, route: str, seconds: float) -> None:
        with self._lock:
            r = self._route(route)
            r.closed = max(r.closed, self._clock.now() + seconds)

    def windows(self, routes: Sequence[str]) -> dict[str, Window]:
        with self._lock:
            out = {}
            for name in routes:
                r = self._route(name)
                with r.slots.timer as now:
                    r.expire(now)
                    out[name] = r.snapshot(now)
            return out
