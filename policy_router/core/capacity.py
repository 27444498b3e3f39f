"""Waiting for capacity: when every route that could serve was only full, a request may
wait for the earliest slot instead of being refused (`wait_for_capacity=True`).

`CapacityWait` keeps one request's round (the routes passed over since its last wait, and
whether anything was sent since) and answers how long to wait; the plan waits and asks
its routes again.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..ground.records import Check, Skip
from .journey import Waited

if TYPE_CHECKING:
    from ..ground.deadline import Deadline

__all__ = ["CapacityWait"]


class CapacityWait:
    """One request's round of routes, for `wait_for_capacity` (see the module docstring)."""

    __slots__ = ("_poll", "_round", "_tried", "enabled")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._round: list[Skip] = []  # why routes were passed over since the last wait
        self._tried = False
        self._poll = 0.05  # a budget held by calls in flight: asked again at this pace

    def passed_over(self, skip: Skip) -> None:
        """A route was passed over in this round, for `skip`'s reason."""
        self._round.append(skip)

    def sent(self) -> None:
        """An attempt was sent in this round: no wait for capacity follows it."""
        self._tried = True

    def wait(self, deadline: Deadline | None) -> float | None:
        """Seconds to wait before asking the routes again, or None not to wait.

        Only when enabled, only when nothing was sent since the last wait, and only when
        every route passed over was full (its rate window, or a budget held by calls in
        flight, which may fit once they settle): until the earliest slot frees, never past
        the deadline.
        """
        if not self.enabled or self._tried or not self._round:
            return None
        waits: list[float] = []
        for skip in self._round:
            if skip.check is Check.RATE_LIMIT and math.isfinite(skip.detail["frees_in"]):
                waits.append(float(max(skip.detail["frees_in"], skip.detail["closed_for"], 0.01)))
            elif skip.check is Check.BUDGET and skip.detail.get("may_fit"):
                waits.append(self._poll)
            else:
                return None
        wait = min(waits)
        if deadline is not None:
            left = deadline.left()
            if left <= 0:
                return None
            wait = min(wait, left)
        return wait

    def waited(self, seconds: float) -> Waited:
        """The request waited `seconds`: the record of it, and a new round begins."""
        why = "; ".join(f"{s.route}: {s.reason}" for s in self._round)
        self._poll = min(self._poll * 2, 1.0)
        self._round, self._tried = [], False
        return Waited(seconds=seconds, why=why)
