"""One request's hedging: when to send a second attempt beside a slow first one, and
whether the group's share of hedges leaves room for it (`Hedge.max_share`).

A `Plan` made with a `Hedge` holds one `Hedging`; the plan admits and sends the hedge
like any attempt.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ground.records import Check, Skip
from ..policies.candidate import Candidate
from ..policies.hedge import Hedge, HedgeShares, Latencies
from .gate import Send

__all__ = ["Hedging"]


class Hedging:
    """The hedge policy of request `group`, the latencies its delay is read from, and the
    group's recent shares of hedges (None: no cap kept)."""

    __slots__ = ("_counted", "_group", "_hedge", "_latencies", "_shares")

    def __init__(
        self, hedge: Hedge, group: str, latencies: Latencies | None, shares: HedgeShares | None
    ) -> None:
        self._hedge = hedge
        self._group = group
        self._latencies = latencies or Latencies()
        self._shares = shares
        self._counted = False  # as a request that may hedge, in `shares`

    def delay(self, send: Send, queued: Sequence[tuple[Candidate, float, int]]) -> float | None:
        """Seconds to wait on `send` before hedging it, or None when no route is queued
        to hedge it with (or the next one waits for a retry)."""
        if not queued or queued[0][1]:
            return None
        if self._shares is not None and not self._counted:
            self._counted = True
            self._shares.request(self._group)
        return self._hedge.delay(self._latencies, send.route.id)

    def take(self, candidate: Candidate) -> Skip | None:
        """Take a share for a hedge to `candidate`; the skip saying why not when the
        group's hedges reached `Hedge.max_share` of its recent requests."""
        share = self._hedge.max_share
        if self._shares is None or self._shares.take(self._group, share):
            return None
        return Skip(candidate.name, Check.HEDGE, (
            f"hedge not sent: hedges reached {share:.0%} of group {self._group!r}'s "
            "recent requests (Hedge.max_share)"), detail={"max_share": share})

    def give_back(self) -> None:
        """The hedge whose share was taken was not sent."""
        if self._shares is not None:
            self._shares.give_back(self._group)
