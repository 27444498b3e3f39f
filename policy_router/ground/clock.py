"""Clocks: the one source of time for every policy that measures a duration.

Policies never read the time themselves; they are handed a `Clock`. Production code uses
`MonotonicClock` (which cannot jump when the wall clock is set); tests use `ManualClock`
and advance it by hand, so no test ever sleeps to wait out a rest or a deadline. A clock
with a `sleep(seconds)` method is slept on by the router in place of `time.sleep`, so a
manual clock moves through a retry's backoff or a wait for capacity at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .numbers import check_number

__all__ = ["Clock", "ManualClock", "MonotonicClock", "wall_of"]


@runtime_checkable
class Clock(Protocol):
    """Anything with `now()` returning seconds on a monotonic scale.

    The value means nothing on its own; only differences between two readings do.
    """

    def now(self) -> float: ...


class MonotonicClock:
    """The process's monotonic clock (`time.monotonic`)."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        """Seconds since the epoch: what a budget's day, week or month is read on."""
        return time.time()

    def __repr__(self) -> str:
        return "MonotonicClock()"


def wall_of(clock: Clock) -> Callable[[], float]:
    """The calendar time of `clock` (seconds since the epoch): its `wall()` when it has
    one, else the system's. Budgets' periods are read on it; durations never are."""
    wall = getattr(clock, "wall", None)
    return wall if callable(wall) else time.time


class ManualClock:
    """A clock that moves only when told to; thread-safe. Meant for tests and notebooks."""

    __slots__ = ("_lock", "_now", "_start", "_wall")

    def __init__(self, start: float = 0.0, *, wall: float | None = None) -> None:
        self._now = self._start = check_number(start, "ManualClock start", above=None)
        self._lock = threading.Lock()
        # The calendar moves with the clock, from `wall` (seconds since the epoch) or now.
        self._wall = time.time() if wall is None else check_number(wall, "ManualClock wall", above=None)

    def wall(self) -> float:
        """Seconds since the epoch, as far on from `wall` as the clock is from `start`."""
        with self._lock:
            return self._wall + (self._now - self._start)

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`; moving it backwards is refused."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back: advance({seconds}) needs seconds >= 0")
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        """What the router does instead of sleeping on this clock (a retry's backoff, a
        wait for capacity): time moves on by `seconds` at once."""
        self.advance(max(seconds, 0.0))

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now:g})"
