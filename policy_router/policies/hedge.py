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
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Literal

from ..ground.errors import ConfigError

__all__ = ["Hedge", "Latencies"]


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
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"Hedge {name} must be seconds > 0, got {value!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise ConfigError(f"Hedge samples must be a whole number >= 1, got {self.samples!r}")

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

    def record(self, route: str, seconds: float) -> None:
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
