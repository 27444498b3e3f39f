"""The three shipped metrics stores: SQLite (embedded, the standard library's), DuckDB
(embedded, the `duckdb` extra) and PostgreSQL (shared by many machines, the `postgres`
extra: psycopg 3 and its connection pool)."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...ground.errors import ConfigError
from . import schema
from .base import SQLMetrics
from .schema import MetricRow

_CHUNK = 200  # rows per DuckDB statement

__all__ = ["DuckDBMetrics", "PostgresMetrics", "SQLiteMetrics"]


class SQLiteMetrics(SQLMetrics):
    """Metrics in a SQLite file: embedded, no server, safe for several processes on one
    machine (SQLite's own locking, WAL journal). Each thread keeps its own connection.
    A file that does not exist yet (or holds no table) gets the current schema."""

    dialect = "sqlite"

    def __init__(self, path: str | Path, *, timeout: float = 5.0) -> None:
        super().__init__()
        self.path = Path(path)
        self.target = str(self.path)
        self._timeout = timeout
        self._local = threading.local()

    def _connection(self) -> Any:
        import sqlite3

        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            with contextlib.suppress(sqlite3.OperationalError):
                # WAL is the file's: another process switching it at this instant set it.
                con.execute("PRAGMA journal_mode=WAL")
            try:  # recency weighting: SQLite's math functions are a compile-time option
                con.execute("SELECT power(0.5, 1)")
            except sqlite3.OperationalError:
                con.create_function("power", 2, math.pow, deterministic=True)
            self._local.con = con
        return con

    def _run(self, work: Callable[[Any], Any], write: bool = False) -> Any:
        con = self._connection()
        cur = con.cursor()
        cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = work(cur)
        except BaseException:
            con.rollback()
            raise
        con.commit()
        return result

    def _tables(self, cur: Any) -> set[str]:
        return {r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


class DuckDBMetrics(SQLMetrics):
    """Metrics in a DuckDB file: embedded and quick to aggregate, but one writing process
    per file (DuckDB's own rule): several processes on one machine should share a SQLite
    file instead, several machines a PostgreSQL database. Needs the `duckdb` extra."""

    dialect = "duckdb"

    def __init__(self, path: str | Path) -> None:
        try:
            import duckdb  # noqa: F401
        except ImportError:
            raise ConfigError("DuckDBMetrics needs duckdb: pip install 'policy-router[duckdb]'") from None
        super().__init__()
        self.path = Path(path)
        self.target = f"duckdb:{self.path}"
        self._lock = threading.Lock()
        self._con: Any = None

    def _run(self, work: Callable[[Any], Any], write: bool = False) -> Any:
        import duckdb

        with self._lock:
            if self._con is None:
                self._con = duckdb.connect(str(self.path))
            cur = self._con.cursor()
            try:
                cur.execute("BEGIN TRANSACTION")
                try:
                    result = work(cur)
                except BaseException:
                    cur.execute("ROLLBACK")
                    raise
                cur.execute("COMMIT")
                return result
            finally:
                cur.close()

    def _tables(self, cur: Any) -> set[str]:
        return {r[0] for r in cur.execute("SELECT table_name FROM information_schema.tables").fetchall()}

    def write(self, rows: Sequence[MetricRow]) -> None:
        """As `SQLMetrics.write`, in statements of many rows each: DuckDB's executemany runs
        one statement per row (measured: 2 ms a row, 8 ms an upsert, so a batch of 500 held
        the connection, and every ranking, for seconds)."""
        if not rows:
            return
        self._ready()
        values, hours = [r.values() for r in rows], schema.hourly(rows)

        def work(cur: Any) -> None:
            for i in range(0, len(values), _CHUNK):
                part = values[i : i + _CHUNK]
                cur.execute(schema.insert_many_sql(len(part)), [v for row in part for v in row])
            for i in range(0, len(hours), _CHUNK):
                some = hours[i : i + _CHUNK]
                cur.execute(schema.hourly_sql("?", len(some)), [v for row in some for v in row])

        self._run(work, write=True)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


class PostgresMetrics(SQLMetrics):
    """Metrics in PostgreSQL, so many machines learn together. `dsn` is libpq's
    (`postgresql://user@host:5432/db?sslmode=verify-full`): TLS is what it says. A pool of
    `min_size`..`max_size` connections; each statement has `timeout` seconds (connecting
    too), so a database that does not answer costs a ranking that long, then the listed
    order. The schema is never created here: run `policy-router metrics create DSN` once.
    Needs the `postgres` extra."""

    dialect = "postgres"
    creates_when_empty = False

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 4, timeout: float = 2.0) -> None:
        try:
            import psycopg_pool
        except ImportError:
            raise ConfigError("PostgresMetrics needs psycopg: pip install 'policy-router[postgres]'") from None
        if not isinstance(dsn, str) or not dsn.strip():
            raise ConfigError(f"PostgresMetrics needs a libpq DSN (postgresql://...), got {dsn!r}")
        super().__init__()
        self.target = _without_password(dsn)
        ms = max(int(timeout * 1000), 1)
        self._pool = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs={"connect_timeout": max(math.ceil(timeout), 1), "options": f"-c statement_timeout={ms}"},
        )
        self._opened = False
        self._open_lock = threading.Lock()

    def _run(self, work: Callable[[Any], Any], write: bool = False) -> Any:
        if not self._opened:
            with self._open_lock:
                if not self._opened:
                    self._pool.open(wait=False)
                    self._opened = True
        with self._pool.connection() as con, con.transaction(), con.cursor() as cur:
            return work(cur)

    def _tables(self, cur: Any) -> set[str]:
        found = cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
        return {r[0] for r in found}

    def close(self) -> None:
        if self._opened:
            self._pool.close()
            self._opened = False


def _without_password(dsn: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in dsn:
        return " ".join(p for p in dsn.split() if not p.startswith("password="))
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))
