"""Routing history: every attempt recorded in a database, read back to rank routes.

`MetricsStore` is the protocol; `SQLiteMetrics` (embedded, the standard library),
`DuckDBMetrics` (embedded, `duckdb` extra) and `PostgresMetrics` (shared, `postgres` extra)
ship. The `Recorder` writes a router's attempts off the request path; `Order.SCORE`
(`policies.score`) reads one aggregate per ranking. `open_target` turns the CLI's TARGET
(`metrics.sqlite`, `sqlite:PATH`, `duckdb:PATH`, `postgresql://...`) into a store.
"""

from __future__ import annotations

from pathlib import Path

from ...ground.errors import ConfigError
from .backends import DuckDBMetrics, PostgresMetrics, SQLiteMetrics
from .base import MetricsStore, SchemaState, SQLMetrics
from .recorder import Recorder
from .schema import VERSION, MetricRow, MetricsSchemaError

__all__ = [
    "VERSION",
    "DuckDBMetrics",
    "MetricRow",
    "MetricsSchemaError",
    "MetricsStore",
    "PostgresMetrics",
    "Recorder",
    "SQLMetrics",
    "SQLiteMetrics",
    "SchemaState",
    "open_target",
]


def open_target(target: str) -> SQLMetrics:
    """The store a TARGET names: `postgresql://…` (or `postgres://…`), `duckdb:PATH` or a
    path ending `.duckdb`, else `sqlite:PATH` or a path (SQLite)."""
    if not isinstance(target, str) or not target.strip():
        raise ConfigError("a metrics target is a path (SQLite), duckdb:PATH or postgresql://...")
    if target.startswith(("postgresql://", "postgres://")):
        return PostgresMetrics(target)
    if target.startswith("duckdb:"):
        return DuckDBMetrics(target.removeprefix("duckdb:"))
    if target.endswith(".duckdb"):
        return DuckDBMetrics(target)
    return SQLiteMetrics(Path(target.removeprefix("sqlite:")))
