"""Budget, Spending and reservations: a cap that refuses a call before it is sent.

Before a call, its *worst case* is reserved atomically in the store; after it, the
reservation is replaced by the real cost (the response's usage priced by the route's own
table). The worst case is a bound the provider's bill cannot exceed, not an estimate:

- the prompt's share is `prompt_bound()` tokens at the highest rate a prompt token can
  have. The bound is the prompt's UTF-8 length in bytes: the tokenizers of the providers
  this package routes to (OpenAI's and Llama's byte-level BPE, Anthropic's, SentencePiece
  with byte fallback as used by Gemini and Mistral) never produce more tokens than the
  text has bytes. Each message adds 8 tokens of chat formatting (OpenAI documents 3-4),
  tools add 1,024 (Anthropic adds a tool-use system prompt of about 350), and each image
  adds `Budget.image_tokens` (50,000 by default: a 2048x2048 image costs OpenAI's
  gpt-4o-mini about 37,000);
- the reply's share is `max_tokens` at the highest rate a reply token can have.

So N concurrent calls that set `max_tokens` can never together exceed the cap. Without
`max_tokens` the reply is unbounded: the call may run when its prompt fits, and
`Spending.overshoot_possible` says the cap could have been passed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from .errors import ConfigError, StoreUnavailableError
from .journey import Check, Skip
from .prices import Money, Price, Usage
from .route import Route
from .store import SpendState, Steps, Store, StoreCall

__all__ = ["Budget", "Ledger", "Reservation", "RequestFacts", "Spending", "prompt_bound"]

PER_MESSAGE_TOKENS = 8
TOOLS_TOKENS = 1024
IMAGE_TOKENS = 50_000


class Budget:
    """A cap on what the router may spend, checked before anything is sent.

    `Budget("5.00", currency="USD", unpriced="refuse")`. A route is skipped, with a reason,
    when the budget is spent, when its worst case would overrun what is left, when it has
    no price (unless `unpriced="allow"`, in which case its calls run and are counted as
    unmeasured), or when its table is in another currency. The budget lives in the
    router's store; `name` tells budgets apart in a shared store.
    """

    __slots__ = ("cap", "image_tokens", "name", "unpriced")

    cap: Money
    unpriced: Literal["refuse", "allow"]
    image_tokens: int
    name: str

    def __init__(
        self,
        cap: str | int | Decimal | Money,
        currency: str = "USD",
        *,
        unpriced: Literal["refuse", "allow"] = "refuse",
        image_tokens: int = IMAGE_TOKENS,
        name: str = "budget",
    ) -> None:
        set_ = object.__setattr__
        set_(self, "cap", cap if isinstance(cap, Money) else Money.parse(cap, currency))
        if unpriced not in ("refuse", "allow"):
            raise ConfigError(f"Budget unpriced must be 'refuse' or 'allow', got {unpriced!r}")
        if isinstance(image_tokens, bool) or not isinstance(image_tokens, int) or image_tokens < 0:
            raise ConfigError(f"Budget image_tokens must be a token count, got {image_tokens!r}")
        set_(self, "unpriced", unpriced)
        set_(self, "image_tokens", image_tokens)
        set_(self, "name", name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Budget is immutable")

    def __repr__(self) -> str:
        return f"Budget({str(self.cap)!r}, unpriced={self.unpriced!r})"


@dataclass(frozen=True, slots=True, repr=False)
class Spending:
    """A budget's account: cap, spent, reserved (calls in flight), and what is left.

    `calls` counts settled calls; `unmeasured` those whose cost could not be read from
    usage (charged at their reservation); `is_exact` is True when every call was measured.
    `overshoot_possible` is True when some call ran without `max_tokens`, so its reply
    was unbounded and the cap could have been passed.
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

    def __str__(self) -> str:
        tail = "" if self.is_exact else f", {self.unmeasured} unmeasured"
        tail += ", overshoot possible (calls without max_tokens)" if self.overshoot_possible else ""
        return (
            f"spent {self.spent} of {self.cap} ({self.reserved} reserved, {self.left} left) "
            f"in {self.calls} calls{tail}"
        )

    def __repr__(self) -> str:
        return f"Spending({self})"

    def _repr_html_(self) -> str:
        return f"<p><b>Spending</b>: {self}</p>"


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What money decisions need to know about a request, measured once per request."""

    prompt_tokens: int
    prompt_bound: int
    max_tokens: int | None


@dataclass(frozen=True, slots=True)
class Reservation:
    """Money held for one attempt: `amount` micro-units, priced by `price`."""

    amount: int
    price: Price | None
    bounded: bool


def _bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, Mapping):
        return sum(_bytes(k) + _bytes(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_bytes(v) for v in value)
    if value is None or isinstance(value, bool | int | float):
        return len(str(value))
    return _bytes(getattr(value, "model_dump", lambda: str(value))())


def _images(messages: Sequence[Any]) -> int:
    count = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            count += sum(
                1
                for p in content
                if isinstance(p, Mapping)
                and (p.get("type") in ("image_url", "input_image", "image"))
            )
    return count


def prompt_bound(kwargs: Mapping[str, Any], image_tokens: int = IMAGE_TOKENS) -> int:
    """An upper bound on the prompt tokens any provider can bill for this call.

    See the module docstring for why each part holds.
    """
    messages = kwargs.get("messages") or []
    bound = sum(_bytes(m) + PER_MESSAGE_TOKENS for m in messages) + PER_MESSAGE_TOKENS
    if kwargs.get("tools") or kwargs.get("functions"):
        bound += _bytes(kwargs.get("tools") or kwargs.get("functions")) + TOOLS_TOKENS
    if kwargs.get("response_format") is not None:
        bound += _bytes(json.dumps(kwargs["response_format"], default=str))
    return bound + _images(messages) * image_tokens


class Ledger:
    """A budget bound to a store: admits routes by reserving, then settles or releases.

    `check`, `admit`, `settle` and `release` are `Steps` generators (see `store.py`): they
    yield store calls and do no I/O themselves.
    """

    def __init__(self, budget: Budget, store: Store) -> None:
        self.budget = budget
        self.store = store

    @property
    def currency(self) -> str:
        return self.budget.cap.currency

    def money(self, micros: int) -> Money:
        return Money(micros, self.currency)

    def _priced(self, route: Route, facts: RequestFacts) -> Skip | tuple[int, Price | None, bool]:
        """What the store is not needed for: the route's currency and price, and the
        amount to reserve with the price and whether it is bounded."""
        table = route.prices
        price = table.price_for(route.model) if table is not None else None
        if table is not None and table.currency != self.currency:
            return Skip(
                route.name,
                Check.BUDGET,
                f"priced in {table.currency}; the budget is in {self.currency}",
            )
        if price is None:
            if self.budget.unpriced == "refuse":
                where = "no price table" if table is None else f"no row in {table.name}"
                return Skip(
                    route.name,
                    Check.BUDGET,
                    f"unpriced ({where}); an unpriced route cannot be held to a cap",
                )
            # Allowed unpriced: nothing to reserve, the call is counted as unmeasured.
            return 0, None, False
        worst = price.worst_case(facts.prompt_bound, facts.max_tokens or 0)
        return worst, price, facts.max_tokens is not None

    def _refusal(self, route: Route, worst: int, state: SpendState) -> Skip | None:
        """Why a spend state cannot take `worst` more, or None when it can."""
        cap = self.budget.cap.micros
        if state.spent >= cap:
            return Skip(
                route.name,
                Check.BUDGET,
                f"budget spent: {self.money(state.spent)} of {self.budget.cap}",
            )
        left = cap - state.spent - state.reserved
        if worst > left:
            return Skip(
                route.name,
                Check.BUDGET,
                f"could overrun the budget: worst case {self.money(worst)}, "
                f"{self.money(max(left, 0))} left",
                {"worst_case": worst, "left": left},
            )
        return None

    def _unreachable(self, route: Route, error: StoreUnavailableError) -> Skip:
        # Fail closed: a cap that cannot be read cannot be kept, so nothing is sent.
        return Skip(route.name, Check.BUDGET, f"budget store unreachable: {error}")

    def check(
        self, route: Route, facts: RequestFacts
    ) -> Steps[Skip | tuple[int, Price | None, bool]]:
        """Whether the budget would admit the route now, without reserving anything.

        Returns a Skip, or the amount to reserve with the price and whether it is bounded.
        """
        verdict = self._priced(route, facts)
        if isinstance(verdict, Skip):
            return verdict
        try:
            state: SpendState = yield StoreCall("spend_state", (self.budget.name,))
        except StoreUnavailableError as error:
            return self._unreachable(route, error)
        return self._refusal(route, verdict[0], state) or verdict

    def admit(self, route: Route, facts: RequestFacts) -> Steps[Skip | Reservation]:
        """Reserve the route's worst case atomically, or say why the budget refuses it.

        The reservation is tried first, in one store call: the spend state is read only
        to explain a refusal (or to refuse an unpriced call once the budget is spent).
        """
        verdict = self._priced(route, facts)
        if isinstance(verdict, Skip):
            return verdict
        worst, price, bounded = verdict
        cap = self.budget.cap.micros
        try:
            if worst and (yield StoreCall("reserve", (self.budget.name, worst, cap))):
                return Reservation(worst, price, bounded)
            state: SpendState = yield StoreCall("spend_state", (self.budget.name,))
        except StoreUnavailableError as error:
            return self._unreachable(route, error)
        refusal = self._refusal(route, worst, state)
        if refusal is None and worst:
            # The store refused, yet it fits now: other calls settled in between. Still
            # refused, since the reservation is the only check that holds across processes.
            refusal = Skip(
                route.name,
                Check.BUDGET,
                f"could overrun the budget: worst case {self.money(worst)} did not fit "
                "beside the calls holding reservations when it was asked",
                {"worst_case": worst, "left": cap - state.spent - state.reserved},
            )
        return refusal or Reservation(worst, price, bounded)

    def settle(self, held: Reservation, usage: Usage | None) -> Steps[Money | None]:
        """Replace the reservation by the real cost; without usage, charge the reservation."""
        measured = usage is not None and held.price is not None
        cost = (
            held.price.cost(usage) if usage is not None and held.price is not None else held.amount
        )
        yield StoreCall(
            "settle",
            (self.budget.name, held.amount, cost),
            {"measured": measured, "bounded": held.bounded},
        )
        return self.money(cost) if measured else None

    def release(self, held: Reservation) -> Steps[None]:
        yield StoreCall("release", (self.budget.name, held.amount))

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
        )
