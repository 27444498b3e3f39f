"""The gate of one request: the checks that touch shared state, and what they hold.

Before a route is sent the request, the breaker admits it (or a probe), its rate window
gives it a slot, and the budget reserves its worst case, in DESIGN §2's order; each may say
no, and whatever the earlier ones granted is given back. After the attempt, the same gate
settles or releases what it holds. Every step is a `Steps` generator that yields the
store calls it needs (see `state.store`), so the gate does no I/O of its own.

A store that can (`Store.admit`, `Store.conclude`) is asked for the whole admission in one
operation and for an answer's whole settlement in another: a shared store makes each one
round trip. The admission goes on only while the route's record is closed, which the
breaker admits unchanged; any other record (resting, probing, a probe to claim) is left to
the breaker's own steps, one at a time, as are a refusal's reason and every failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..ground.errors import StoreUnavailableError
from ..ground.ids import new_id
from ..ground.money import Money, Usage
from ..ground.outcome import Wire
from ..ground.records import Skip
from ..ground.route import Route
from ..policies.accounts import Account, Reservation
from ..policies.bounds import RequestFacts, counted_tokens
from ..policies.candidate import Candidate
from ..state.admission import Admission, Admitting, Settlement
from ..state.store import Steps, StoreCall, StoreDeadline

if TYPE_CHECKING:
    from ..policies.breaker import HealthBook
    from ..policies.ledger import Ledger
    from ..policies.limits import RateBook
    from ..policies.prices import Price
    from ..state.store import Store

__all__ = ["Admitted", "Gate", "Send", "admits_at_once", "held_of", "listed_cost"]


@dataclass(frozen=True, slots=True)
class Admitted:
    """What the gate granted a route: a half-open probe, a rate slot's tokens, a hold."""

    probe: bool = False
    slot: int | None = None
    held: Reservation | None = None


class Gate:
    """One request's breaker, rate windows and budget, each None when the router has none."""

    __slots__ = ("at_once", "facts", "health", "ledger", "rates")

    def __init__(
        self,
        health: HealthBook | None,
        rates: RateBook | None,
        ledger: Ledger | None,
        facts: RequestFacts | None,
        store: Store | None = None,
    ) -> None:
        self.health = health
        self.rates = rates
        self.ledger = ledger
        self.facts = facts
        self.at_once = _at_once(type(store))

    def admit(self, candidate: Candidate, at: float, token: str) -> Steps[Admitted | Skip]:
        """Admit `candidate` to be sent at `at` (a retry is checked as of when it will be
        sent), as attempt `token`, or the skip that stops it, with nothing left held."""
        if self.ledger is not None:
            yield from self.ledger.ready()
        if self.at_once and (self.health or self.rates or self.ledger):
            admitted = yield from self._admit_at_once(candidate, at, token)
            if admitted is not None:
                return admitted
        return (yield from self._admit_in_turn(candidate, at, token))

    def admit_closed(self, candidate: Candidate, at: float, token: str) -> Steps[Admitted | Skip | None]:
        """`admit` in the one store operation of a store that can (`Store.admit`), for a
        route the breaker admits as it is (its record closed): the express lane's
        admission. None, with nothing held, when the breaker's own steps would have to
        decide (a record that is not closed), when the store cannot admit in one
        operation or could not be reached, or when the budget refuses before asking it (a
        currency, no price): the plan then asks as it always does."""
        if self.ledger is not None:
            yield from self.ledger.ready()
        if not self.at_once:
            return None
        return (yield from self._admit_at_once(candidate, at, token))

    def _admit_at_once(
        self, candidate: Candidate, at: float, token: str
    ) -> Steps[Admitted | Skip | None]:
        """The whole admission in one store operation; None when the breaker's own steps
        must decide (a record that is not closed, a store that could not be reached)."""
        name = candidate.id
        priced: tuple[int, Price | None, bool] | None = None
        accounts = self._accounts(candidate)
        if accounts and self.ledger is not None and self.facts is not None:
            verdict = self.ledger.priced(candidate, self.facts)
            if isinstance(verdict, Skip):
                return None  # the breaker's verdict comes first: asked in turn
            priced = verdict
        take = None
        if self.rates is not None and self.rates.applies(candidate):
            take = (self.slot_tokens(candidate), candidate.route.rpm, candidate.route.tpm)
        if self.health is None and take is None and priced is None:
            return Admitted()  # nothing of this route's is counted or held
        hold = new_id() if priced is not None else ""
        ask = Admission(
            route=name,
            token=token,
            health=self.health is not None,
            take=take,
            budgets=tuple((a.name, a.cap) for a in accounts) if priced is not None else (),
            hold=hold,
            amount=priced[0] if priced is not None else 0,
        )
        try:
            got: Admitting = yield StoreCall("admit", (ask,))
        except StoreDeadline:
            yield from self._undo(ask)
            raise
        except StoreUnavailableError:
            yield from self._undo(ask)  # what a lost reply may have taken, given back by id
            return None
        if self.health is not None and not (
            got.went_on and self.health.admits_as_is(got.health, at)
        ):
            if got.went_on:
                yield from self._undo(ask)
            return None
        slot = take[0] if take is not None else None
        if take is not None and got.window is not None and self.rates is not None:
            full = self.rates.verdict(candidate, got.window, take[0])
            if full is not None:
                return full
        held = None
        if priced is not None and self.ledger is not None:
            amount, price, bounded = priced
            held = Reservation(
                amount=amount, price=price, bounded=bounded, id=hold, accounts=tuple(a for a, _ in ask.budgets),
            )
            if not got.reserved:
                assert got.spend is not None
                refusal = self.ledger.refused(candidate, held, got.spend, accounts[got.refused])
                if isinstance(refusal, Skip):
                    if slot is not None and not ask.amount and self.rates is not None:
                        yield from self.rates.finish(name, token, None)
                    return refusal
        return Admitted(False, slot, held)

    def _accounts(self, candidate: Candidate) -> tuple[Account, ...]:
        """The budget accounts sending to `candidate` reserves against (none: no budget)."""
        return self.ledger.accounts_for(candidate) if self.ledger is not None else ()

    def _undo(self, ask: Admission) -> Steps[None]:
        """Give back by id what an admission may have taken (each write applies once)."""
        if ask.budgets and ask.amount and self.ledger is not None:
            yield StoreCall("release_all", (tuple(a for a, _ in ask.budgets), ask.hold), write=True)
        if ask.take is not None and self.rates is not None:
            yield from self.rates.finish(ask.route, ask.token, None)

    def _admit_in_turn(self, candidate: Candidate, at: float, token: str) -> Steps[Admitted | Skip]:
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
        if self.ledger is not None and self.facts is not None and self._accounts(candidate):
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
            charged, _ = yield from self.ledger.settle(held, usage, candidate.name)
            return charged
        return listed_cost(candidate, usage)

    def conclude(
        self, send: Send, usage: Usage | None, tokens: int | None
    ) -> Steps[Money | None]:
        """An answered attempt's settlement: its hold settled to what it cost, its rate
        slot kept at `tokens`, and a success for the breaker; one store operation where the
        store can. Returns what it was charged, as `settle` does."""
        candidate, held = send.candidate, held_of(send)
        if not self.at_once:
            cost = yield from self.settle(candidate, held, usage)
            yield from self.end_slot(candidate.id, send.token, send.slot_tokens, tokens)
            if self.health is not None:
                yield from self.health.succeeded(candidate.id, send.token, candidate.name)
            return cost
        charged, measured, bounded, money = 0, True, True, None
        if held is not None and self.ledger is not None:
            charged, measured, bounded = self.ledger.cost_of(held, usage, candidate.name)
            money = self.ledger.money(charged)
        else:
            money = yield from self.settle(candidate, None, usage)
        change, op, made = (
            self.health.succeeding(candidate.id, send.token, candidate.name)
            if self.health is not None
            else (None, "", None)
        )
        slot = send.slot_tokens is not None and self.rates is not None
        done = Settlement(
            route=candidate.id,
            token=send.token,
            budgets=held.accounts if held is not None and self.ledger else (),
            hold=held.id if held is not None else "",
            cost=charged,
            measured=measured,
            bounded=bounded,
            slot=slot,
            tokens=tokens,
            change=change,
            op=op,
        )
        yield StoreCall("conclude", (done,), write=True)
        if held is not None and self.ledger is not None:
            yield from self.ledger.crossed(held.accounts)
        if made is not None:
            made()
        return money

    def release(self, held: Reservation | None) -> Steps[None]:
        """Release the attempt's hold: nothing was billed."""
        if held is not None and self.ledger is not None:
            yield from self.ledger.release(held)


def held_of(send: Send) -> Reservation | None:
    """What `send` holds, marked unbounded when the checkpoint found the body as sent to
    have no finite bound and let it go (the budget then counts overshoot possible)."""
    held = send.held
    if held is not None and held.bounded and send.wire.unbounded:
        return replace(held, bounded=False)
    return held


def listed_cost(candidate: Candidate, usage: Usage | None) -> Money | None:
    """What `usage` costs at the route's own prices, when it is priced and usage came."""
    price, table = candidate.price, candidate.route.prices
    if price is None or usage is None or table is None:
        return None
    return Money(price.cost(usage), table.currency)


_AT_ONCE: dict[type, bool] = {}


def admits_at_once(store: Store) -> bool:
    """Whether `store` admits and settles an attempt in one operation each
    (`Store.admit`, `Store.conclude`)."""
    return _at_once(type(store))


def _at_once(kind: type) -> bool:
    """Whether stores of this kind admit and settle an attempt in one operation each
    (asked once per kind, not for every request's gate)."""
    found = _AT_ONCE.get(kind)
    if found is None:
        found = _AT_ONCE[kind] = hasattr(kind, "admit") and hasattr(kind, "conclude")
    return found


@dataclass(kw_only=True, frozen=True, slots=True)
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
