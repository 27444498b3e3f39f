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

import math
from dataclasses import dataclass
from typing import Any

from .clock import Clock
from .errors import ConfigError

__all__ = ["Deadline", "check_seconds", "check_timeout"]


def check_seconds(value: object, name: str) -> float | None:
    """Validate a deadline given in seconds: None, or a finite number > 0.

    Infinity and NaN are refused by name: "no deadline" is written `None`, and the HTTP
    stack underneath fails on both (`inf` overflows its clock).
    """
    if value is None:
        return None
    seconds = math.nan
    if not isinstance(value, bool) and isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int past any float: no finite number of seconds
            seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(
            f"{name} must be a finite number of seconds > 0 (or None for no limit), "
            f"got {_shown(value)}"
        )
    return seconds


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "an int too large for a float"
    return text if len(text) <= 80 else f"{text[:77]}…"


_TIMEOUT_PARTS = ("connect", "read", "write", "pool")


def check_timeout(value: Any, name: str) -> Any:
    """Validate a LiteLLM `timeout`: seconds as for `check_seconds` (a float, or None), or
    an HTTP client's `Timeout` as LiteLLM accepts one (httpx's, httpx2's: read by its
    fields, not its type), whose every set field must be seconds > 0."""
    if type(value).__name__ == "Timeout" and all(hasattr(value, p) for p in _TIMEOUT_PARTS):
        for part in _TIMEOUT_PARTS:
            check_seconds(getattr(value, part), f"{name}.{part}")
        return value
    return check_seconds(value, name)


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
