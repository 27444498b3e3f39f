"""Rate limits before the 429: a route's requests and tokens per minute, counted in the store.

A provider account allows so many requests (`rpm`) and tokens (`tpm`) a minute. The router
counts them itself, in a sliding window per route, and skips a route whose window is full
before sending anything ("rpm 60 reached; a slot frees in 12.0 s"). An attempt takes a
*slot*: one request, and tokens at the request's bound (its prompt bound plus its reply
bound, as the budget computes them). When the answer comes the slot is settled to the tokens
the provider billed; when nothing was sent it is given back. A 429 on a limited route closes
its window until the reset the provider named.

A slot stays in the window `WINDOW` seconds: a minute, plus a second of margin, because the
provider counts a request a little after the router took its slot, and a request admitted
the moment a slot frees must not arrive while the provider still counts the old one.

Slots also count the calls in flight per route, which `Order.LEAST_BUSY` reads. In one
process the windows are `cachetools` TTL caches timed by the router's clock (`MemoryWindows`);
a shared store keeps them in Redis on the server's clock. Every write is keyed by the slot's
id and takes effect once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..ground.errors import StoreUnavailableError
from ..ground.records import Check, Skip
from ..state.store import Steps, StoreCall
from ..state.windows import Window

if TYPE_CHECKING:
    from .candidate import Candidate

__all__ = ["RateBook", "describe"]


def describe(window: Window, rpm: int | None, tpm: int | None) -> str:
    """A window as a person reads it: "rpm 42/60, tpm 1200/200000"."""
    parts = []
    if rpm:
        parts.append(f"rpm {window.requests}/{rpm}")
    if tpm:
        parts.append(f"tpm {window.tokens}/{tpm}")
    if window.closed_for > 0:
        parts.append(f"closed {window.closed_for:.1f} s more by the provider's 429")
    return ", ".join(parts) or f"{window.in_flight} in flight"


def _reason(window: Window, rpm: int | None, tpm: int | None, tokens: int) -> str:
    if window.closed_for > 0:
        return (
            f"the provider's 429 closed its window: {window.closed_for:.1f} s more "
            "before it is asked again"
        )
    if math.isinf(window.frees_in):
        return f"the request's bound of {tokens} tokens is more than its tpm of {tpm}"
    if rpm and window.requests >= rpm:
        return f"rpm {rpm} reached; a slot frees in {window.frees_in:.1f} s"
    return (
        f"tpm {tpm} reached ({window.tokens} taken, this request may take {tokens}); "
        f"room frees in {window.frees_in:.1f} s"
    )


class RateBook:
    """Rate windows bound to a store: takes slots and settles them, as `Steps`.

    `tracks_all` is True when an ordering reads calls in flight (`LEAST_BUSY`): then every
    route takes slots, not only limited ones.
    """

    def __init__(self, tracks_all: bool = False) -> None:
        self.tracks_all = tracks_all

    def applies(self, candidate: Candidate) -> bool:
        route = candidate.route
        return bool(self.tracks_all or route.rpm or route.tpm)

    def admit(self, candidate: Candidate, slot: str, tokens: int) -> Steps[Skip | None]:
        """Take a slot for the attempt `slot`, or say why the route's window is full.

        A store that cannot be reached fails closed, as the budget does: a limit that
        cannot be read cannot be kept, so the route is skipped (and a slot the lost reply
        may have taken is given back by id). A route without limits, counted only for
        `LEAST_BUSY`, is not held back by it."""
        route = candidate.route
        try:
            window: Window = yield StoreCall(
                "take", (route.id, slot, tokens, route.rpm, route.tpm)
            )
        except StoreUnavailableError as error:
            yield from self.finish(route.id, slot, None)
            if not (route.rpm or route.tpm):
                return None
            return Skip(
                route.name,
                Check.RATE_LIMIT,
                f"rate window store unreachable: {error}",
                detail={
                    "frees_in": math.inf, "closed_for": 0.0, "requests": 0, "tokens": 0,
                    "store_unreachable": True,
                },
            )
        return self.verdict(candidate, window, tokens)

    def verdict(self, candidate: Candidate, window: Window, tokens: int) -> Skip | None:
        """None when the take got its slot, else the skip that says why the window is full."""
        route = candidate.route
        if window.taken:
            return None
        return Skip(
            route.name,
            Check.RATE_LIMIT,
            _reason(window, route.rpm, route.tpm, tokens),
            detail={
                "frees_in": window.frees_in,
                "closed_for": window.closed_for,
                "requests": window.requests,
                "tokens": window.tokens,
            },
        )

    def finish(self, route: str, slot: str, tokens: int | None) -> Steps[None]:
        """The attempt ended: its slot keeps `tokens` (what was billed), or is given back
        when `tokens` is None (nothing was sent)."""
        yield StoreCall("finish", (route, slot, tokens), write=True)

    def close(self, route: str, seconds: float) -> Steps[None]:
        """The provider refused with a 429 and named a reset: no slot until then."""
        yield StoreCall("close_window", (route, seconds), write=True)


