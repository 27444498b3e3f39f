"""The gate of one request: the checks that touch shared state, and what they hold.

Before a route is sent the request, the breaker admits it (or a probe), its rate window
gives it a slot, and the budget reserves its worst case, in DESIGN §2's order; each may say
no, and whatever the earlier ones granted is given back. After the attempt, the same gate
settles or releases what it holds. Every step is a `Steps` generator that yields the
store calls it needs (see `state.store`), so the gate does no I/O of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..ground.money import Money, Usage
from ..ground.outcome import Wire
from ..ground.records import Skip
from ..ground.route import Route
from ..policies.bounds import RequestFacts, counted_tokens
from ..policies.candidate import Candidate
from ..state.store import Steps, StoreDeadline

if TYPE_CHECKING:
    from ..policies.breaker import HealthBook
    from ..policies.budget import Ledger, Reservation
    from ..policies.limits import RateBook

__all__ = ["Admitted", "Gate", "Send"]


@dataclass(frozen=True, slots=True)
class Admitted:
    """What the gate granted a route: a half-open probe, a rate slot's tokens, a hold."""

    probe: bool = False
    slot: int | None = None
    held: Reservation | None = None


class Gate:
    """One request's breaker, rate windows and budget, each None when the router has none."""

    __slots__ = ("facts", "health", "ledger", "rates")

    def __init__(
        self,
        health: HealthBook | None,
        rates: RateBook | None,
        ledger: Ledger | None,
        facts: RequestFacts | None,
    ) -> None:
        self.health = health
        self.rates = rates
        self.ledger = ledger
        self.facts = facts

    def admit(self, candidate: Candidate, at: float, token: str) -> Steps[Admitted | Skip]:
        """Admit `candidate` to be sent at `at` (a retry is checked as of when it will be
        sent), as attempt `token`, or the skip that stops it, with nothing left held."""
        name = candidate.id
        probe = False
        if self.health is not None:
            try:
                claim = yield from self.health.admit(name, at, token, candidate.name)
            except StoreDeadline:
                # The claim's outcome is unknown: give back a probe it may have taken.
                yield from self.health.release(name, token)
                raise
            if isinstance(claim, Skip):
                return claim
            probe = claim is True
        slot = None
        if self.rates is not None and self.rates.applies(candidate):
            slot = self.slot_tokens(candidate)
            try:
                full = yield from self.rates.admit(candidate, token, slot)
            except StoreDeadline:
                # The take's outcome is unknown: give back what it may have taken.
                yield from self.give_back(name, None, token, True)
                raise
            if full is not None:
                if self.health is not None:
                    yield from self.health.release(name, token)
                return full
        held = None
        if self.ledger is not None and self.facts is not None:
            admitted = yield from self.ledger.admit(candidate, self.facts)
            if isinstance(admitted, Skip):
                if self.health is not None:
                    yield from self.health.release(name, token)
                if slot is not None and self.rates is not None:
                    yield from self.rates.finish(name, token, None)
                return admitted
            held = admitted
        return Admitted(probe, slot, held)

    def slot_tokens(self, candidate: Candidate) -> int:
        """The tokens a rate slot takes: what the provider counts on arrival (see
        `bounds.counted_tokens`)."""
        if self.facts is None:
            return 0
        return counted_tokens(self.facts, candidate.sent_cap, candidate.choices)

    def give_back(
        self, route: str, held: Reservation | None, token: str, slot: bool
    ) -> Steps[None]:
        """Give back all an admitted attempt holds: its hold, its probe, its slot."""
        if held is not None and self.ledger is not None:
            yield from self.ledger.release(held)
        if self.health is not None:
            yield from self.health.release(route, token)
        if slot and self.rates is not None:
            yield from self.rates.finish(route, token, None)

    def end_slot(self, route: str, token: str, slot: int | None, tokens: int | None) -> Steps[None]:
        """The attempt's rate slot keeps `tokens` (billed), or is given back (None)."""
        if slot is not None and self.rates is not None:
            yield from self.rates.finish(route, token, tokens)

    def settle(
        self, candidate: Candidate, held: Reservation | None, usage: Usage | None
    ) -> Steps[Money | None]:
        """Settle the attempt; what it was charged (its reservation when no usage came, so
        the journey's costs add up to what the budget says was spent)."""
        if held is not None and self.ledger is not None:
            charged, _ = yield from self.ledger.settle(held, usage)
            return charged
        price, table = candidate.price, candidate.route.prices
        if price is None or usage is None or table is None:
            return None
        return Money(price.cost(usage), table.currency)

    def release(self, held: Reservation | None) -> Steps[None]:
        """Release the attempt's hold: nothing was billed."""
        if held is not None and self.ledger is not None:
            yield from self.ledger.release(held)


@dataclass(frozen=True, slots=True)
class Send:
    """The core's instruction: send the request to `candidate`'s route now."""

    candidate: Candidate
    started: float
    held: Reservation | None = None
    wait: float = 0.0
    timeout: float | None = None
    number: int = 1
    probe: bool = False
    token: str = ""
    """Names this attempt to the store: the probe it claims is its own, so is its slot."""
    slot_tokens: int | None = None
    """The tokens its rate slot took, when it took one."""
    attempt: int = 1
    """Which send of the request this is (1-based), whatever the route."""
    wire: Wire = field(default_factory=Wire, compare=False)
    """Whether the request really left the process (set while it is sent)."""

    @property
    def route(self) -> Route:
        return self.candidate.route
