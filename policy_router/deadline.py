"""The deadline: one bound on the whole request, across every route and retry.

LiteLLM's `timeout=` bounds each socket read, not the call: a reply trickled in pieces
0.4 s apart succeeded after 4 s with `timeout=1`. So the router holds the deadline itself,
on the injected clock: it is checked before every attempt and every retry wait, each
attempt gets `timeout=` the deadline's length (or the caller's own, when shorter; never
the time left, which would give LiteLLM a new client cache key, hence a new connection,
on every call), and the drivers stop waiting at the deadline (async by cancelling, sync
by no longer waiting on the worker that makes the call).
"""

from __future__ import annotations

from dataclasses import dataclass

from .clock import Clock
from .errors import ConfigError

__all__ = ["Deadline", "check_seconds"]


def check_seconds(value: object, name: str) -> float | None:
    """Validate a deadline or timeout given in seconds: None, or a number > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Deadline:
    """`seconds` after `start` on `clock`."""

    start: float
    seconds: float
    clock: Clock

    @property
    def at(self) -> float:
        return self.start + self.seconds

    def left(self) -> float:
        """Seconds left, never below zero."""
        return max(self.at - self.clock.now(), 0.0)

    def passed(self) -> bool:
        return self.clock.now() >= self.at

    def elapsed(self) -> float:
        return self.clock.now() - self.start
