"""Rate windows as the store keeps them: a route's requests, tokens and calls in flight.

`Window` is what a store answers; `MemoryWindows` keeps them for one process, a
`cachetools` TTL cache per route timed by the router's clock (the policy that reads them
is `policies.limits`; Redis keeps its own on the server's clock).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cachetools import LRUCache, TTLCache

if TYPE_CHECKING:
    from ..ground.clock import Clock

__all__ = ['WINDOW', 'MemoryWindows', 'Window']


WINDOW = 61.0
"""Seconds a slot counts against its route: a minute and a second of margin."""



@dataclass(kw_only=True, frozen=True, slots=True)
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
                        requests=seen.requests,
                        tokens=seen.tokens,
                        in_flight=seen.in_flight,
                        frees_in=frees,
                        closed_for=seen.closed_for,
                        taken=False,
                    )
                r.slots[slot] = [now, float(tokens)]
                r.tokens += tokens
                r.order.append((now, slot))
                r.flying.add(slot)
                return Window(
                    requests=seen.requests + 1,
                    tokens=r.tokens,
                    in_flight=len(r.flying),
                    frees_in=seen.frees_in if seen.requests else WINDOW,
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

    def reopen(self, route: str | None = None) -> None:
        """Forget the close a provider's 429 put on one route's window (or on all)."""
        with self._lock:
            for name, r in self._routes.items():
                if route is None or name == route:
                    r.closed = 0.0

    def windows(self, routes: Sequence[str]) -> dict[str, Window]:
        with self._lock:
            out = {}
            for name in routes:
                r = self._route(name)
                with r.slots.timer as now:
                    r.expire(now)
                    out[name] = r.snapshot(now)
            return out
