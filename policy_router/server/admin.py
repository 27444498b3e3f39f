"""Spending, read and set live over HTTP.

`GET /v1/spend` lists every scope's account in its period now (`router.budgets()`) to an
admin key, and a key's own scopes (its key's and its team's) to that key; `?scope=key:alice`
picks one. `PUT /v1/budgets/{scope}` with `{"cap": "30.00", "period": "day"}` sets that
scope's cap live, over the file's (kept in the store: every process applies it to every
call made a second after), and `DELETE /v1/budgets/{scope}` returns the scope to the file's; both need an
admin key (`server.admin_keys`), and answer the scope's account as it now stands.
"""

from __future__ import annotations

from typing import Any

from ..ground.errors import ConfigError
from ..policies.accounts import Spending
from ..policies.budget import Budget
from ..policies.scopes import parse_scope
from .answers import amount
from .tenants import Tenant

__all__ = ["budget_of", "key_account", "shown", "spend_of"]

_FIELDS = frozenset({"cap", "currency", "period", "tz", "unpriced", "strict", "warn_at"})


def shown(spent: Spending) -> dict[str, Any]:
    """An account as JSON: amounts as exact decimal text, times as ISO 8601."""
    return {
        "scope": spent.scope,
        "period": spent.period,
        "period_start": None if spent.period_start is None else spent.period_start.isoformat(),
        "resets_at": None if spent.resets_at is None else spent.resets_at.isoformat(),
        "cap": amount(spent.cap),
        "spent": amount(spent.spent),
        "reserved": amount(spent.reserved),
        "left": amount(spent.left),
        "currency": spent.currency,
        "calls": spent.calls,
        "in_flight": spent.in_flight,
        "exact": spent.is_exact,
        "overshoot_possible": spent.overshoot_possible,
    }


def spend_of(tenant: Tenant, scope: str | None) -> list[dict[str, Any]]:
    """The accounts `tenant` may read: every scope to an admin, its own to a key."""
    router = tenant.router
    own = None if tenant.key.admin else {f"{k}:{v}" for k, v in tenant.scope.items()}
    if scope is not None:
        parse_scope(scope)
        if own is not None and scope not in own:
            raise PermissionError(f"a key reads only its own scopes ({sorted(own)}); {scope} is not one")
        return [shown(router.spending(scope))]
    return [shown(s) for s in router.budgets() if own is None or s.scope in own]


def budget_of(scope: str, body: Any, currency: str) -> Budget:
    """The `Budget` a `PUT /v1/budgets/{scope}` body sets, or a `ConfigError` naming the
    field and the fix."""
    kind, value = parse_scope(scope)
    if not isinstance(body, dict):
        raise ConfigError('the body must be a JSON object such as {"cap": "30.00", "period": "day"}')
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise ConfigError(f"unknown field {unknown[0]!r}; a cap takes {sorted(_FIELDS)}")
    if "cap" not in body:
        raise ConfigError('"cap" is required: the most the scope may spend, as a string ("30.00")')
    if isinstance(body["cap"], float):
        raise ConfigError(f'"cap" {body["cap"]!r} is a float, which cannot hold money exactly; send it as a string')
    named: dict[str, Any] = {} if kind == "all" else {kind: value}
    return Budget(
        body["cap"], body.get("currency", currency),
        unpriced=body.get("unpriced", "refuse"), strict=body.get("strict", False),
        period=body.get("period"), tz=body.get("tz"), warn_at=body.get("warn_at", ()),
        **named,
    )


def key_account(tenant: Tenant) -> dict[str, Any]:
    """The key's budget account as `/health` shows it: its own, or the server's it spends
    from; `{"budget": None}` without."""
    try:
        spent: Spending = tenant.router.spending(key=tenant.key.name) if tenant.key.budget else tenant.router.spending()
    except ConfigError:
        return {"budget": None}
    return {"budget": tenant.key.budget.scope if tenant.key.budget else "shared", **shown(spent)}
