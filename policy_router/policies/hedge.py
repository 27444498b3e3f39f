"""Hedged requests: when an attempt is slow to answer, the same request goes to the next
route as well, and the first answer wins.

A slow tail (a few requests in a hundred twenty times slower) costs a caller the tail's
time on every such request; a hedge caps it near the route's ordinary time, for a few extra
requests. `Hedge(after=...)` says when: a number of seconds, or `"p95"`, the route's own
recent 95th percentile of time to first chunk (time to answer, for a call that does not
stream), never less than `at_least`, and `otherwise` seconds until `samples` answers are
known. The hedge is bounded like any attempt: it is sent only to a route the requirements
and the on-device floor allow, only when the breaker, its rate window and the budget admit
it (the budget reserving its worst case beside the first's), and inside the deadline. The
attempt that loses is cancelled where it can be (async) or left to end (sync), charged what
it may have billed (its reservation, unless its usage comes), and is no fault of its route.

A hedge is bounded in share and in kind. In share: hedges add at most `max_share` requests
per request of the group (10% by default), counted over its recent requests, so a provider
that turns uniformly slow costs a tenth more requests, not twice as many (`HedgeShares`).
In kind: a call with a side effect at the provider is never hedged, since two attempts
would do it twice: a stored or background Responses call (`store` is on unless the call
says `store=False`), a chat call with `store=True`, a call that continues a conversation
(`conversation`, `previous_response_id`) (`side_effect`).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..ground.errors import ConfigError
from ..ground.numbers import check_number

__all__ = ["Hedge", "HedgeShares", "Latencies", "side_effect"]


@dataclass(frozen=True, slots=True)
class Hedge:
    """When to send a second attempt beside a slow first one (see the module docstring).

    `Hedge(after=2.0)` hedges an attempt with no first chunk (no answer) after 2 s;
    `Hedge(after="p95")` after the route's own recent 95th percentile, at least `at_least`
    seconds, and `otherwise` seconds while fewer than `samples` of its answers are known.
    """

    after: float | Literal["p95"] = "p95"
    at_least: float = 0.05
    otherwise: float = 2.0
    samples: int = 20
    max_share: float = 0.1
    """The most hedges per request of the group, over its recent requests (0.1: at most one
    extra request in ten, however slow the provider turns)."""

    def __post_init__(self) -> None:
        if self.after != "p95" and (
            isinstance(self.after, bool)
            or not isinstance(self.after, int | float)
            or not math.isfinite(self.after)
            or self.after <= 0
        ):
            raise ConfigError(
                f"Hedge after must be seconds > 0 or 'p95', got {self.after!r}"
            )
        for name in ("at_least", "otherwise"):
            check_number(getattr(self, name), f"Hedge {name}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise ConfigError(f"Hedge samples must be a whole number >= 1, got {self.samples!r}")
        check_number(self.max_share, "Hedge max_share", unit="a share", at_most=1.0)

    def delay(self, latencies: Latencies, route: str) -> float:
        """Seconds to wait on route `route`'s attempt before hedging it."""
        if self.after != "p95":
            return float(self.after)
        known = latencies.quantile(route, 0.95, self.samples)
        return self.otherwise if known is None else max(known, self.at_least)


class Latencies:
    """Each route's recent times to first chunk (to answer, when not streamed): the last
    `size` answers per route, by route id. Thread-safe; kept in this process."""

    def __init__(self, size: int = 200) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._seen: dict[str, deque[float]] = {}
        self.answered: set[str] = set()
        """The routes that have answered in this process (the express lane's answers
        included): a connection to them may be kept alive, and closed by the server."""

    def record(self, route: str, seconds: float) -> None:
        self.answered.add(route)
        with self._lock:
            found = self._seen.get(route)
            if found is None:
                found = self._seen[route] = deque(maxlen=self._size)
            found.append(seconds)

    def quantile(self, route: str, share: float, at_least: int = 1) -> float | None:
        """The nearest-rank `share` quantile of the route's recent times, or None with
        fewer than `at_least` of them."""
        with self._lock:
            values = sorted(self._seen.get(route, ()))
        if len(values) < at_least:
            return None
        return values[max(math.ceil(share * len(values)) - 1, 0)]


class HedgeShares:
    """How many of each group's recent requests could hedge, and how many hedges left: a
    hedge may leave while the group's hedges stay within `share` of its requests (the
    first one of a group always may). Counts are halved past `window` requests, so the
    share is that of the recent requests, not of all time. Thread-safe; in this process."""

    def __init__(self, window: int = 200) -> None:
        self._window = window
        self._lock = threading.Lock()
        self._counts: dict[str, list[float]] = {}

    def request(self, group: str) -> None:
        """A request of `group` that may hedge was sent its first attempt."""
        with self._lock:
            counts = self._counts.setdefault(group, [0.0, 0.0])
            counts[0] += 1
            if counts[0] > 2 * self._window:
                counts[0] /= 2
                counts[1] /= 2

    def take(self, group: str, share: float) -> bool:
        """Whether a hedge of `group` may leave now; if so it is counted."""
        with self._lock:
            requests, hedges = self._counts.setdefault(group, [0.0, 0.0])
            if hedges + 1 > max(1.0, share * requests):
                return False
            self._counts[group][1] = hedges + 1
            return True

    def give_back(self, group: str) -> None:
        """A hedge counted by `take` was not sent after all (refused by a check)."""
        with self._lock:
            counts = self._counts.get(group)
            if counts is not None and counts[1] >= 1:
                counts[1] -= 1


def side_effect(operation: str, kwargs: Mapping[str, Any]) -> str | None:
    """Why a call must not be sent twice (its side effect at the provider), or None."""
    if kwargs.get("background"):
        return "a background response"
    if kwargs.get("conversation") is not None or kwargs.get("previous_response_id"):
        return "it continues a conversation"
    store = kwargs.get("store")
    if operation == "responses" and store is not False:
        return "a stored response (store=False would allow it)"
    if store:
        return "a stored completion (store=True)"
    return None
