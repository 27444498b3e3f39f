"""PostgreSQL as production runs it: a DSN to another machine never falls back to
plaintext in silence (checked at the wire: what a listener standing in for the server
receives), and the store works through a transaction pooler (no server-side prepared
statements, the statement timeout set per transaction since a pooler ignores the startup
`options`), against the real server the tests start."""

from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from policy_router import ConfigError, PostgresMetrics, Router
from policy_router.observe.metrics.backends import encrypted

from ._postgres import PostgresServer

_SSL_REQUEST = 80877103  # the code of libpq's SSLRequest packet


class _Listener:
    """A TCP listener on loopback standing in for a server without TLS: it answers an
    SSLRequest with "N" (no TLS here) and keeps every byte a client sends after it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.asked_tls = 0
        self.plaintext: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                con, _ = self.sock.accept()
            except OSError:
                return
            with con:
                con.settimeout(2)
                try:
                    head = con.recv(8)
                    if len(head) == 8 and struct.unpack("!ii", head) == (8, _SSL_REQUEST):
                        self.asked_tls += 1
                        con.sendall(b"N")
                        head = con.recv(4096)
                    if head:
                        self.plaintext.append(head)  # a startup message, in the clear
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    # The pool logs each refused connection at WARNING: expected here, kept off stderr.
    pool_log = logging.getLogger("psycopg.pool")
    level = pool_log.level
    pool_log.setLevel(logging.CRITICAL)
    server = _Listener()
    yield server
    server.close()
    pool_log.setLevel(level)


def _remote(port: int, extra: str = "") -> str:
    # `host` names another machine (what TLS is judged by); `hostaddr` makes libpq connect
    # to the listener on loopback instead of resolving it.
    return f"host=db.example hostaddr=127.0.0.1 port={port} user=app dbname=metrics connect_timeout=2{extra}"


def test_a_dsn_to_another_machine_naming_no_sslmode_never_sends_plaintext(
    listener: _Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGSSLMODE", raising=False)
    store = PostgresMetrics(_remote(listener.port), timeout=1.0)
    with pytest.raises(Exception):  # noqa: B017 - the pool's own error: it never connected
        store.inspect()
    store.close()
    assert listener.asked_tls >= 1
    assert listener.plaintext == []  # libpq's `prefer` would have gone on in the clear


def test_libpq_prefer_does_fall_back_to_plaintext_here(listener: _Listener) -> None:
    """The listener sees what the default guards against: with `prefer` (libpq's default)
    the client goes on without TLS and sends its startup message in the clear."""
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(_remote(listener.port, " sslmode=prefer"))
    assert listener.plaintext and b"app" in listener.plaintext[0]


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer"])
def test_a_plaintext_mode_to_another_machine_is_refused_unless_allowed(mode: str) -> None:
    dsn = f"postgresql://app:secret-pw@db.example:5432/metrics?sslmode={mode}"
    with pytest.raises(ConfigError, match="allow_unencrypted=True") as raised:
        PostgresMetrics(dsn)
    assert "secret-pw" not in str(raised.value)
    PostgresMetrics(dsn, allow_unencrypted=True).close()  # said on purpose: accepted


@pytest.mark.parametrize(
    ("dsn", "added"),
    [
        ("postgresql://app@db.example/m", True),
        ("postgresql://app@10.0.0.5:6543/m", True),
        ("postgresql://app@db.example/m?sslmode=verify-full", False),  # never downgraded
        ("postgresql://app@localhost/m", False),
        ("postgresql://app@127.0.0.2/m", False),  # all of 127/8 is this machine
        ("postgresql://app@[::1]/m", False),
        ("postgresql://app@/m?host=/run/postgresql", False),  # a Unix socket
    ],
)
def test_require_is_added_only_where_a_network_is_crossed(
    dsn: str, added: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGSSLMODE", raising=False)
    monkeypatch.delenv("PGHOST", raising=False)
    result = psycopg.conninfo.conninfo_to_dict(encrypted(dsn, False, dsn))
    given = psycopg.conninfo.conninfo_to_dict(dsn).get("sslmode")
    assert result.get("sslmode") == ("require" if added else given)


def test_pgsslmode_in_the_environment_is_an_explicit_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGSSLMODE", "disable")
    with pytest.raises(ConfigError, match="sslmode=disable"):
        PostgresMetrics("postgresql://app@db.example/m")


def test_an_unknown_pool_mode_is_named() -> None:
    with pytest.raises(ConfigError, match="pool_mode must be one of direct, session_pooler"):
        PostgresMetrics("postgresql://app@localhost/m", pool_mode="pgbouncer")


def _prepared(store: PostgresMetrics) -> int:
    return int(store._run(lambda cur: cur.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]))


@pytest.mark.parametrize("mode", ["direct", "session_pooler", "transaction_pooler"])
def test_every_pool_mode_bounds_each_statement_and_only_the_transaction_pooler_never_prepares(
    postgres_server: PostgresServer, mode: str
) -> None:
    dsn = postgres_server.database()
    PostgresMetrics(dsn).create()
    store = PostgresMetrics(dsn, pool_mode=mode, timeout=0.5, min_size=1, max_size=1)
    # The timeout as the statement sees it, set however the mode sets it (no startup
    # `options` through a pooler: a pooler would drop them).
    shown = store._run(lambda cur: cur.execute("SHOW statement_timeout").fetchone()[0])
    assert shown == "500ms"
    with pytest.raises(psycopg.errors.QueryCanceled):
        store._run(lambda cur: cur.execute("SELECT pg_sleep(3)"))
    from policy_router.policies.score import HistoryQuery

    query = HistoryQuery(routes=(("openai/a@x", "openai/a"),), endpoint="chat", streaming=False, window=3600.0, half_life=None)
    for _ in range(8):  # psycopg prepares a statement run five times, unless told not to
        store.aggregate(query, "app", 0.0)
    assert (_prepared(store) == 0) == (mode == "transaction_pooler")
    store.close()


def test_a_policy_file_names_the_pool_mode(postgres_server: PostgresServer, tmp_path: Any) -> None:
    import yaml

    dsn = postgres_server.database()
    PostgresMetrics(dsn).create()
    route = {"model": "openai/a", "api_base": "http://127.0.0.1:9/v1", "api_key": "sk-x"}
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "metrics": {"postgres": dsn, "pool_mode": "transaction_pooler", "timeout": 0.5},
        "groups": {"g": {"routes": [route]}},
    }))
    with Router.from_config(policy) as router:
        assert router._life.now.recorder is not None
        assert router._life.now.recorder.store.pool_mode == "transaction_pooler"
    policy.write_text(yaml.safe_dump({
        "metrics": {"postgres": dsn, "pool_mode": "bouncer"}, "groups": {"g": {"routes": [route]}},
    }))
    with pytest.raises(ConfigError, match="metrics: PostgresMetrics pool_mode must be one of"):
        Router.from_config(policy)
