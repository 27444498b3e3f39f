"""The metrics schema, versioned, and the one aggregate query, written once for three SQL
dialects (SQLite, DuckDB, PostgreSQL).

Two tables: `policy_router_attempts` (one row per attempt: no key, no text) and
`policy_router_schema` (component "metrics" and its version). One index serves the
aggregate query: (scope, route_id, model, endpoint, streaming, recorded_at).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...ground.errors import PolicyRouterError
from ...policies.score import Evidence, HistoryQuery

__all__ = [
    "COLUMNS",
    "VERSION",
    "MetricRow",
    "MetricsSchemaError",
    "aggregate_sql",
    "create_sql",
    "evidence",
]

VERSION = 1
"""The metrics schema this policy_router reads and writes."""

TABLE = "policy_router_attempts"
META = "policy_router_schema"

# (name, SQLite type, DuckDB type, PostgreSQL type, nullable)
_COLUMNS = (
    ("recorded_at", "REAL", "DOUBLE", "DOUBLE PRECISION", False),
    ("scope", "TEXT", "VARCHAR", "TEXT", False),
    ("route_id", "TEXT", "VARCHAR", "TEXT", False),
    ("model", "TEXT", "VARCHAR", "TEXT", False),
    ("endpoint", "TEXT", "VARCHAR", "TEXT", False),
    ("streaming", "INTEGER", "INTEGER", "INTEGER", False),
    ("outcome", "TEXT", "VARCHAR", "TEXT", False),
    ("latency", "REAL", "DOUBLE", "DOUBLE PRECISION", True),
    ("duration", "REAL", "DOUBLE", "DOUBLE PRECISION", True),
    ("tokens_in", "INTEGER", "BIGINT", "BIGINT", True),
    ("tokens_out", "INTEGER", "BIGINT", "BIGINT", True),
    ("cost_micros", "INTEGER", "BIGINT", "BIGINT", True),
    ("currency", "TEXT", "VARCHAR", "TEXT", True),
    ("journey_id", "TEXT", "VARCHAR", "TEXT", False),
)
COLUMNS = tuple(c[0] for c in _COLUMNS)
_DIALECT = {"sqlite": 1, "duckdb": 2, "postgres": 3}
OUTCOMES = ("success", "error", "rate_limited", "timeout", "not_sent")


class MetricsSchemaError(PolicyRouterError):
    """A metrics target's schema is not the one this policy_router reads (older, newer,
    or not ours), or there is none where one was needed. The message names the target and
    the command that fixes it; nothing was changed."""


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One attempt as the metrics store keeps it. `latency` is seconds to the whole reply,
    or to a stream's first chunk; `duration` a stream's whole length; `outcome` one of
    success, error, rate_limited, timeout, not_sent. No key, no prompt, no reply text."""

    recorded_at: float
    scope: str
    route_id: str
    model: str
    endpoint: str
    streaming: bool
    outcome: str
    latency: float | None = None
    duration: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_micros: int | None = None
    currency: str | None = None
    journey_id: str = ""

    def values(self) -> tuple[object, ...]:
        return tuple(int(v) if isinstance(v, bool) else v for v in (getattr(self, c) for c in COLUMNS))


def create_sql(dialect: str) -> list[str]:
    """The statements that make a new, current metrics schema."""
    i = _DIALECT[dialect]
    columns = ", ".join(f"{c[0]} {c[i]}{'' if c[4] else ' NOT NULL'}" for c in _COLUMNS)
    return [
        f"CREATE TABLE {TABLE} ({columns})",
        f"CREATE INDEX {TABLE}_partition ON {TABLE} (scope, route_id, model, endpoint, streaming, recorded_at)",
        f"CREATE TABLE {META} (component {_COLUMNS[1][i]} PRIMARY KEY, version INTEGER NOT NULL)",
        f"INSERT INTO {META} (component, version) VALUES ('metrics', {VERSION})",
    ]


def insert_sql(mark: str) -> str:
    return f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join([mark] * len(COLUMNS))})"


def aggregate_sql(
    dialect: str, query: HistoryQuery, scope: str, now: float
) -> tuple[str, list[object]]:
    """One statement, one row per requested (route id, model): weighted attempts and
    successes, successful-latency weight and total, and exact error, rate-limit and timeout
    tallies, over the query's window of one scope, endpoint and kind (regular/streaming)."""
    mark = "%s" if dialect == "postgres" else "?"
    wanted = ", ".join(f"({mark}, {mark})" for _ in query.routes)
    if query.half_life is None:
        weight, weight_args = "1.0", []
    elif dialect == "sqlite":
        weight, weight_args = f"pr_decay({mark} - recorded_at, {mark})", [now, query.half_life]
    else:
        weight, weight_args = f"power(0.5, ({mark} - recorded_at) / {mark})", [now, query.half_life]
    ok = "a.outcome = 'success'"
    sql = (
        f"WITH wanted(route_id, model) AS (VALUES {wanted}) "
        "SELECT w.route_id, "
        "COALESCE(SUM(CASE WHEN a.outcome <> 'not_sent' THEN a.wt END), 0), "
        f"COALESCE(SUM(CASE WHEN {ok} THEN a.wt END), 0), "
        f"COALESCE(SUM(CASE WHEN {ok} AND a.latency IS NOT NULL THEN a.wt END), 0), "
        f"COALESCE(SUM(CASE WHEN {ok} AND a.latency IS NOT NULL THEN a.wt * a.latency END), 0), "
        "COUNT(CASE WHEN a.outcome = 'error' THEN 1 END), "
        "COUNT(CASE WHEN a.outcome = 'rate_limited' THEN 1 END), "
        "COUNT(CASE WHEN a.outcome = 'timeout' THEN 1 END) "
        "FROM wanted w LEFT JOIN ("
        f"SELECT route_id, model, outcome, latency, {weight} AS wt FROM {TABLE} "
        f"WHERE scope = {mark} AND endpoint = {mark} AND streaming = {mark} AND recorded_at >= {mark}"
        ") a ON a.route_id = w.route_id AND a.model = w.model "
        "GROUP BY w.route_id"
    )
    args: list[object] = [v for pair in query.routes for v in pair]
    args += [*weight_args, scope, query.endpoint, int(query.streaming), now - query.window]
    return sql, args


def evidence(rows: Sequence[Sequence[Any]]) -> dict[str, Evidence]:
    """The aggregate query's rows by route id; a duplicate row is not believed."""
    out: dict[str, Evidence] = {}
    for row in rows:
        route = str(row[0])
        if route in out:
            raise ValueError(f"the metrics store returned two rows for route {route!r}")
        a, s, lw, lt, e, r, t = row[1:8]
        out[route] = Evidence(float(a or 0), float(s or 0), float(lw or 0), float(lt or 0), int(e or 0), int(r or 0), int(t or 0))
    return out
