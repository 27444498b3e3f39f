"""A budget's period: when its spending starts again at zero.

`"day"`, `"week"` (ISO: Monday 00:00) and `"month"` (calendar) begin at midnight in the
budget's zone (UTC unless `tz="Europe/Oslo"`, read with `zoneinfo`, so a day in Oslo is 23
or 25 hours when the clocks change); a `timedelta` or a number of seconds is a fixed window
aligned to the Unix epoch (every hour on the hour, in any zone); `None` never resets.

A period answers one question: which window a moment (seconds since the epoch) falls in,
as its start, its end and a name. The name goes into the store's account for the window,
so a new window is a new account, at zero, in every process at once; nothing has to reset
anything. A call's reservation and its settlement go to the account of the window in which
it was reserved, even when it settles after the window ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..ground.errors import ConfigError

__all__ = ["CALENDAR", "Period", "Span"]

CALENDAR = ("day", "week", "month")


@dataclass(frozen=True, slots=True)
class Span:
    """One period's span of time: from `start` to `end` (seconds since the epoch), and
    its name."""

    start: float
    end: float
    name: str

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end

    @property
    def resets_at(self) -> datetime:
        """When the window ends, as a timezone-aware datetime (UTC)."""
        return datetime.fromtimestamp(self.end, UTC)

    @property
    def started(self) -> datetime:
        return datetime.fromtimestamp(self.start, UTC)


@dataclass(frozen=True, slots=True)
class Period:
    """How often a budget starts again: `kind` is "day", "week", "month" or "every"
    (`seconds` long, aligned to the epoch); `zone` the calendar kinds' time zone."""

    kind: Literal["day", "week", "month", "every"]
    seconds: float = 0.0
    zone: str = "UTC"

    @classmethod
    def of(cls, period: object, tz: object = None, where: str = "Budget") -> Period | None:
        """A period from what `Budget(period=..., tz=...)` was given, or a `ConfigError`
        naming the field and what it takes."""
        if period is None:
            if tz is not None:
                raise ConfigError(f"{where} tz={tz!r} needs a period (day, week or month)")
            return None
        if isinstance(period, timedelta):
            period = period.total_seconds()
        if isinstance(period, str):
            if period not in CALENDAR:
                raise ConfigError(
                    f"{where} period={period!r} is not a period; use 'day', 'week', 'month', "
                    "a timedelta, a number of seconds, or None (never resets)"
                )
            zone = _zone(tz, where)
            return cls(period, 0.0, zone)  # type: ignore[arg-type]
        if isinstance(period, bool) or not isinstance(period, int | float) or not math.isfinite(period) or period <= 0:
            raise ConfigError(
                f"{where} period={period!r} must be 'day', 'week', 'month', a timedelta or "
                "a number of seconds > 0"
            )
        if tz is not None:
            raise ConfigError(
                f"{where} tz={tz!r} applies to day, week and month; a window of {period:g} s "
                "is aligned to the epoch in every zone"
            )
        return cls("every", float(period))

    def __str__(self) -> str:
        if self.kind == "every":
            return f"every {self.seconds:g} s"
        return self.kind if self.zone == "UTC" else f"{self.kind} ({self.zone})"

    @property
    def label(self) -> str:
        """The period as a policy file writes it (`day`, `3600`)."""
        return f"{self.seconds:g}" if self.kind == "every" else self.kind

    def window(self, at: float) -> Span:
        """The window the moment `at` (seconds since the epoch) falls in."""
        if self.kind == "every":
            start = math.floor(at / self.seconds) * self.seconds
            return Span(start, start + self.seconds, f"every{self.seconds:g}s:{start:.0f}")
        zone = _tz(self.zone)
        local = datetime.fromtimestamp(at, zone).date()
        if self.kind == "day":
            first, after = local, local + timedelta(days=1)
        elif self.kind == "week":
            first = local - timedelta(days=local.weekday())
            after = first + timedelta(days=7)
        else:
            first = local.replace(day=1)
            after = (first + timedelta(days=32)).replace(day=1)
        start, end = _midnight(first, zone), _midnight(after, zone)
        suffix = "" if self.zone == "UTC" else f"@{self.zone}"
        return Span(start, end, f"{self.kind}:{first.isoformat()}{suffix}")


def _midnight(day: date, zone: tzinfo) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()


def _zone(tz: object, where: str) -> str:
    if tz is None:
        return "UTC"
    if not isinstance(tz, str) or not tz:
        raise ConfigError(f"{where} tz must be a zone name such as 'Europe/Oslo', got {tz!r}")
    try:
        _tz(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{where} tz={tz!r} is not a time zone this machine knows (zoneinfo); use a name "
            "such as 'UTC' or 'Europe/Oslo'"
        ) from None
    return tz


_ZONES: dict[str, tzinfo] = {"UTC": UTC}


def _tz(name: str) -> tzinfo:
    found = _ZONES.get(name)
    if found is None:
        found = _ZONES[name] = ZoneInfo(name)
    return found
