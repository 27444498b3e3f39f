"""The metrics schema, versioned, and the one aggregate query, written once for three SQL
dialects (SQLite, DuckDB, PostgreSQL).

Three tables: `policy_router_attempts` (one row per attempt: no key, no text; what a
report reads), `policy_router_hourly` (the same attempts summed per partition and hour,
written in the same transaction: what a ranking reads, so its cost grows with hours of
history, not with attempts) and `policy_router_schema` (component "metrics", its version).
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
HOURLY = "policy_router_hourly"
META = "policy_router_schema"
HOUR = 3600
_KEY = ("scope", "route_id", "model", "endpoint", "streaming", "hour")
_SUMS = ("attempts", "successes", "latency_n", "latency_sum", "errors", "rate_limited", "timeouts")

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
OUTCOMES = ("success", "error", "rate_limited", "timeout", "not_sent", "closed")


class MetricsSchemaError(PolicyRouterError):
    """A metrics target's schema is not the one this policy_router reads (older, newer,
    or not ours), or there is none where one was needed. The message names the target and
    the command that fixes it; nothing was changed."""


@dataclass(kw_only=True, frozen=True, slots=True)
class MetricRow:
    """One attempt as the metrics store keeps it. `latency` is seconds to the whole reply,
    or to a stream's first chunk; `duration` a stream's whole length; `outcome` one of
    success, error, rate_limited, timeout, not_sent, closed (a stream its caller closed
    before its end: in the raw table with its cost, out of the hourly sums that success
    rates and speed are read from). No key, no prompt, no reply text."""

    recorded_at: float
    """When it was recorded, as the attempt ended: seconds since the epoch (the wall clock,
    which processes share)."""
    scope: str
    """Whose history it is (`Router(metrics_scope=)`, the router's `name` by default)."""
    route_id: str
    """The route's identity, kept across renames."""
    model: str
    """The LiteLLM model string the route sent to."""
    endpoint: str
    """"chat", "embedding", "responses" or "completion"."""
    streaming: bool
    """True for a streamed attempt."""
    outcome: str
    """How it ended (see above)."""
    latency: float | None = None
    """Seconds to the whole reply or to a stream's first chunk; None when none came."""
    duration: float | None = None
    """A stream's whole length in seconds; None for a plain call."""
    tokens_in: int | None = None
    """Prompt tokens the provider reported; None when it reported no usage."""
    tokens_out: int | None = None
    """Reply tokens the provider reported; None when it reported no usage."""
    cost_micros: int | None = None
    """What the attempt was charged, in millionths of `currency`; None when unpriced."""
    currency: str | None = None
    """The currency of `cost_micros`."""
    journey_id: str = ""
    """The request's id, as on its journey, logs and spans."""

    def values(self) -> tuple[object, ...]:
        return tuple(int(v) if isinstance(v, bool) else v for v in (getattr(self, c) for c in COLUMNS))


def create_sql(dialect: str) -> list[str]:
    """The statements that make a new, current metrics schema."""
    i = _DIALECT[dialect]
    columns = ", ".join(f"{c[0]} {c[i]}{'' if c[4] else ' NOT NULL'}" for c in _COLUMNS)
    text, real, whole = _COLUMNS[1][i], _COLUMNS[0][i], _COLUMNS[9][i]
    sums = ", ".join(f"{n} {real if n == 'latency_sum' else whole} NOT NULL" for n in _SUMS)
    return [
        f"CREATE TABLE {TABLE} ({columns})",
        f"CREATE INDEX {TABLE}_time ON {TABLE} (scope, recorded_at)",
        f"CREATE TABLE {HOURLY} (scope {text} NOT NULL, route_id {text} NOT NULL, model {text} NOT NULL, "
        f"endpoint {text} NOT NULL, streaming INTEGER NOT NULL, hour {whole} NOT NULL, {sums}, "
        # SQLite: the rows live in the key's own b-tree, so a ranking reads one index only.
        f"PRIMARY KEY ({', '.join(_KEY)})){' WITHOUT ROWID' if dialect == 'sqlite' else ''}",
        f"CREATE TABLE {META} (component {_COLUMNS[1][i]} PRIMARY KEY, version INTEGER NOT NULL)",
        f"INSERT INTO {META} (component, version) VALUES ('metrics', {VERSION})",
    ]


def insert_sql(mark: str) -> str:
    return f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join([mark] * len(COLUMNS))})"


def hourly_sql(mark: str, rows: int = 1) -> str:
    """Add partition-hours' sums to their rows (made when absent); `rows` per statement."""
    names = (*_KEY, *_SUMS)
    add = ", ".join(f"{n} = {HOURLY}.{n} + excluded.{n}" for n in _SUMS)
    one = f"({', '.join([mark] * len(names))})"
    return (
        f"INSERT INTO {HOURLY} ({', '.join(names)}) VALUES {', '.join([one] * rows)} "
        f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {add}"
    )


def insert_many_sql(rows: int) -> str:
    """`insert_sql` for `rows` rows in one statement (DuckDB runs executemany row by row)."""
    one = f"({', '.join(['?'] * len(COLUMNS))})"
    return f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES {', '.join([one] * rows)}"


def hourly(rows: Sequence[MetricRow]) -> list[tuple[object, ...]]:
    """A batch's attempts summed per partition and hour (not-sent ones are no attempt)."""
    sums: dict[tuple[object, ...], list[float]] = {}
    for r in rows:
        if r.outcome in ("not_sent", "closed"):
            continue  # no attempt; or a stream closed early: no success, no failure, no speed
        key = (r.scope, r.route_id, r.model, r.endpoint, int(r.streaming), int(r.recorded_at // HOUR))
        got = sums.setdefault(key, [0, 0, 0, 0.0, 0, 0, 0])
        ok = r.outcome == "success"
        got[0] += 1
        got[1] += ok
        if ok and r.latency is not None:
            got[2] += 1
            got[3] += r.latency
        got[4] += r.outcome == "error"
        got[5] += r.outcome == "rate_limited"
        got[6] += r.outcome == "timeout"
    return [(*k, *v) for k, v in sums.items()]


def aggregate_sql(
    dialect: str, query: HistoryQuery, scope: str, now: float
) -> tuple[str, list[object]]:
    """One statement, one row per requested (route id, model): weighted attempts and
    successes, successful-latency weight and total, and exact error, rate-limit and timeout
    tallies, over the query's window of one scope, endpoint and kind (regular/streaming).

    It reads the hourly sums: the window starts at the hour holding `now - window`, and an
    hour's weight under a half-life is that of its end (the current hour weighs 1)."""
    mark = "%s" if dialect == "postgres" else "?"
    largest = "max" if dialect == "sqlite" else "greatest"  # SQLite's max() of two values
    weight: str = ""
    weight_args: list[object] = []
    if query.half_life is not None:
        weight = f"power(0.5, {largest}({mark} - (hour + 1) * {HOUR}, 0) / {mark}) * "
        weight_args = [now, query.half_life]
    scoped, scope_args = _scoped(mark, query, scope)
    if dialect == "duckdb":
        return _joined(query, scoped, scope_args, now, weight, weight_args)
    # One SELECT per route, each an aggregate without GROUP BY, so each gives exactly one
    # row (zeros for no history), and each walks its own stretch of the hourly key.
    one = (
        f"SELECT {mark}, "
        + ", ".join(f"COALESCE(SUM({weight}{n}), 0)" for n in _SUMS[:4])
        + ", "
        + ", ".join(f"COALESCE(SUM({n}), 0)" for n in _SUMS[4:])
        + f" FROM {HOURLY} WHERE {scoped}route_id = {mark} AND model = {mark} "
        f"AND endpoint = {mark} AND streaming = {mark} AND hour >= {mark}"
    )
    since = int((now - query.window) // HOUR)
    args: list[object] = []
    for route, model in query.routes:
        args += [route, *(weight_args * 4), *scope_args, route, model, query.endpoint, int(query.streaming), since]
    return " UNION ALL ".join([one] * len(query.routes)), args


def _scoped(mark: str, query: HistoryQuery, scope: str) -> tuple[str, list[object]]:
    """The condition on the scope (with its trailing AND) and its arguments: the one
    scope, the query's scopes, or none for every scope (`query.scopes == ()`)."""
    scopes = (scope,) if query.scopes is None else query.scopes
    if not scopes:
        return "", []
    if len(scopes) == 1:
        return f"scope = {mark} AND ", [scopes[0]]
    return f"scope IN ({', '.join([mark] * len(scopes))}) AND ", list(scopes)


def _joined(
    query: HistoryQuery,
    scoped: str,
    scope_args: list[object],
    now: float,
    weight: str,
    weight_args: list[object],
) -> tuple[str, list[object]]:
    """The same answer as one scan joined to the wanted routes: DuckDB scans columns
    faster than it seeks, where SQLite and PostgreSQL seek each route's stretch of the key."""
    wanted = ", ".join("(?, ?)" for _ in query.routes)
    sql = (
        f"WITH wanted(route_id, model) AS (VALUES {wanted}) SELECT w.route_id, "
        + ", ".join(f"COALESCE(SUM(h.{n}), 0)" for n in _SUMS)
        + " FROM wanted w LEFT JOIN (SELECT route_id, model, "
        + ", ".join(f"{weight}{n} AS {n}" if i < 4 else n for i, n in enumerate(_SUMS))
        + f" FROM {HOURLY} WHERE {scoped}endpoint = ? AND streaming = ? AND hour >= ?) h"
        " ON h.route_id = w.route_id AND h.model = w.model GROUP BY w.route_id"
    )
    args: list[object] = [v for pair in query.routes for v in pair]
    args += [*(weight_args * 4), *scope_args, query.endpoint, int(query.streaming), int((now - query.window) // HOUR)]
    return sql, args


def evidence(rows: Sequence[Sequence[Any]]) -> dict[str, Evidence]:
    """The aggregate query's rows by route id; a duplicate row is not believed."""
    out: dict[str, Evidence] = {}
    for row in rows:
        route = str(row[0])
        if route in out:
            raise ValueError(f"the metrics store returned two rows for route {route!r}")
        a, s, lw, lt, e, r, t = row[1:8]
        out[route] = Evidence(attempts=float(a or 0), successes=float(s or 0), latency_weight=float(lw or 0), latency_total=float(lt or 0), errors=int(e or 0), rate_limited=int(r or 0), timeouts=int(t or 0))
    return out
