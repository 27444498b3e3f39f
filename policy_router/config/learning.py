"""A router's routing history: the `metrics=` store it records every attempt in, the scope
it records under, and `Order.SCORE` bound to read it back (see `observe.metrics` and
`policies.score`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..ground.errors import ConfigError
from ..ground.route import Route
from ..observe.metrics import MetricsStore, Recorder
from ..policies.order import Order, Ordering
from ..policies.score import HistoryQuery, Score, Scored

__all__ = ["bind", "recorder"]


def recorder(args: Mapping[str, Any], routes: Sequence[Route], previous: Any) -> Recorder | None:
    """The recorder of `args["metrics"]` under its scope (the router's name unless
    `metrics_scope` says otherwise); the previous one, told the new routes, when neither
    changed, so nothing buffered is lost across a reconfigure."""
    metrics, scope = args["metrics"], args["metrics_scope"]
    if scope is not None and (not isinstance(scope, str) or not scope.strip()):
        raise ConfigError(f"metrics_scope must be a non-empty string (e.g. 'app:production'), got {scope!r}")
    if args["score"] is not None and not isinstance(args["score"], Score):
        raise ConfigError(f"score must be a Score(...), got {type(args['score']).__name__}")
    if metrics is None:
        if scope is not None:
            raise ConfigError("metrics_scope= needs metrics=SQLiteMetrics(...) (or DuckDB, PostgreSQL)")
        return None
    if not isinstance(metrics, MetricsStore):
        raise ConfigError(
            f"metrics must be a MetricsStore (SQLiteMetrics, DuckDBMetrics, PostgresMetrics), got {type(metrics).__name__}"
        )
    scope = scope or str(args["name"])
    models = {r.id: r.model for r in routes}
    kept = getattr(previous, "recorder", None)
    if kept is not None and kept.store is metrics and kept.scope == scope:
        kept.models = models
        return kept  # type: ignore[no-any-return]
    return Recorder(metrics, scope, models)  # the router stops the old one once swapped


def bind(
    default: Order | Ordering,
    orders: dict[str, Order | Ordering],
    args: Mapping[str, Any],
    made: Recorder | None,
) -> tuple[Order | Ordering, dict[str, Order | Ordering]]:
    """The orderings with every `Order.SCORE` reading `made`'s store under its scope."""

    def bound(order: Order | Ordering) -> Order | Ordering:
        if not isinstance(order, Scored):
            return order
        if made is None:
            raise ConfigError(
                "Order.SCORE ranks by recorded history: build the router with "
                "metrics=SQLiteMetrics('metrics.sqlite') (or DuckDBMetrics, PostgresMetrics)"
            )
        store, scope = made.store, made.scope

        def read(query: HistoryQuery) -> Any:
            return store.aggregate(query, scope, time.time())

        return order.bound(read, args["score"])

    return bound(default), {g: bound(o) for g, o in orders.items()}
