"""Numbers a user sets, checked where they are given: finite, of the right kind, in range.

A NaN compares false with everything, so a setting left NaN turns every `<` and `>` it
meets into "no": a breaker whose cooldown is NaN never rests a route, a backoff of NaN
sleeps for an error. Infinity is no better as "never": the clocks and sockets underneath
overflow on it. Every float setting of the public API is therefore refused here, by its
name, when it is not a finite number in its range; "no limit" is written `None` where a
setting has one.
"""

from __future__ import annotations

import math

from .errors import ConfigError

__all__ = ["check_number"]


def check_number(
    value: object,
    name: str,
    *,
    above: float | None = 0.0,
    at_least: float | None = None,
    at_most: float | None = None,
    unit: str = "seconds",
) -> float:
    """`value` as a float, or a `ConfigError` naming `name`: a finite int or float (not a
    bool), `> above` (or `>= at_least` when that is given instead) and `<= at_most`."""
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (at_least is None or value >= at_least)
        and (above is None or at_least is not None or value > above)
        and (at_most is None or value <= at_most)
    )
    if not ok:
        if at_least is not None:
            bound = f">= {at_least:g}"
        elif above is not None:
            bound = f"> {above:g}"
        else:
            bound = ""
        if at_most is not None:
            bound = f"{bound} and <= {at_most:g}" if bound else f"<= {at_most:g}"
        raise ConfigError(f"{name} must be {unit} {bound} (a finite number), got {value!r}")
    return float(value)  # type: ignore[arg-type]
