"""The records of budget accounts: what one scope has spent in one period (`Spending`),
the account a call reserves against (`Account`), and the threshold told when its spending
crosses a fraction of the cap (`BudgetThreshold`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from ..ground.money import Money
from ..state.store import SpendState
from .periods import Span

if TYPE_CHECKING:
    from .periods import Period
    from .prices import Price

__all__ = ["Account", "BudgetThreshold", "Capped", "Reservation", "Spending"]


class Capped(Protocol):
    """What a ledger reads of a budget (`policies.budget.Budget`, which imports this module)."""

    @property
    def cap(self) -> Money: ...
    @property
    def unpriced(self) -> str: ...
    @property
    def strict(self) -> bool: ...
    @property
    def name(self) -> str: ...
    @property
    def period(self) -> Period | None: ...
    @property
    def warn_at(self) -> tuple[float, ...]: ...


@dataclass(kw_only=True, frozen=True, slots=True, repr=False)
class Spending:
    """A budget's account: cap, spent, reserved (calls in flight), and what is left.

    `calls` counts settled calls; `in_flight` the calls holding a reservation now;
    `unmeasured` the calls whose cost could not be read from usage (charged at their
    reservation); `is_exact` is True when every call was measured. `overshoot_possible` is
    True when some call ran with a worst case that had no finite bound, or reported usage
    costing more than its worst case, so the cap could have been passed. `scope` is what
    the account covers (`"all"`, `"user:u-42"`, ...); with a `period`, `period_start` and
    `resets_at` bound the period it counts (timezone-aware datetimes; None without one).
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
    scope: str = "all"
    period: str | None = None
    period_start: datetime | None = None
    resets_at: datetime | None = None

    def __str__(self) -> str:
        tail = "" if self.is_exact else f", {self.unmeasured} unmeasured"
        tail += ", overshoot possible (calls beyond a finite bound)" if self.overshoot_possible else ""
        held = f" by {self.in_flight} in flight" if self.in_flight else ""
        head = "" if self.scope == "all" and self.period is None else f"{self.scope}{_when(self)}: "
        return (
            f"{head}spent {self.spent} of {self.cap} ({self.reserved} reserved{held}, {self.left} "
            f"left) in {self.calls} calls{tail}"
        )

    def _repr_html_(self) -> str:
        """A notebook's view: the account as a one-row table."""
        cells: tuple[str, ...] = (
            str(self.cap), str(self.spent), str(self.reserved), str(self.left), str(self.calls),
            str(self.in_flight), "exact" if self.is_exact else f"{self.unmeasured} unmeasured",
            "possible" if self.overshoot_possible else "no",
        )
        head: tuple[str, ...] = ("cap", "spent", "reserved", "left", "calls", "in flight", "measured", "overshoot")
        if self.scope != "all" or self.period is not None:
            cells = (self.scope, self.period or "", str(self.resets_at or ""), *cells)
            head = ("scope", "period", "resets at", *head)
        escaped = [c.replace("&", "&amp;").replace("<", "&lt;") for c in cells]
        return (
            "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr><tr>"
            + "".join(f"<td>{c}</td>" for c in escaped) + "</tr></table>"
        )

    def __repr__(self) -> str:
        return f"Spending({self})"


def _when(spending: Spending) -> str:
    if spending.period is None or spending.resets_at is None:
        return ""
    return f" ({spending.period}, resets {spending.resets_at:%Y-%m-%d %H:%M} UTC)"


@dataclass(kw_only=True, frozen=True, slots=True)
class BudgetThreshold:
    """Told to observers once per threshold, scope and period (across every process
    sharing the store): spending in `scope` crossed `fraction` of its `cap`. Carries no key
    and no prompt: the scope names a key by its name, a user by the id the caller gave."""

    scope: str
    fraction: float
    spent: Money
    cap: Money
    period: str | None = None
    resets_at: datetime | None = None


@dataclass(kw_only=True, frozen=True, slots=True)
class Account:
    """One scope's account in one period: what a call reserves against. `name` is the
    store's key for it (the scope, and the period's span when it has one)."""

    scope: str
    name: str
    budget: Capped
    span: Span | None = None

    @property
    def cap(self) -> int:
        return self.budget.cap.micros

    @classmethod
    def of(cls, budget: Capped, scope: str = "all", span: Span | None = None) -> Account:
        """The account of `budget` for `scope` in `span`: the router's own budget is kept
        under its `name` (as it always was), any other under its scope."""
        base = budget.name if scope == "all" else scope
        return cls(scope=scope, name=base if span is None else f"{base}@{span.name}", budget=budget, span=span)

    def spending(self, state: SpendState) -> Spending:
        cap = self.budget.cap
        span, period = self.span, self.budget.period
        return Spending(
            cap=cap,
            spent=Money(state.spent, cap.currency),
            reserved=Money(state.reserved, cap.currency),
            left=Money(max(cap.micros - state.spent - state.reserved, 0), cap.currency),
            currency=cap.currency,
            calls=state.calls,
            unmeasured=state.unmeasured,
            is_exact=state.unmeasured == 0,
            overshoot_possible=state.unbounded > 0,
            in_flight=state.holding,
            scope=self.scope,
            period=str(period) if period is not None else None,
            period_start=span.started if span is not None else None,
            resets_at=span.resets_at if span is not None else None,
        )


@dataclass(kw_only=True, frozen=True, slots=True)
class Reservation:
    """Money held for one attempt: `amount` micro-units under the store id `id`, in every
    one of `accounts`, priced by `price`; `bounded` is False when the worst case had no
    finite bound."""

    amount: int
    price: Price | None
    bounded: bool
    id: str = ""
    accounts: tuple[str, ...] = ("budget",)
