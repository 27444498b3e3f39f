"""Where one request stands: the routes still queued, the route that answered, why it
stopped, whether its deadline passed. A `Plan` holds one and its outcome steps change it;
nothing else does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..ground.outcome import Fault
from ..policies.candidate import Candidate

__all__ = ["Course", "Queued"]

# A queued send: the candidate, the seconds to wait before sending, which request of its
# route it is (1 for the first, 2 for its first retry, ...).
Queued = tuple[Candidate, float, int]


@dataclass(slots=True, kw_only=True)
class Course:
    """One request's standing (see the module docstring)."""

    eligible: Sequence[Candidate]
    """The routes the request may use, in its order: what a wait for capacity asks again."""
    queue: deque[Queued] = field(default_factory=deque)
    reorder: bool = True
    """Whether the next `next()` orders the queue by the rate windows (once per round)."""
    answered: Candidate | None = None
    stop: Fault | None = None
    """The fault that ended the request with no route left to ask."""
    last_fault: Fault | None = None
    misuse: BaseException | None = None
    """The caller's own retry decision broke its contract: raised instead."""
    expired: bool = False
    """The deadline passed (or the caller cancelled): nothing more is sent."""
    fresh: set[str] = field(default_factory=set)
    """The routes asked again on a fresh connection after a stale one (once each)."""

    @property
    def over(self) -> bool:
        """Whether nothing more is sent: answered, stopped or expired."""
        return self.answered is not None or self.stop is not None or self.expired

    def restart(self) -> None:
        """Queue every eligible route again, as a new round (after a wait for capacity)."""
        self.queue = deque((c, 0.0, 1) for c in self.eligible)
        self.reorder = True
