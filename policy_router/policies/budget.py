"""Budget: a cap that refuses a call before it is sent, over a period and a scope.

Before a call, its *worst case* is reserved atomically in the store: the prompt's bound at
the highest rate a prompt token can have, plus the reply's bound at the highest rate a reply
token can have (see `policies.bounds` for why each bound holds, for every request shape LiteLLM
accepts). After the call the reservation is replaced by the real cost (the response's usage
priced by the route's own table). So concurrent calls whose bounds are finite can never
together pass the cap.

A budget covers a scope: every call of the router (the default), each end user (`per=
"user"`, the call's `user`), a tag or each tag (`tag="team:search"`, `per="tag"`: LiteLLM's
`metadata={"tags": [...]}`), a server's key or team (`key=`, `team=`, `per=`), a route
(`route="openai-prod"`) or a provider (`provider="openai"`). A call reserves its worst case
against every scope it falls under in one atomic step, or in none (`policies.ledger`); a
route's or a provider's budget that cannot take it skips that route, with a reason, and the
call goes on to the next. A budget may reset every day, week or month, or every fixed
window (`policies.periods`).

A call whose bound is not finite (no `max_tokens` and no known output limit for the model,
or a file part in the prompt) may run when what *can* be bounded fits, and
`Spending.overshoot_possible` then says the cap could have been passed; `Budget(strict=True)`
refuses such calls instead.

Every reservation carries an id, and the store applies its settle or release only while
that id is held, so a write replayed after a lost reply changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Literal

from ..ground.errors import ConfigError
from ..ground.money import Money
from .accounts import Account, Reservation, Spending
from .bounds import IMAGE_TOKENS, RequestFacts
from .ledger import Ledger
from .periods import Period

__all__ = ["SCOPE_KINDS", "Account", "Budget", "Ledger", "Reservation", "RequestFacts", "Spending"]

SCOPE_KINDS = ("user", "tag", "key", "team", "route", "provider")
"""What a budget can cover besides every call: `per=` one of these, or one of them named."""

_PER = ("user", "tag", "key", "team")


class Budget:
    """A cap on what calls may spend, checked before anything is sent.

    `Budget("5.00", currency="USD", unpriced="refuse")`. A route is skipped, with a reason,
    when the budget is spent, when its worst case would overrun what is left, when it has
    no price (unless `unpriced="allow"`, in which case its calls run and are counted as
    unmeasured), or when its table is in another currency. With `strict=True` a call whose
    worst case has no finite bound (no `max_tokens` and no known output limit, a file in
    the prompt, a tool the provider runs, no price at all, `unpriced="allow"` or not) is
    refused too, so the cap can never be passed. The budget lives in the
    router's store; `name` tells budgets apart in a shared store.

    Args:
        cap: The most that may be spent (in each period, for each scope it covers), exactly:
            a string (`"5.00"`), an int, a `Decimal` or a `Money`; never a float.
        currency: The cap's currency; a route priced in another is skipped.
        unpriced: `"refuse"` a route without a price (the default), or `"allow"` it,
            counted as unmeasured.
        strict: Refuse a call whose worst case has no finite bound.
        image_tokens: The tokens each image in the prompt counts for in a call's worst
            case (50,000 by default: a 2048x2048 image bills gpt-4o-mini about 37,000).
        name: Tells the router's own budgets apart in a shared store (a scoped budget is
            kept under its scope).
        period: When spending starts again at zero: `"day"`, `"week"` (ISO, Monday 00:00),
            `"month"` (calendar), in UTC unless `tz`; a `timedelta` or a number of seconds
            (a fixed window aligned to the Unix epoch); None (the default): never.
        tz: The zone of a day, week or month (`"Europe/Oslo"`, read with `zoneinfo`).
        per: `"user"`, `"tag"`, `"key"` or `"team"`: each distinct one its own cap. A call
            with no such thing (no `user`, say) is not under this budget.
        user: That one end user (the call's `user`), all its calls together.
        tag: That one tag, every call carrying it together.
        key: That one server key's calls (the router's `scope={"key": ...}`).
        team: That one server team's calls (`scope={"team": ...}`).
        route: A route's id or name: once it cannot take a call's worst case the route is
            skipped, with a reason, and the call goes on to the next route.
        provider: A provider (`"openai"`), over all its routes, as `route` does.
        warn_at: Fractions of the cap in (0, 1]: crossing one emits a `BudgetThreshold`
            event once per threshold, scope and period, across every process sharing the
            store.

    Raises:
        ConfigError: a field is wrong (a float cap, a negative one, an unknown `unpriced`,
            period, zone or `per`, two scopes at once, a `warn_at` outside (0, 1]).
    """

    __slots__ = (
        "cap", "image_tokens", "kind", "name", "period", "strict", "unpriced", "value", "warn_at",
    )

    cap: Money
    unpriced: Literal["refuse", "allow"]
    image_tokens: int
    name: str
    strict: bool
    period: Period | None
    kind: str
    """What the budget covers: "all", or one of `SCOPE_KINDS`."""
    value: str | None
    """The one it covers (`"team:search"` for `tag="team:search"`); None: each (`per=`)."""
    warn_at: tuple[float, ...]

    def __init__(
        self,
        cap: str | int | Decimal | Money,
        currency: str = "USD",
        *,
        unpriced: Literal["refuse", "allow"] = "refuse",
        strict: bool = False,
        image_tokens: int = IMAGE_TOKENS,
        name: str = "budget",
        period: str | timedelta | float | None = None,
        tz: str | None = None,
        per: Literal["user", "tag", "key", "team"] | None = None,
        user: str | None = None,
        tag: str | None = None,
        key: str | None = None,
        team: str | None = None,
        route: str | None = None,
        provider: str | None = None,
        warn_at: Sequence[float] = (),
    ) -> None:
        set_ = object.__setattr__
        set_(self, "cap", cap if isinstance(cap, Money) else Money.parse(cap, currency, where="Budget cap"))
        if self.cap.micros < 0:
            raise ConfigError(f"Budget cap must be >= 0, got {self.cap}")
        if unpriced not in ("refuse", "allow"):
            raise ConfigError(f"Budget unpriced must be 'refuse' or 'allow', got {unpriced!r}")
        if isinstance(image_tokens, bool) or not isinstance(image_tokens, int) or image_tokens < 0:
            raise ConfigError(f"Budget image_tokens must be a token count, got {image_tokens!r}")
        if not isinstance(strict, bool):
            raise ConfigError(f"Budget strict must be True or False, got {strict!r}")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"Budget name must be a non-empty string, got {name!r}")
        set_(self, "unpriced", unpriced)
        set_(self, "strict", strict)
        set_(self, "image_tokens", image_tokens)
        set_(self, "name", name)
        set_(self, "period", Period.of(period, tz))
        kind, value = _scope(per, user=user, tag=tag, key=key, team=team, route=route, provider=provider)
        set_(self, "kind", kind)
        set_(self, "value", value)
        set_(self, "warn_at", _fractions(warn_at))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Budget is immutable")

    @property
    def scope(self) -> str:
        """The scope it covers, as the store and the server name it: `"all"`,
        `"user:u-42"`, `"tag:team:search"`; `"user:*"` for each user (`per="user"`)."""
        if self.kind == "all":
            return "all"
        return f"{self.kind}:{'*' if self.value is None else self.value}"

    @property
    def per_route(self) -> bool:
        """Whether it covers a route or a provider: it steers past a route, it refuses no call."""
        return self.kind in ("route", "provider")

    def __repr__(self) -> str:
        strict = ", strict=True" if self.strict else ""
        extra = ""
        if self.period is not None:
            extra += f", period={self.period.label!r}"
            if self.period.zone != "UTC":
                extra += f", tz={self.period.zone!r}"
        if self.kind != "all":
            extra += f", per={self.kind!r}" if self.value is None else f", {self.kind}={self.value!r}"
        return f"Budget({str(self.cap)!r}, unpriced={self.unpriced!r}{strict}{extra})"


def _scope(per: object, **named: str | None) -> tuple[str, str | None]:
    """The scope a budget's `per=` and named arguments say, refusing two at once."""
    given = {k: v for k, v in named.items() if v is not None}
    if per is not None:
        if per not in _PER:
            raise ConfigError(
                f"Budget per={per!r} is not a scope; use one of {list(_PER)} (route and provider "
                "budgets name their route or provider: route='openai-prod')"
            )
        given = {**given, "per": str(per)}
    if len(given) > 1:
        raise ConfigError(
            f"Budget covers one scope; got {sorted(given)}: make one budget for each"
        )
    if not given:
        return "all", None
    (kind, value), = given.items()
    if kind == "per":
        return str(per), None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"Budget {kind}= must be a non-empty string, got {value!r}")
    return kind, value


def _fractions(warn_at: object) -> tuple[float, ...]:
    if isinstance(warn_at, int | float) and not isinstance(warn_at, bool):
        warn_at = (warn_at,)
    if not isinstance(warn_at, Sequence) or isinstance(warn_at, str):
        raise ConfigError(f"Budget warn_at must be fractions of the cap such as (0.5, 0.8), got {warn_at!r}")
    found: list[float] = []
    for fraction in warn_at:
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
            raise ConfigError(
                f"Budget warn_at takes fractions of the cap in (0, 1], such as 0.8; got {fraction!r}"
            )
        found.append(float(fraction))
    return tuple(sorted(set(found)))
