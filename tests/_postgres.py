"""A PostgreSQL server for the tests, from the `pgserver` wheel (its own binaries), on a
Unix socket in a temporary folder: started once per session, a fresh database per test."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from typing import Any

_COUNT = itertools.count(1)


class PostgresServer:
    """`dsn(name)` is a libpq DSN for database `name` (made by `database()`)."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="policy_router-pg-")
        self._server: Any = None

    def start(self) -> PostgresServer:
        # pgserver asks platformdirs for a runtime folder, which warns where none is set.
        os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="policy_router-run-"))
        import pgserver

        self._server = pgserver.get_server(self._dir, cleanup_mode="delete")
        return self

    @property
    def uri(self) -> str:
        return str(self._server.get_uri())

    def dsn(self, database: str) -> str:
        base, _, query = self.uri.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{database}?{query}"

    def database(self) -> str:
        """A new empty database's DSN."""
        import psycopg

        name = f"t{next(_COUNT)}"
        with psycopg.connect(self.uri, autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server
