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
from typing import Protocol, runtime_checkable

from .numbers import check_number

__all__ = ["Clock", "ManualClock", "MonotonicClock"]


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

    def __repr__(self) -> str:
        return "MonotonicClock()"


class ManualClock:
    """A clock that moves only when told to; thread-safe. Meant for tests and notebooks."""

    __slots__ = ("_lock", "_now")

    def __init__(self, start: float = 0.0) -> None:
        self._now = check_number(start, "ManualClock start", above=None)
        self._lock = threading.Lock()

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
