"""A router's budgets, and which of them a call falls under.

`Budgets` holds the router's own `budget=` and its `budgets=[...]`, and the caps set live
over them (`set_cap`, the server's `PUT /v1/budgets/{scope}`: kept in the store, read again
by a call whose router read them more than a second before, as its ledger's first step:
every process sharing the store applies them to every call made a second after).
For each call it makes a `Ledger` over the accounts the call falls under: every budget
whose scope the call is in, in the period it is in now. A budget for each (`per="user"`)
gives the call's user its own scope (`user:u-42`); a budget naming one (`tag="x"`) covers
the calls carrying it. One scope in one kind of period has one account: a budget naming a
scope takes the place of a `per=` budget for that scope, and a cap set live takes the place
of every budget of its scope. A route's and a provider's budgets are the routes' own
accounts, added per route.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..ground.errors import ConfigError, StoreUnavailableError
from ..ground.money import Money
from ..state.store import Steps, StoreCall
from .accounts import Account, Spending
from .budget import SCOPE_KINDS, Budget
from .ledger import Ledger, RouteAccounts
from .periods import Span

if TYPE_CHECKING:
    from ..ground.route import Route
    from ..state.store import Store
    from .candidate import Candidate

__all__ = ["Budgets", "CallScope", "cap_text", "parse_scope", "scope_of"]

CallScope = Mapping[str, str]
"""Who a call is for, as the router's `scope=` keyword names it: `{"key": ..., "team": ...}`,
and where the call's own arguments cannot carry them (Anthropic's Messages API has no
`user` and no tags), `"user"` and `"tags"` (comma-separated)."""

_SCOPE_NAMES = frozenset({"key", "team", "user", "tags"})

_FRESH = 1.0  # seconds a process keeps the live caps it read


def scope_of(given: object) -> CallScope | None:
    """A call's `scope=` checked: None, or a mapping of "key", "team", "user" and "tags"
    to names."""
    if given is None:
        return None
    if not isinstance(given, Mapping) or not set(given) <= _SCOPE_NAMES or not all(
        isinstance(v, str) and v for v in given.values()
    ):
        raise ConfigError(
            f"scope= names who a call is for, for its budgets: {{'key': ..., 'team': ..., "
            f"'user': ..., 'tags': 'a,b'}} with names as strings; got {given!r}"
        )
    return dict(given)


def parse_scope(scope: object) -> tuple[str, str | None]:
    """A scope's text (`"all"`, `"user:u-42"`, `"tag:team:search"`) as (kind, value); a
    `ConfigError` naming what it takes when it is none."""
    if scope == "all":
        return "all", None
    if isinstance(scope, str) and ":" in scope:
        kind, value = scope.split(":", 1)
        if kind in SCOPE_KINDS and value:
            return kind, value
    raise ConfigError(
        f"{scope!r} is not a scope; write 'all', or one of {list(SCOPE_KINDS)}, a colon, and "
        "its name: 'user:u-42', 'tag:team:search', 'key:alice', 'route:openai-prod'"
    )


def cap_text(budget: Budget) -> str:
    """A live cap as the store keeps it (JSON of its fields)."""
    period = budget.period
    return json.dumps({
        "cap": str(budget.cap.amount), "currency": budget.cap.currency,
        "period": None if period is None else (period.seconds if period.kind == "every" else period.kind),
        "tz": None if period is None or period.kind == "every" or period.zone == "UTC" else period.zone,
        "unpriced": budget.unpriced, "strict": budget.strict, "warn_at": list(budget.warn_at),
    })


class Budgets:
    """The router's budgets over its store (see the module docstring). Thread-safe."""

    def __init__(
        self,
        own: Budget | None,
        scoped: Sequence[Budget],
        store: Store,
        *,
        routes: Sequence[Route] = (),
        wall: Callable[[], float] = time.time,
        emit: Callable[[object], None] | None = None,
    ) -> None:
        every = ([own] if own is not None else []) + list(scoped)
        if not every:
            raise ConfigError("Budgets needs at least one budget")
        currencies = {b.cap.currency for b in every}
        if len(currencies) > 1:
            raise ConfigError(
                f"every budget of a router is in one currency; got {sorted(currencies)}"
            )
        _check_routes(every, routes)
        seen: dict[tuple[str, str], Budget] = {}
        for b in every:
            key = (b.scope, _period_key(b))
            if key in seen:
                raise ConfigError(
                    f"two budgets cover {key[0]} over one period ({key[1] or 'never resetting'}): "
                    f"{seen[key]!r} and {b!r}; keep one"
                )
            seen[key] = b
        self.own = own
        self.budgets = tuple(every)
        self.first = every[0]
        self.store = store
        self._wall = wall
        self._emit = emit
        self._live: tuple[float, dict[str, Budget]] = (-_FRESH, {})
        self._spans: dict[str, Span] = {}
        self.image_tokens = max(b.image_tokens for b in every)
        self._calls = [b for b in every if not b.per_route]
        self._routes = [b for b in every if b.per_route]

    @property
    def currency(self) -> str:
        return self.first.cap.currency

    # -- a call's ledger -------------------------------------------------------------------
    def for_call(self, call_kwargs: Mapping[str, Any], scope: CallScope | None) -> Ledger | None:
        """The ledger of a LiteLLM-shaped call: by its `user` (for Anthropic's Messages
        API, `metadata["user_id"]`), its `metadata["tags"]`, and the key and team its
        `scope=` names (None: no budget covers it)."""
        metadata = call_kwargs.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        user = call_kwargs.get("user")
        return self.ledger(metadata.get("user_id") if user is None else user, metadata.get("tags"), scope)

    def ledger(self, user: object = None, tags: object = None, scope: CallScope | None = None) -> Ledger | None:
        """The ledger of a call from `user` (LiteLLM's `user`), carrying `tags`
        (`metadata["tags"]`), made for `scope` (`{"key": ..., "team": ...}`); None when no
        budget covers it or any of its routes. When the caps set live were read more than a
        second ago, the ledger reads them again as its first step (`Ledger.ready`), so a
        call sees a cap set at most a second before it, and no call waits for it otherwise."""
        now = self._wall()
        read_at, live = self._live
        named = _named_of(user, tags, scope)
        accounts, routes = self._resolve(named, live, now)
        refresh = None
        if now - read_at >= _FRESH:
            def refresh() -> Steps[tuple[tuple[Account, ...], RouteAccounts | None] | None]:
                try:
                    text: dict[str, str] = yield StoreCall("budget_caps")
                except StoreUnavailableError:
                    return None  # the caps read last stay in force
                caps = {s: self._cap_of(s, t) for s, t in text.items()}
                self._live = (self._wall(), caps)
                return None if caps == live else self._resolve(named, caps, now)
        if not accounts and routes is None and refresh is None:
            return None
        return Ledger(self.first, self.store, accounts=accounts, routes=routes, emit=self._emit, refresh=refresh)

    def _resolve(
        self, named: Mapping[str, tuple[str, ...]], live: Mapping[str, Budget], now: float
    ) -> tuple[tuple[Account, ...], RouteAccounts | None]:
        """A call's accounts, and its routes' (None when no budget covers a route)."""
        found: dict[tuple[str, str], Account] = {}
        for budget in sorted(self._calls, key=lambda b: b.value is not None):
            for s in _scopes_of(budget, named):
                if s not in live:
                    found[(s, _period_key(budget))] = self._account(budget, s, now)
        for s, budget in live.items():
            kind, value = parse_scope(s)
            if kind == "all" or value in named.get(kind, ()):
                found[(s, _period_key(budget))] = self._account(budget, s, now)
        route_live = any(s.startswith(("route:", "provider:")) for s in live)
        by_route = self._route_accounts(now, live) if self._routes or route_live else None
        return tuple(found.values()), by_route

    def _route_accounts(self, now: float, live: Mapping[str, Budget]) -> Callable[[Candidate], tuple[Account, ...]]:
        def of(candidate: Candidate) -> tuple[Account, ...]:
            route = candidate.route
            names = {"route": {route.id, route.name}, "provider": {route.provider}}
            found: dict[tuple[str, str], Account] = {}
            for budget in self._routes:
                if budget.value in names[budget.kind]:
                    s = budget.scope
                    if s not in live:
                        found[(s, _period_key(budget))] = self._account(budget, s, now)
            for s, budget in live.items():
                kind, value = parse_scope(s)
                if kind in names and value in names[kind]:
                    found[(s, _period_key(budget))] = self._account(budget, s, now)
            return tuple(found.values())

        return of

    def _account(self, budget: Budget, scope: str, now: float) -> Account:
        period = budget.period
        if period is None:
            return Account.of(budget, scope)
        key = _period_key(budget)
        span = self._spans.get(key)
        if span is None or not span.holds(now):
            span = self._spans[key] = period.window(now)
        return Account.of(budget, scope, span)

    # -- caps set live ---------------------------------------------------------------------
    def live(self, now: float | None = None) -> dict[str, Budget]:
        """The caps set live, by scope, read again when what was read is a second old (a
        store that cannot be read leaves the last ones read in force). For inspection
        (`spending`, `budgets`); a call reads them as its ledger's first step instead."""
        now = self._wall() if now is None else now
        read_at, caps = self._live
        if now - read_at >= _FRESH:
            self._live = (now, self._read(caps))
        return self._live[1]

    def _read(self, caps: dict[str, Budget]) -> dict[str, Budget]:
        """The caps the store holds now (`caps`, as they were, when it cannot be read)."""
        try:
            return {s: self._cap_of(s, text) for s, text in self.store.budget_caps().items()}
        except StoreUnavailableError:
            return caps

    def set_cap(self, scope: str, budget: Budget | None) -> None:
        """Set (or with None, remove) the cap of `scope` live, over the configured budgets
        of that scope, for every process sharing the store."""
        parse_scope(scope)
        if budget is not None and budget.cap.currency != self.currency:
            raise ConfigError(f"the cap of {scope} is in {budget.cap.currency}; the router's budgets are in {self.currency}")
        self.store.set_budget_cap(scope, None if budget is None else cap_text(budget))
        self._live = (self._wall(), self._read(self._live[1]))

    def _cap_of(self, scope: str, text: str) -> Budget:
        data: dict[str, Any] = json.loads(text)
        kind, value = parse_scope(scope)
        given: dict[str, Any] = {} if kind == "all" else {kind: value}
        return Budget(
            Money.parse(data["cap"], data.get("currency", self.currency)),
            data.get("currency", self.currency),
            unpriced=data.get("unpriced", self.first.unpriced),
            strict=bool(data.get("strict", False)),
            image_tokens=self.image_tokens,
            name=self.first.name,
            period=data.get("period"),
            tz=data.get("tz"),
            warn_at=tuple(data.get("warn_at", ())),
            **given,
        )

    # -- what every scope has spent ----------------------------------------------------------
    def spending(self, scope: str | None = None, **named: str) -> Spending:
        """The account of one scope now: `spending()` the router's own, `spending(user=
        "u-42")`, `spending("tag:x")`; a scope nothing has spent in yet is a zero account.
        Of two budgets that cover it (a daily and a monthly cap, say), the one with less
        left."""
        if named:
            if scope is not None or len(named) != 1:
                raise ConfigError("spending() takes one scope: spending(user='u-42'), spending(tag='x'), ...")
            (named_kind, named_value), = named.items()
            scope = f"{named_kind}:{named_value}"
        scope = scope or "all"
        kind, value = parse_scope(scope)
        found = [a.spending(self.store.spend_state(a.name)) for a in self._accounts_of(scope, kind, value)]
        if not found:
            raise ConfigError(
                f"no budget covers {scope}: the router's budgets are "
                f"{sorted({b.scope for b in self.budgets})}"
            )
        return min(found, key=lambda s: s.left.micros)

    def _accounts_of(self, scope: str, kind: str, value: str | None) -> list[Account]:
        now = self._wall()
        live = self.live(now)
        if scope in live:
            return [self._account(live[scope], scope, now)]
        found: dict[str, Account] = {}
        for b in sorted(self.budgets, key=lambda b: b.value is not None):
            if b.kind == kind and (kind == "all" or b.value in (None, value)):
                found[_period_key(b)] = self._account(b, scope, now)  # one named wins
        return list(found.values())

    def every(self) -> list[Spending]:
        """Every scope's account in its period now: each configured scope (at zero when
        nothing was spent), each user, tag, key or team a `per=` budget has seen spend in
        its period, and each cap set live."""
        now = self._wall()
        live = self.live(now)
        seen = set(self.store.budget_accounts())
        out: dict[str, Spending] = {}
        for b in self.budgets:
            if b.value is not None or b.kind == "all":
                s = b.scope
                if s not in live:
                    a = self._account(b, s, now)
                    out[a.name] = a.spending(self.store.spend_state(a.name))
                continue
            for name in seen:  # each one a `per=` budget has seen in its period
                s = name.partition("@")[0]
                if not s.startswith(f"{b.kind}:") or s in live:
                    continue
                a = self._account(b, s, now)
                if a.name == name:
                    out[a.name] = a.spending(self.store.spend_state(a.name))
        for s, b in live.items():
            a = self._account(b, s, now)
            out[a.name] = a.spending(self.store.spend_state(a.name))
        return sorted(out.values(), key=lambda x: (x.scope != "all", x.scope, x.period or ""))


def _period_key(budget: Budget) -> str:
    period = budget.period
    return "" if period is None else f"{period.label}@{period.zone}"


def _named_of(user: object, tags: object, scope: CallScope | None) -> dict[str, tuple[str, ...]]:
    """What a call is, by scope kind: its user, its tags, its key and team."""
    named: dict[str, tuple[str, ...]] = {}
    scope = scope or {}
    user = user if isinstance(user, str) and user else scope.get("user")
    if isinstance(user, str) and user:
        named["user"] = (user,)
    listed = list(tags) if isinstance(tags, list | tuple) else []
    listed += [t.strip() for t in str(scope.get("tags") or "").split(",")]
    if any(isinstance(t, str) and t for t in listed):
        named["tag"] = tuple(dict.fromkeys(t for t in listed if isinstance(t, str) and t))
    for kind in ("key", "team"):
        value = scope.get(kind)
        if isinstance(value, str) and value:
            named[kind] = (value,)
    return named


def _scopes_of(budget: Budget, named: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The scopes a call is in under `budget`."""
    if budget.kind == "all":
        return ["all"]
    have = named.get(budget.kind, ())
    if budget.value is None:
        return [f"{budget.kind}:{v}" for v in have]
    return [budget.scope] if budget.value in have else []


def _check_routes(budgets: Sequence[Budget], routes: Sequence[Route]) -> None:
    if not routes:
        return
    ids = {r.id for r in routes} | {r.name for r in routes}
    providers = {r.provider for r in routes}
    for b in budgets:
        if b.kind == "route" and b.value not in ids:
            raise ConfigError(
                f"{b!r} names route {b.value!r}, which the router does not have; routes: {sorted(ids)}"
            )
        if b.kind == "provider" and b.value not in providers:
            raise ConfigError(
                f"{b!r} names provider {b.value!r}, which no route uses; providers: {sorted(providers)}"
            )

