"""The three shipped metrics stores: SQLite (embedded, the standard library's), DuckDB
(embedded, the `duckdb` extra) and PostgreSQL (shared by many machines, the `postgres`
extra: psycopg 3 and its connection pool)."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...ground.errors import ConfigError
from ...ground.numbers import check_number
from . import schema
from .base import SQLMetrics
from .schema import MetricRow

_CHUNK = 200  # rows per DuckDB statement

__all__ = ["DuckDBMetrics", "PostgresMetrics", "SQLiteMetrics"]


class SQLiteMetrics(SQLMetrics):
    """Metrics in a SQLite file: embedded, no server, safe for several processes on one
    machine (SQLite's own locking, WAL journal). Each thread keeps its own connection.
    A file that does not exist yet (or holds no table) gets the current schema.

    Args:
        path: The SQLite file.
        timeout: Seconds a write waits for another process's lock before it fails (the
            rows are then kept for the next flush).
    """

    dialect = "sqlite"

    def __init__(self, path: str | Path, *, timeout: float = 5.0) -> None:
        self.path = Path(path)
        super().__init__(target=str(self.path))
        self._timeout = check_number(timeout, "SQLiteMetrics timeout")
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
    file instead, several machines a PostgreSQL database. Needs the `duckdb` extra.

    Args:
        path: The DuckDB file.
    """

    dialect = "duckdb"

    def __init__(self, path: str | Path) -> None:
        try:
            import duckdb  # noqa: F401
        except ImportError:
            raise ConfigError("DuckDBMetrics needs duckdb: pip install 'policy-router[duckdb]'") from None
        self.path = Path(path)
        super().__init__(target=f"duckdb:{self.path}")
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
    (`postgresql://user@host:5432/db?sslmode=verify-full`). A pool of `min_size`..`max_size`
    connections; each statement has `timeout` seconds (connecting too), so a database that
    does not answer costs a ranking that long, then the listed order. The schema is never
    created here: run `policy-router metrics create DSN` once. Needs the `postgres` extra.

    Encryption: to a host other than this machine (a Unix socket, `localhost` and loopback
    addresses are this machine), a DSN that names no `sslmode` (nor `PGSSLMODE`) is given
    `sslmode=require`, never libpq's `prefer`, which falls back to plaintext in silence; a
    mode that allows plaintext there (`disable`, `allow`, `prefer`) is refused unless
    `allow_unencrypted=True`. `require` encrypts without checking whom: use `verify-full`
    with `sslrootcert` against an impersonated server. An explicit mode is never downgraded.

    `pool_mode` says what is at the other end: `"direct"` (the server itself), or a pooler
    (PgBouncer, Supabase's): `"session_pooler"` or `"transaction_pooler"`. Through a pooler
    the startup `options` are ignored, so the statement timeout is set with `SET` on each
    connection (a session pooler) or `SET LOCAL` in each transaction (a transaction pooler,
    which also hands server connections between clients, so server-side prepared
    statements are off). It is never guessed from the port.
    """

    dialect = "postgres"
    creates_when_empty = False

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 2.0,
        pool_mode: str = "direct",
        allow_unencrypted: bool = False,
    ) -> None:
        try:
            import psycopg_pool
        except ImportError:
            raise ConfigError("PostgresMetrics needs psycopg: pip install 'policy-router[postgres]'") from None
        if not isinstance(dsn, str) or not dsn.strip():
            raise ConfigError(f"PostgresMetrics needs a libpq DSN (postgresql://...), got {dsn!r}")
        check_number(timeout, "PostgresMetrics timeout")
        if pool_mode not in _POOL_MODES:
            raise ConfigError(
                f"PostgresMetrics pool_mode must be one of {', '.join(_POOL_MODES)}, got {pool_mode!r}"
            )
        super().__init__(target=_without_password(dsn))
        self.pool_mode = pool_mode
        dsn = encrypted(dsn, allow_unencrypted, self.target)
        ms = max(int(timeout * 1000), 1)
        # Through a transaction pooler a session's SET may be another client's next: the
        # timeout goes with each transaction.
        self._set_timeout = (
            f"SET LOCAL statement_timeout = {ms}" if pool_mode == "transaction_pooler" else ""
        )
        kwargs: dict[str, Any] = {"connect_timeout": max(math.ceil(timeout), 1)}
        configure: Callable[[Any], None] | None = None
        if pool_mode == "direct":
            kwargs["options"] = f"-c statement_timeout={ms}"
        elif pool_mode == "transaction_pooler":
            kwargs["prepare_threshold"] = None  # the next transaction may be another server's
        else:

            def configure(con: Any) -> None:
                con.execute(f"SET statement_timeout = {ms}")
                con.commit()

        self._pool = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs=kwargs,
            configure=configure,
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
            if self._set_timeout:
                cur.execute(self._set_timeout)
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


_POOL_MODES = ("direct", "session_pooler", "transaction_pooler")
_PLAINTEXT = ("disable", "allow", "prefer")
_THIS_MACHINE = ("localhost",)


def _this_machine(host: str) -> bool:
    """A Unix socket's folder, localhost, or a loopback address (all of 127/8, ::1)."""
    if host.startswith("/") or host in _THIS_MACHINE:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: another machine unless it is `localhost`


def encrypted(dsn: str, allow_unencrypted: bool, target: str) -> str:
    """`dsn` as it is connected to: `sslmode=require` added for a host other than this
    machine when no mode is named; a plaintext-allowing mode there refused unless
    `allow_unencrypted` (see `PostgresMetrics`)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        given = conninfo_to_dict(dsn)
    except Exception as error:  # psycopg.ProgrammingError: a DSN libpq cannot read
        raise ConfigError(f"PostgresMetrics: the DSN {target!r} cannot be read: {error}") from None
    hosts = str(given.get("host") or given.get("hostaddr") or os.environ.get("PGHOST") or "")
    remote = [h for h in hosts.split(",") if h and not _this_machine(h)]
    if not remote:
        return dsn  # a Unix socket or this machine: nothing crosses a network
    mode = given.get("sslmode") or os.environ.get("PGSSLMODE")
    if mode is None:
        return make_conninfo(dsn, sslmode="require")
    if mode in _PLAINTEXT and not allow_unencrypted:
        raise ConfigError(
            f"PostgresMetrics: sslmode={mode} lets the connection to {', '.join(remote)} fall "
            "back to plaintext: use sslmode=require (or verify-full with sslrootcert), or "
            "pass allow_unencrypted=True to accept it"
        )
    return dsn


def _without_password(dsn: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in dsn:
        return " ".join(p for p in dsn.split() if not p.startswith("password="))
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))
