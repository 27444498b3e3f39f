"""Budget, Spending and reservations: a cap that refuses a call before it is sent.

Before a call, its *worst case* is reserved atomically in the store: the prompt's bound at
the highest rate a prompt token can have, plus the reply's bound at the highest rate a reply
token can have (see `policies.bounds` for why each bound holds, for every request shape LiteLLM
accepts). After the call the reservation is replaced by the real cost (the response's usage
priced by the route's own table). So concurrent calls whose bounds are finite can never
together pass the cap.

A call whose bound is not finite (no `max_tokens` and no known output limit for the model,
or a file part in the prompt) may run when what *can* be bounded fits, and
`Spending.overshoot_possible` then says the cap could have been passed; `Budget(strict=True)`
refuses such calls instead.

Every reservation carries an id, and the store applies its settle or release only while
that id is held, so a write replayed after a lost reply changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

from loguru import logger

from ..ground.errors import ConfigError, StoreUnavailableError
from ..ground.ids import new_id
from ..ground.money import Money, Usage
from ..ground.records import Check, Skip
from ..state.store import SpendState, Steps, Store, StoreCall
from .bounds import IMAGE_TOKENS, RequestFacts, reply_bound
from .prices import Price

if TYPE_CHECKING:
    from .candidate import Candidate

__all__ = ["Budget", "Ledger", "Reservation", "RequestFacts", "Spending"]


class Budget:
    """A cap on what the router may spend, checked before anything is sent.

    `Budget("5.00", currency="USD", unpriced="refuse")`. A route is skipped, with a reason,
    when the budget is spent, when its worst case would overrun what is left, when it has
    no price (unless `unpriced="allow"`, in which case its calls run and are counted as
    unmeasured), or when its table is in another currency. With `strict=True` a call whose
    worst case has no finite bound (no `max_tokens` and no known output limit, a file in
    the prompt, a tool the provider runs, no price at all, `unpriced="allow"` or not) is
    refused too, so the cap can never be passed. The budget lives in the
    router's store; `name` tells budgets apart in a shared store.

    Args:
        cap: The most the router may spend, exactly: a string (`"5.00"`), an int, a
            `Decimal` or a `Money`; never a float.
        currency: The cap's currency; a route priced in another is skipped.
        unpriced: `"refuse"` a route without a price (the default), or `"allow"` it,
            counted as unmeasured.
        strict: Refuse a call whose worst case has no finite bound.
        image_tokens: The tokens each image in the prompt counts for in a call's worst
            case (50,000 by default: a 2048x2048 image bills gpt-4o-mini about 37,000).
        name: Tells budgets apart in a shared store.

    Raises:
        ConfigError: a field is wrong (a float cap, a negative one, an unknown `unpriced`).
    """

    __slots__ = ("cap", "image_tokens", "name", "strict", "unpriced")

    cap: Money
    unpriced: Literal["refuse", "allow"]
    image_tokens: int
    name: str
    strict: bool

    def __init__(
        self,
        cap: str | int | Decimal | Money,
        currency: str = "USD",
        *,
        unpriced: Literal["refuse", "allow"] = "refuse",
        strict: bool = False,
        image_tokens: int = IMAGE_TOKENS,
        name: str = "budget",
    ) -> None:
        set_ = object.__setattr__
        set_(self, "cap", cap if isinstance(cap, Money) else Money.parse(cap, currency, where="Budget cap"))
        if unpriced not in ("refuse", "allow"):
            raise ConfigError(f"Budget unpriced must be 'refuse' or 'allow', got {unpriced!r}")
        if isinstance(image_tokens, bool) or not isinstance(image_tokens, int) or image_tokens < 0:
            raise ConfigError(f"Budget image_tokens must be a token count, got {image_tokens!r}")
        if not isinstance(strict, bool):
            raise ConfigError(f"Budget strict must be True or False, got {strict!r}")
        set_(self, "unpriced", unpriced)
        set_(self, "strict", strict)
        set_(self, "image_tokens", image_tokens)
        set_(self, "name", name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Budget is immutable")

    def __repr__(self) -> str:
        strict = ", strict=True" if self.strict else ""
        return f"Budget({str(self.cap)!r}, unpriced={self.unpriced!r}{strict})"


@dataclass(kw_only=True, frozen=True, slots=True, repr=False)
class Spending:
    """A budget's account: cap, spent, reserved (calls in flight), and what is left.

    `calls` counts settled calls; `in_flight` the calls holding a reservation now;
    `unmeasured` the calls whose cost could not be read from usage (charged at their
    reservation); `is_exact` is True when every call was measured. `overshoot_possible` is
    True when some call ran with a worst case that had no finite bound, or reported usage
    costing more than its worst case, so the cap could have been passed.
    """

    cap: Money
    spent: Money
    reserved: Money
    left: Money
    currency: str
    calls: int
    unmeasured: int
    is_exact: bool
    overshoot_possible: bool
    in_flight: int = 0

    def __str__(self) -> str:
        tail = "" if self.is_exact else f", {self.unmeasured} unmeasured"
        tail += ", overshoot possible (calls beyond a finite bound)" if self.overshoot_possible else ""
        held = f" by {self.in_flight} in flight" if self.in_flight else ""
        return (
            f"spent {self.spent} of {self.cap} ({self.reserved} reserved{held}, {self.left} "
            f"left) in {self.calls} calls{tail}"
        )

    def _repr_html_(self) -> str:
        """A notebook's view: the account as a one-row table."""
        cells = (
            str(self.cap), str(self.spent), str(self.reserved), str(self.left), str(self.calls),
            str(self.in_flight), "exact" if self.is_exact else f"{self.unmeasured} unmeasured",
            "possible" if self.overshoot_possible else "no",
        )
        head = ("cap", "spent", "reserved", "left", "calls", "in flight", "measured", "overshoot")
        escaped = [c.replace("&", "&amp;").replace("<", "&lt;") for c in cells]
        return (
            "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr><tr>"
            + "".join(f"<td>{c}</td>" for c in escaped) + "</tr></table>"
        )

    def __repr__(self) -> str:
        return f"Spending({self})"


@dataclass(kw_only=True, frozen=True, slots=True)
class Reservation:
    """Money held for one attempt: `amount` micro-units under the store id `id`, priced by
    `price`; `bounded` is False when the worst case had no finite bound."""

    amount: int
    price: Price | None
    bounded: bool
    id: str = ""


class Ledger:
    """A budget bound to a store: admits routes by reserving, then settles or releases.

    `check`, `admit`, `settle` and `release` are `Steps` generators (see `state.store`): they
    yield store calls and do no I/O themselves.
    """

    def __init__(self, budget: Budget, store: Store) -> None:
        self.budget = budget
        self.store = store
        # Routes already warned about usage above their worst case: once each, then debug.
        self._overran: set[str] = set()

    @property
    def currency(self) -> str:
        return self.budget.cap.currency

    def money(self, micros: int) -> Money:
        return Money(micros, self.currency)

    def _skip(self, candidate: Candidate, reason: str, **detail: int | bool) -> Skip:
        return Skip(candidate.name, Check.BUDGET, reason, detail=detail)

    def _priced(
        self, candidate: Candidate, facts: RequestFacts
    ) -> Skip | tuple[int, Price | None, bool]:
        """What the store is not needed for: the route's currency and price, and the
        amount to reserve with the price and whether it is bounded."""
        table = candidate.route.prices
        price = candidate.price
        if table is not None and table.currency != self.currency:
            return self._skip(
                candidate, f"priced in {table.currency}; the budget is in {self.currency}"
            )
        if price is None:
            if self.budget.unpriced == "refuse":
                where = "no price table" if table is None else f"no row in {table.name}"
                return self._skip(
                    candidate,
                    f"unpriced ({where}); an unpriced route cannot be held to a cap",
                )
            if self.budget.strict:
                # A strict budget refuses every call it cannot bound, and a call with no
                # price has no bound at all, whatever unpriced= says.
                return self._skip(
                    candidate,
                    "unpriced under a strict budget: its cost cannot be bounded; give the "
                    "route a price (Price(\"0\", \"0\") for a free local model) or drop strict",
                )
            # Allowed unpriced: nothing to reserve, the call is counted as unmeasured.
            return 0, None, False
        reply = reply_bound(facts, candidate.reply_limit, candidate.choices, candidate.sent_cap)
        bounded = reply is not None and facts.prompt_bound is not None
        if not bounded and self.budget.strict:
            why = (
                (facts.unbounded or "its prompt has no bound")
                if facts.prompt_bound is None
                else "the call sets no max_tokens and the model's output limit is unknown"
            )
            fix = (
                "leave that out, or use a budget without strict=True (the call then counts "
                "as overshoot_possible)"
                if facts.prompt_bound is None
                else "set max_tokens, or declare the route's output_limit"
            )
            return self._skip(
                candidate, f"no finite worst case under a strict budget: {why}; {fix}"
            )
        worst = price.worst_case(facts.prompt_bound or 0, reply or 0)
        return worst, price, bounded

    def _refusal(self, candidate: Candidate, worst: int, state: SpendState) -> Skip | None:
        """Why a spend state cannot take `worst` more, or None when it can."""
        cap = self.budget.cap.micros
        if state.spent >= cap:
            return self._skip(
                candidate, f"budget spent: {self.money(state.spent)} of {self.budget.cap}"
            )
        left = cap - state.spent - state.reserved
        if worst <= left:
            return None
        reason = (
            f"could overrun the budget: worst case {self.money(worst)}, "
            f"{self.money(max(left, 0))} left of {self.budget.cap} "
            f"({self.money(state.spent)} spent"
        )
        may_fit = state.reserved > 0 and worst <= cap - state.spent
        if state.reserved > 0:
            calls = f"{state.holding} call{'s' * (state.holding != 1)}" if state.holding else "calls"
            reason += f", {self.money(state.reserved)} held by {calls} in flight"
            if may_fit:
                reason += "; a retry may fit once they settle"
        reason += ")"
        return self._skip(candidate, reason, worst_case=worst, left=left, may_fit=may_fit)

    def _unreachable(self, candidate: Candidate, error: StoreUnavailableError) -> Skip:
        # Fail closed: a cap that cannot be read cannot be kept, so nothing is sent.
        return self._skip(candidate, f"budget store unreachable: {error}", store_unreachable=True)

    def check(
        self, candidate: Candidate, facts: RequestFacts
    ) -> Steps[Skip | tuple[int, Price | None, bool]]:
        """Whether the budget would admit the route now, without reserving anything.

        Returns a Skip, or the amount to reserve with the price and whether it is bounded.
        """
        verdict = self._priced(candidate, facts)
        if isinstance(verdict, Skip):
            return verdict
        try:
            state: SpendState = yield StoreCall("spend_state", (self.budget.name,))
        except StoreUnavailableError as error:
            return self._unreachable(candidate, error)
        return self._refusal(candidate, verdict[0], state) or verdict

    def admit(self, candidate: Candidate, facts: RequestFacts) -> Steps[Skip | Reservation]:
        """Reserve the route's worst case atomically, or say why the budget refuses it.

        The reservation is tried first, in one store call: the spend state is read only
        to explain a refusal (or to refuse an unpriced call once the budget is spent). A
        reservation whose outcome is unknown (the store's reply was lost) is released by
        id, which the store applies once whenever it is reached, so it is never left held.
        """
        verdict = self._priced(candidate, facts)
        if isinstance(verdict, Skip):
            return verdict
        worst, price, bounded = verdict
        cap = self.budget.cap.micros
        hold = new_id()
        try:
            if worst and (yield StoreCall("reserve", (self.budget.name, hold, worst, cap))):
                return Reservation(amount=worst, price=price, bounded=bounded, id=hold)
            state: SpendState = yield StoreCall("spend_state", (self.budget.name,))
        except StoreUnavailableError as error:
            if worst:
                yield from self.release(Reservation(amount=worst, price=price, bounded=bounded, id=hold))
            return self._unreachable(candidate, error)
        return self.refused(candidate, Reservation(amount=worst, price=price, bounded=bounded, id=hold), state)

    def priced(
        self, candidate: Candidate, facts: RequestFacts
    ) -> Skip | tuple[int, Price | None, bool]:
        """What admitting the route needs without the store: a Skip (its currency, no
        price, no finite worst case under a strict budget), or the amount to reserve with
        the price and whether it is bounded."""
        return self._priced(candidate, facts)

    def refused(self, candidate: Candidate, held: Reservation, state: SpendState) -> Skip | Reservation:
        """The verdict once the store did not hold `held` (or, with an amount of 0, was only
        read): the skip that says why, with `state` behind the reason, or `held` itself for
        an unpriced call the budget still lets through."""
        worst, cap = held.amount, self.budget.cap.micros
        refusal = self._refusal(candidate, worst, state)
        if refusal is None and worst:
            # The store refused, yet it fits now: other calls settled in between. Still
            # refused, since the reservation is the only check that holds across processes.
            refusal = self._skip(
                candidate,
                f"could overrun the budget: worst case {self.money(worst)} did not fit "
                "beside the calls holding reservations when it was asked; a retry may fit",
                worst_case=worst,
                left=cap - state.spent - state.reserved,
                may_fit=True,
            )
        return refusal or held

    def settle(
        self, held: Reservation, usage: Usage | None, route: str = ""
    ) -> Steps[tuple[Money, bool]]:
        """Replace the reservation by the real cost; without usage, charge the reservation.

        Returns what was charged and whether it was measured from usage.
        """
        cost, measured, bounded = self.cost_of(held, usage, route)
        yield StoreCall(
            "settle",
            (self.budget.name, held.id, cost),
            {"measured": measured, "bounded": bounded},
            write=True,
        )
        return self.money(cost), measured

    def cost_of(
        self, held: Reservation, usage: Usage | None, route: str = ""
    ) -> tuple[int, bool, bool]:
        """What settling `held` charges, in micro-units; whether usage measured it (no
        usage: the reservation is charged); and whether the charge kept to the worst case
        it was admitted on.

        A provider can report more than the worst case (a prompt bigger than the bytes
        sent, a price table that is not the provider's): what it reported is what it
        billed, so it is charged in full, never cut to the reservation; the call then
        counts as unbounded, so `Spending.overshoot_possible` says the cap could have
        been passed, and a warning names the route.
        """
        if usage is None or held.price is None:
            return held.amount, False, held.bounded
        cost = held.price.cost(usage)
        if not held.bounded or cost <= held.amount:
            return cost, True, held.bounded
        (logger.debug if route in self._overran else logger.warning)(
            "policy_router: {} reported usage ({} prompt, {} completion tokens) costing {}, "
            "above the {} worst case its call was admitted on; charged in full, so the "
            "budget may pass its cap (Spending.overshoot_possible). Check that the route's "
            "price table and model are the provider's.",
            route or "a route", usage.prompt, usage.completion,
            self.money(cost), self.money(held.amount),
        )
        self._overran.add(route)
        return cost, True, False

    def release(self, held: Reservation) -> Steps[None]:
        yield StoreCall("release", (self.budget.name, held.id), write=True)

    def spending(self) -> Spending:
        s = self.store.spend_state(self.budget.name)
        cap = self.budget.cap
        return Spending(
            cap=cap,
            spent=self.money(s.spent),
            reserved=self.money(s.reserved),
            left=self.money(max(cap.micros - s.spent - s.reserved, 0)),
            currency=self.currency,
            calls=s.calls,
            unmeasured=s.unmeasured,
            is_exact=s.unmeasured == 0,
            overshoot_possible=s.unbounded > 0,
            in_flight=s.holding,
        )
