"""Preflight: can each route be used at all, asked before a real request needs it?

A route is Ready, Denied (with why: a credential surely missing, a 401/403/404 on the live
check) or Unknown (with why: the check could not tell, e.g. the provider was unreachable,
or a credential is missing from the environment but the provider's SDK looks elsewhere
too). "Denied" is said only when certain.
`problems` is the configuration check behind `router.check()` and `policy-router check`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from ..ground import catalog
from ..ground.errors import StoreUnavailableError
from ..ground.outcome import Fault, FaultKind
from ..ground.route import Route
from ..policies.breaker import PREFLIGHT
from ..policies.budget import Budget
from ..state.store import Store, perform
from .seam import credentials

if TYPE_CHECKING:
    from ..policies.breaker import HealthBook

__all__ = ["RETIRING_WITHIN", "PreflightVerdict", "preflight_route", "problems", "retiring"]


@dataclass(frozen=True, slots=True)
class PreflightVerdict:
    """A route's preflight verdict: state is "ready", "denied" or "unknown".

    `live` is True when the verdict came from a real request to the provider; only such a
    verdict rests a route under a breaker.
    """

    state: str
    why: str = ""
    live: bool = False

    def __str__(self) -> str:
        return self.state if not self.why else f"{self.state}: {self.why}"


def preflight_route(route: Route, live: bool, embedding: bool = False) -> PreflightVerdict:
    """Check credentials (LiteLLM's environment validation), then optionally one live call
    (an embedding for a route that serves only embeddings)."""
    missing, unsure = credentials.missing_credentials(route)
    if missing and not unsure:
        return PreflightVerdict("denied", f"missing credentials: {', '.join(missing)}")
    if not live:
        if missing:
            return PreflightVerdict("unknown", f"not in the environment: {', '.join(missing)}; {unsure}")
        return PreflightVerdict("ready")
    fault = credentials.ping(route, embedding)
    if fault is None:
        return PreflightVerdict("ready", live=True)
    why = route.redact(f"{fault.status or ''} {fault.message}".strip())
    if not fault.sent:
        return PreflightVerdict("denied" if fault.kind.about == "route" else "unknown", why)
    return PreflightVerdict("denied" if fault.kind.about == "route" else "unknown", why, live=True)


def embeds_only(serves: frozenset[str]) -> bool:
    """True for a route that serves embeddings and not chat: its live check embeds a word."""
    return "embedding" in serves and "chat" not in serves


def rest_denied(
    routes: Sequence[Route],
    verdicts: Sequence[PreflightVerdict],
    health: HealthBook | None,
    store: Store,
    now: float,
) -> dict[str, PreflightVerdict]:
    """The verdicts by route name; with a breaker, a route a *live* check denied rests."""
    for route, verdict in zip(routes, verdicts, strict=True):
        if verdict.state == "denied" and verdict.live and health is not None:
            fault = Fault(FaultKind.ACCESS, None, PREFLIGHT + route.redact(verdict.why))
            perform(store, health.failed(route.id, fault, now, label=route.name))
    return {r.name: v for r, v in zip(routes, verdicts, strict=True)}


def problems(
    routes: Sequence[Route],
    unusable: Mapping[str, str],
    budget: Budget | None,
    store: Store,
    max_age_days: int | None = None,
    today: date | None = None,
) -> list[str]:
    """What is wrong with a router's configuration, one sentence per problem (see
    `Router.check`)."""
    found = [f"{name}: unusable: {why}" for name, why in unusable.items()]
    ping = getattr(store, "ping", None)
    if store.remote and callable(ping):
        try:
            ping()
        except StoreUnavailableError as error:
            found.append(f"store: {error}; until it answers, every call under a budget is refused")
    for r in routes:
        missing, unsure = credentials.missing_credentials(r)
        if missing and not unsure:
            found.append(f"{r.name}: missing credentials: {', '.join(missing)}")
        if budget is None:
            continue
        table = r.prices
        if table is None or table.price_for(r.model) is None:
            if budget.unpriced == "refuse":
                where = "no price table" if table is None else f"no row in {table.name}"
                found.append(
                    f"{r.name}: unpriced ({where}) under a budget that refuses "
                    "unpriced routes: no request can reach it"
                )
        elif table.currency != budget.cap.currency:
            found.append(
                f"{r.name}: priced in {table.currency}, the budget is in "
                f"{budget.cap.currency}: no request can reach it"
            )
    found += retiring(routes, today or date.today())
    if max_age_days is not None:
        tables = {id(r.prices): r.prices for r in routes if r.prices is not None}
        for table in tables.values():
            age = table.age_days(today)
            if age > max_age_days:
                found.append(
                    f"price table {table.name}: {age} days old (as of "
                    f"{table.as_of.isoformat()}), older than {max_age_days}: re-check "
                    f"it against {table.source}"
                )
    return found


RETIRING_WITHIN = 30
"""Days ahead of a model's deprecation date from which `check` warns."""


def retiring(routes: Sequence[Route], today: date) -> list[str]:
    """Routes whose model LiteLLM dates for deprecation within `RETIRING_WITHIN` days or
    already past, and routes priced under a `-latest` alias, which moves to new models and
    new prices (Mistral's `mistral-medium-latest` moved to Medium 3.5 at four times the
    price)."""
    found = []
    for r in routes:
        dated = catalog.deprecation_date(r.model)
        if dated:
            try:
                when = date.fromisoformat(dated[:10])
            except ValueError:
                when = None
            if when is not None and (when - today).days <= RETIRING_WITHIN:
                days = (when - today).days
                span = (
                    f"in {days} days"
                    if days > 0
                    else ("today" if days == 0 else f"{-days} days ago")
                )
                found.append(
                    f"{r.name}: LiteLLM dates {r.model}'s deprecation {when.isoformat()} "
                    f"({span}); move it to its successor before it stops answering"
                )
        if r.prices is not None and r.model.endswith("-latest") and r.prices.price_for(r.model):
            found.append(
                f"{r.name}: priced under the alias {r.model!r}, which moves to newer models "
                "and prices; route and price the dated id instead"
            )
    return found
