"""Waiting for capacity: when every route that could serve was only full, a request may
wait for the earliest slot instead of being refused (`wait_for_capacity=True`).

`Capacity` is the part of `Plan` that decides it; it holds no state of its own.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from ..ground.records import Check, Skip
from ..policies.candidate import Candidate
from .journey import Waited

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..ground.deadline import Deadline
    from ..ground.outcome import Fault

__all__ = ["Capacity"]


class Capacity:
    """The capacity steps of a `Plan` (see the module docstring)."""

    # The plan's state these steps read and change; `Plan.__init__` sets every one.
    deadline: Deadline | None
    expired: bool
    _wait_for_capacity: bool
    _answered: Candidate | None
    _stop: Fault | None
    _tried_in_round: bool
    _round: list[Skip]
    _poll: float
    _queue: deque[tuple[Candidate, float, int]]
    _eligible: Sequence[Candidate]
    _reorder: bool

    def _record(self, step: Skip | Waited) -> None:
        raise NotImplementedError  # the plan records

    def capacity_wait(self) -> float | None:
        """Seconds to wait before asking the routes again, or None not to wait.

        Only with `wait_for_capacity`, only when nothing was sent since the last wait, and
        only when every route passed over was full (its rate window, or a budget held by
        calls in flight, which may fit once they settle): until the earliest slot frees,
        never past the deadline.
        """
        if not self._wait_for_capacity or self._answered or self._stop or self.expired:
            return None
        if self._tried_in_round or not self._round:
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
        if self.deadline is not None:
            left = self.deadline.left()
            if left <= 0:
                return None
            wait = min(wait, left)
        return wait

    def waited(self, seconds: float) -> None:
        """The driver waited `seconds` for capacity: say so, and consider the routes again."""
        why = "; ".join(f"{s.route}: {s.reason}" for s in self._round)
        self._record(Waited(seconds=seconds, why=why))
        self._poll = min(self._poll * 2, 1.0)
        self._round, self._tried_in_round = [], False
        self._queue = deque((c, 0.0, 1) for c in self._eligible)
        self._reorder = True
