"""A route's health record as the SQLite file keeps it: JSON text, its times on the calendar.

Every process of the machine reads the same text with its own clock, so a time is kept on
the calendar (`time.time()`) and moved to the reader's clock by the offset between them.
Not resting is kept as 0, not as 0 moved by an offset: read back by another clock it
would be a time a few microseconds (or, between processes, seconds) off 0, a record that
is no longer the closed one, and every success would write it again. `probe_at` is kept
only while a probe is held, so a closed record is always the same text, recognised
without parsing it: every admission and every success reads it.
"""

from __future__ import annotations

import json

from ..store import FRESH, Health

__all__ = ["probe_at", "read", "text"]


def text(health: Health, offset: float, probe_at: float) -> str:
    """`health` (on a clock `offset` seconds behind the calendar) as the file keeps it."""
    return json.dumps(
        {
            "state": health.state,
            "failures": health.failures,
            "rest_until": health.rest_until + offset if health.rest_until else 0.0,
            "rest": health.rest,
            "probing": health.probing,
            "probe_at": probe_at,
            "last_error": health.last_error,
            "opened": health.opened,
        }
    )


_CLOSED = text(FRESH, 0.0, 0.0)


def read(kept: str | None, offset: float, now: float, probe_lease: float) -> Health:
    """The record kept as `kept` (None: never written) on the reader's clock. A probe
    claimed more than `probe_lease` seconds before `now` (calendar) is no longer held."""
    if kept is None or kept == _CLOSED:
        return FRESH
    data = json.loads(kept)
    probing = bool(data.get("probing")) and now - float(data.get("probe_at", 0.0)) <= probe_lease
    return Health(
        state=data["state"],
        failures=data["failures"],
        rest_until=data["rest_until"] - offset if data["rest_until"] else 0.0,
        rest=data["rest"],
        probing=probing,
        last_error=data["last_error"],
        opened=data["opened"],
    )


def probe_at(kept: str, now: float) -> float:
    """When the probe held in `kept` was claimed (calendar), `now` when it does not say."""
    return float(json.loads(kept).get("probe_at", now))
