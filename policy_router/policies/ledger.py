"""One call's budgets bound to the store: the accounts it reserves against, all at once.

A call falls under every budget whose scope it is in (the router's, its user's, each of its
tags', its key's and team's, and for each route the route's and its provider's): each such
scope, in the period it is in now, is an `Account`. Before a route is sent the request, its
worst case is reserved against all of that route's accounts in one store operation, or
against none, so no concurrent call can take a share one account granted and another then
refused; the store says which account refused, and the skip names it: its scope, its cap,
what is left, and when its period resets. After the call the reservation is replaced by the
real cost in the same accounts, those of the period in which it was reserved.

`Ledger`'s steps are `Steps` generators (see `state.store`): they yield store calls and do no
I/O themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from loguru import logger

from ..ground.errors import StoreUnavailableError
from ..ground.ids import new_id
from ..ground.money import Money, Usage
from ..ground.records import Check, Skip
from ..state.store import SpendState, Steps, Store, StoreCall
from .accounts import Account, BudgetThreshold, Capped, Reservation, Spending
from .bounds import RequestFacts, reply_bound
from .prices import Price

if TYPE_CHECKING:
    from .candidate import Candidate


RouteAccounts = Callable[["Candidate"], tuple[Account, ...]]


class Ledger:
    """A call's budgets bound to a store: admits routes by reserving against all of their
    accounts at once, then settles or releases them.

    `Ledger(budget, store)` is the router's one budget, never resetting (what a router
    with a `budget=` and nothing else has); the router makes a ledger for each call with
    the accounts the call falls under (`accounts`) and a route's own (`routes`).
    """

    def __init__(
        self,
        budget: Capped | None,
        store: Store,
        *,
        accounts: Sequence[Account] | None = None,
        routes: RouteAccounts | None = None,
        emit: Callable[[object], None] | None = None,
        refresh: Callable[[], Steps[tuple[tuple[Account, ...], RouteAccounts | None] | None]] | None = None,
    ) -> None:
        if accounts is None:
            assert budget is not None
            accounts = (Account.of(budget),)
        self.accounts = tuple(accounts)
        self.budget: Capped = budget if budget is not None else self.accounts[0].budget
        self.store = store
        self._routes = routes
        self._emit = emit
        self._refresh = refresh
        self._of: dict[str, tuple[Account, ...]] = {}
        # Routes already warned about usage above their worst case: once each, then debug.
        self._overran: set[str] = set()

    def ready(self) -> Steps[None]:
        """Read the caps set live again, when the router's are a second old, and take the
        accounts they give (once per call: the first admission's first step)."""
        if self._refresh is None:
            return
        refresh, self._refresh = self._refresh, None
        found = yield from refresh()
        if found is not None:
            self.accounts, self._routes = found
            self._of.clear()

    @property
    def currency(self) -> str:
        return self.budget.cap.currency

    @property
    def strict(self) -> bool:
        """Whether any budget of the call refuses a worst case with no finite bound."""
        return any(a.budget.strict for a in self.accounts)

    def money(self, micros: int) -> Money:
        return Money(micros, self.currency)

    def accounts_for(self, candidate: Candidate) -> tuple[Account, ...]:
        """Every account sending to `candidate` reserves against: the call's, the route's."""
        found = self._of.get(candidate.id)
        if found is None:
            own = self._routes(candidate) if self._routes is not None else ()
            found = self._of[candidate.id] = self.accounts + own
        return found

    def _skip(self, candidate: Candidate, reason: str, **detail: Any) -> Skip:
        return Skip(candidate.name, Check.BUDGET, reason, detail=detail)

    def _priced(
        self, candidate: Candidate, facts: RequestFacts
    ) -> Skip | tuple[int, Price | None, bool]:
        """What the store is not needed for: the route's currency and price, and the
        amount to reserve with the price and whether it is bounded."""
        budgets = [a.budget for a in self.accounts_for(candidate)]
        table = candidate.route.prices
        price = candidate.price
        if table is not None and table.currency != self.currency:
            return self._skip(
                candidate, f"priced in {table.currency}; the budget is in {self.currency}"
            )
        strict = any(b.strict for b in budgets)
        if price is None:
            if any(b.unpriced == "refuse" for b in budgets):
                where = "no price table" if table is None else f"no row in {table.name}"
                return self._skip(
                    candidate,
                    f"unpriced ({where}); an unpriced route cannot be held to a cap",
                )
            if strict:
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
        if not bounded and strict:
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

    def _refusal(
        self, candidate: Candidate, worst: int, state: SpendState, account: Account | None = None
    ) -> Skip | None:
        """Why an account's spend state cannot take `worst` more, or None when it can."""
        account = account or self.accounts_for(candidate)[0]
        cap = account.cap
        named, detail = _named(account)
        if state.spent >= cap:
            return self._skip(
                candidate, f"budget{named} spent: {self.money(state.spent)} of {account.budget.cap}",
                **({"worst_case": worst, "left": 0, "may_fit": False, **detail} if detail else {}),
            )
        left = cap - state.spent - state.reserved
        if worst <= left:
            return None
        reason = (
            f"could overrun the budget{named}: worst case {self.money(worst)}, "
            f"{self.money(max(left, 0))} left of {account.budget.cap} "
            f"({self.money(state.spent)} spent"
        )
        may_fit = state.reserved > 0 and worst <= cap - state.spent
        if state.reserved > 0:
            calls = f"{state.holding} call{'s' * (state.holding != 1)}" if state.holding else "calls"
            reason += f", {self.money(state.reserved)} held by {calls} in flight"
            if may_fit:
                reason += "; a retry may fit once they settle"
        reason += ")"
        return self._skip(candidate, reason, worst_case=worst, left=left, may_fit=may_fit, **detail)

    def _unreachable(self, candidate: Candidate, error: StoreUnavailableError) -> Skip:
        # Fail closed: a cap that cannot be read cannot be kept, so nothing is sent.
        return self._skip(candidate, f"budget store unreachable: {error}", store_unreachable=True)

    def check(
        self, candidate: Candidate, facts: RequestFacts
    ) -> Steps[Skip | tuple[int, Price | None, bool]]:
        """Whether the budgets would admit the route now, without reserving anything.

        Returns a Skip, or the amount to reserve with the price and whether it is bounded.
        """
        verdict = self._priced(candidate, facts)
        if isinstance(verdict, Skip):
            return verdict
        try:
            for account in self.accounts_for(candidate):
                state: SpendState = yield StoreCall("spend_state", (account.name,))
                refusal = self._refusal(candidate, verdict[0], state, account)
                if refusal is not None:
                    return refusal
        except StoreUnavailableError as error:
            return self._unreachable(candidate, error)
        return verdict

    def admit(self, candidate: Candidate, facts: RequestFacts) -> Steps[Skip | Reservation]:
        """Reserve the route's worst case in every one of its accounts atomically, or say
        why the budgets refuse it.

        The reservation is tried first, in one store call: an account's spend state is read
        only to explain a refusal (or to refuse an unpriced call once a budget is spent). A
        reservation whose outcome is unknown (the store's reply was lost) is released by
        id, which the store applies once whenever it is reached, so it is never left held.
        """
        verdict = self._priced(candidate, facts)
        if isinstance(verdict, Skip):
            return verdict
        worst, price, bounded = verdict
        accounts = self.accounts_for(candidate)
        held = self.held(worst, price, bounded, accounts)
        try:
            if worst:
                refused = yield StoreCall("reserve_all", (_caps(accounts), held.id, worst))
                if refused < 0:
                    return held
            else:
                refused = 0
            state: SpendState = yield StoreCall("spend_state", (accounts[refused].name,))
        except StoreUnavailableError as error:
            if worst:
                yield from self.release(held)
            return self._unreachable(candidate, error)
        return self.refused(candidate, held, state, accounts[refused])

    def held(
        self, worst: int, price: Price | None, bounded: bool, accounts: Sequence[Account]
    ) -> Reservation:
        """The reservation of `worst` in `accounts`, under a new id."""
        return Reservation(
            amount=worst, price=price, bounded=bounded, id=new_id(),
            accounts=tuple(a.name for a in accounts),
        )

    def priced(
        self, candidate: Candidate, facts: RequestFacts
    ) -> Skip | tuple[int, Price | None, bool]:
        """What admitting the route needs without the store: a Skip (its currency, no
        price, no finite worst case under a strict budget), or the amount to reserve with
        the price and whether it is bounded."""
        return self._priced(candidate, facts)

    def refused(
        self, candidate: Candidate, held: Reservation, state: SpendState, account: Account | None = None
    ) -> Skip | Reservation:
        """The verdict once the store did not hold `held` in `account` (or, with an amount of
        0, was only read): the skip that says why, with `state` behind the reason, or `held`
        itself for an unpriced call the budgets still let through."""
        account = account or self.accounts_for(candidate)[0]
        worst = held.amount
        refusal = self._refusal(candidate, worst, state, account)
        if refusal is None and worst:
            # The store refused, yet it fits now: other calls settled in between. Still
            # refused, since the reservation is the only check that holds across processes.
            named, detail = _named(account)
            refusal = self._skip(
                candidate,
                f"could overrun the budget{named}: worst case {self.money(worst)} did not fit "
                "beside the calls holding reservations when it was asked; a retry may fit",
                worst_case=worst,
                left=account.cap - state.spent - state.reserved,
                may_fit=True,
                **detail,
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
            "settle_all",
            (held.accounts, held.id, cost),
            {"measured": measured, "bounded": bounded},
            write=True,
        )
        yield from self.crossed(held.accounts)
        return self.money(cost), measured

    def crossed(self, names: Sequence[str]) -> Steps[None]:
        """Tell observers of each threshold (`Budget.warn_at`) an account's spending has
        crossed, once per threshold, scope and period across the store's processes."""
        if self._emit is None:
            return
        for account in self.accounts_with(names):
            if not account.budget.warn_at:
                continue
            try:
                state: SpendState = yield StoreCall("spend_state", (account.name,))
                for fraction in account.budget.warn_at:
                    if state.spent < fraction * account.cap:
                        break
                    if (yield StoreCall("claim", (f"{account.name}#warn{fraction:g}", _KEEP_CLAIM))):
                        span = account.span
                        self._emit(BudgetThreshold(
                            scope=account.scope, fraction=fraction, spent=self.money(state.spent),
                            cap=account.budget.cap,
                            period=str(account.budget.period) if account.budget.period else None,
                            resets_at=span.resets_at if span is not None else None,
                        ))
            except StoreUnavailableError:
                return  # told when the store is next read past the threshold

    def accounts_with(self, names: Sequence[str]) -> list[Account]:
        """The accounts of this call named `names` (a reservation's)."""
        known = {a.name: a for a in self.accounts}
        for accounts in self._of.values():
            known.update((a.name, a) for a in accounts)
        return [known[n] for n in names if n in known]

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
        yield StoreCall("release_all", (held.accounts, held.id), write=True)

    def spending(self) -> Spending:
        """The first account's spending (the router's own budget's, for `Ledger(budget, store)`)."""
        account = self.accounts[0]
        return account.spending(self.store.spend_state(account.name))


_KEEP_CLAIM = 400 * 24 * 3600.0
"""How long a threshold's claim is kept: past any period's end (a period's account names
its span, so the next period's claims are new)."""


def _caps(accounts: Sequence[Account]) -> tuple[tuple[str, int], ...]:
    return tuple((a.name, a.cap) for a in accounts)


def _named(account: Account) -> tuple[str, dict[str, Any]]:
    """How a refusal names the account (nothing more for the router's own, never-resetting
    budget, as it always read), and its scope, cap and reset in the skip's detail."""
    span = account.span
    period = account.budget.period
    if account.scope == "all" and period is None:
        return "", {}
    detail: dict[str, Any] = {
        "scope": account.scope,
        "cap": account.cap,
        "resets_at": span.end if span is not None else None,
    }
    named = f" {account.scope}" if account.scope != "all" else ""
    if period is not None and span is not None:
        named += f" ({period}, resets {span.resets_at:%Y-%m-%d %H:%M} UTC)"
    return named, detail
