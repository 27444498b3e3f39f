"""The conformance suite every metrics store runs: SQLite, DuckDB and PostgreSQL (a real
server the tests start, from the pgserver wheel). A backend of your own passes if it
passes these: add its factory to the `made` fixture."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from policy_router import (
    DuckDBMetrics,
    MetricRow,
    MetricsSchemaError,
    PostgresMetrics,
    SQLiteMetrics,
)
from policy_router.observe.metrics import SQLMetrics, open_target
from policy_router.observe.metrics.schema import META
from policy_router.policies.score import Evidence, HistoryQuery

from ._postgres import PostgresServer

NOW = 1_800_000_000.0
Factory = Callable[[], SQLMetrics]


@pytest.fixture(params=["sqlite", "duckdb", "postgres"])
def made(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Factory]]:
    """(backend, a factory of stores on one fresh, empty target)."""
    if request.param == "sqlite":
        yield "sqlite", lambda: SQLiteMetrics(tmp_path / "m.sqlite")
    elif request.param == "duckdb":
        yield "duckdb", lambda: DuckDBMetrics(tmp_path / "m.duckdb")
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        dsn = server.database()
        yield "postgres", lambda: PostgresMetrics(dsn)


@pytest.fixture
def store(made: tuple[str, Factory]) -> Iterator[SQLMetrics]:
    backend, factory = made
    s = factory()
    if backend == "postgres":
        s.create()
    yield s
    s.close()


def row(route: str = "a", outcome: str = "success", latency: float | None = 0.5, **kw: object) -> MetricRow:
    values: dict[str, object] = {
        "recorded_at": NOW - 10, "scope": "app", "route_id": route, "model": f"openai/{route}",
        "endpoint": "chat", "streaming": False, "outcome": outcome, "latency": latency,
        "journey_id": "j",
    }
    values.update(kw)
    return MetricRow(**values)  # type: ignore[arg-type]


def query(*routes: str, streaming: bool = False, window: float = 3600.0, half_life: float | None = None) -> HistoryQuery:
    return HistoryQuery(routes=tuple((r, f"openai/{r}") for r in routes), endpoint="chat", streaming=streaming, window=window, half_life=half_life)


def test_a_fresh_embedded_target_is_made_on_first_write_and_a_shared_one_only_by_create(
    made: tuple[str, Factory],
) -> None:
    backend, factory = made
    s = factory()
    assert s.inspect().state == "absent"
    if backend == "postgres":
        with pytest.raises(MetricsSchemaError, match="policy-router metrics create"):
            s.write([row()])
        assert s.create().state == "current"
    s.write([row()])
    state = s.inspect()
    assert (state.state, state.version, state.rows) == ("current", 1, 1)
    with pytest.raises(MetricsSchemaError, match="already holds a metrics schema"):
        s.create()
    assert s.migrate().state == "current"  # nothing to do, nothing changed
    s.close()


def test_one_row_per_requested_route_with_zeros_for_no_history(store: SQLMetrics) -> None:
    store.write([row("a"), row("a", "error", None), row("a", "rate_limited", None), row("a", "timeout", None)])
    found = store.aggregate(query("a", "never"), "app", NOW)
    assert found["never"] == Evidence()
    assert found["a"] == Evidence(attempts=4, successes=1, latency_weight=1, latency_total=0.5, errors=1, rate_limited=1, timeouts=1)


def test_averages_count_successes_only_and_partitions_never_blend(store: SQLMetrics) -> None:
    store.write(
        [
            row("a", latency=1.0),
            row("a", latency=3.0),
            row("a", "error", latency=0.005),  # a fast failure adds no speed
            row("a", latency=0.1, streaming=True),  # streaming: its own partition
            row("a", latency=9.0, scope="other"),  # another scope
            row("a", latency=9.0, endpoint="responses"),  # another endpoint
            row("a", latency=9.0, model="openai/other"),  # another model under the same id
            row("a", latency=9.0, recorded_at=NOW - 7200),  # outside the window
            row("a", "not_sent", None),  # never reached the provider: no attempt
        ]
    )
    regular = store.aggregate(query("a"), "app", NOW)["a"]
    assert (regular.attempts, regular.successes, regular.latency_weight) == (3, 2, 2)
    assert regular.latency_total == pytest.approx(4.0)
    streaming = store.aggregate(query("a", streaming=True), "app", NOW)["a"]
    assert (streaming.attempts, streaming.latency_total) == (1, pytest.approx(0.1))


def test_a_half_life_weighs_an_attempt_that_old_by_half(store: SQLMetrics) -> None:
    # NOW is on the hour: an attempt in the hour just ended weighs 1, one an hour before
    # that weighs 0.5, and one more than six half-lives back is not read.
    store.write([row("a", recorded_at=NOW - 10), row("a", "error", None, recorded_at=NOW - 3610), row("a", recorded_at=NOW - 7 * 3600 - 10)])
    found = store.aggregate(query("a", window=6 * 3600, half_life=3600), "app", NOW)["a"]
    assert found.attempts == pytest.approx(1.5) and found.successes == pytest.approx(1.0)
    assert found.errors == 1  # tallies are exact counts, never weighted


def test_a_success_without_a_latency_is_success_but_no_speed(store: SQLMetrics) -> None:
    store.write([row("a", latency=None)])
    found = store.aggregate(query("a"), "app", NOW)["a"]
    assert (found.successes, found.latency_weight) == (1, 0)


def test_rows_read_back_oldest_first_by_scope_and_time(store: SQLMetrics) -> None:
    store.write([row("b", recorded_at=NOW - 5), row("a", recorded_at=NOW - 9, cost_micros=120, currency="USD"), row("c", scope="x")])
    rows = store.read("app", NOW - 60)
    assert [r.route_id for r in rows] == ["a", "b"] and rows[0].cost_micros == 120
    assert rows[0].streaming is False and len(store.read()) == 3


def test_a_target_at_another_version_is_refused_and_left_as_it_was(made: tuple[str, Factory]) -> None:
    backend, factory = made
    s = factory()
    if backend == "postgres":
        s.create()
    s.write([row()])
    for version, says in ((0, "policy-router metrics migrate"), (99, "newer policy_router")):
        s._run(lambda cur, v=version: cur.execute(f"UPDATE {META} SET version = {v}"))
        other = factory()
        with pytest.raises(MetricsSchemaError, match=says):
            other.write([row()])
        assert other.inspect().rows == 1  # nothing written, nothing changed
        other.close()
    s.close()


def test_the_aggregate_is_one_statement_for_ten_routes(store: SQLMetrics) -> None:
    """Ten routes, one call to the backend, ten rows back (a row scan in Python would show
    as many calls, or as rows)."""
    store.write([row(f"r{i}", latency=0.1 * (i + 1)) for i in range(10) for _ in range(3)])
    calls: list[int] = []
    run = store._run

    def counting(work: Callable[..., object]) -> object:
        calls.append(1)
        return run(work)

    store._run = counting  # type: ignore[method-assign]
    found = store.aggregate(query(*(f"r{i}" for i in range(10))), "app", NOW)
    assert len(calls) == 1 and len(found) == 10
    assert all(math.isclose(found[f"r{i}"].latency_total, 0.3 * (i + 1)) for i in range(10))


def test_targets_name_their_backend(tmp_path: Path) -> None:
    assert isinstance(open_target(str(tmp_path / "m.sqlite")), SQLiteMetrics)
    assert isinstance(open_target(f"duckdb:{tmp_path / 'm.db'}"), DuckDBMetrics)
    assert isinstance(open_target("postgresql://u:secret@db.example:5432/m"), PostgresMetrics)
    assert "secret" not in open_target("postgresql://u:secret@db.example:5432/m").target
    assert time.time() > 0


def test_processes_starting_on_one_fresh_sqlite_file_all_get_ready(tmp_path: Path) -> None:
    """Many writers meet a new file at once (as processes starting together do): one makes
    the schema, the others wait for it instead of failing a read-then-write race."""
    import threading

    path = tmp_path / "fresh.sqlite"
    stores = [SQLiteMetrics(path) for _ in range(8)]
    start = threading.Barrier(len(stores))
    failed: list[BaseException] = []

    def go(s: SQLiteMetrics) -> None:
        start.wait()
        try:
            s.write([row()])
        except BaseException as error:
            failed.append(error)

    threads = [threading.Thread(target=go, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed and stores[0].inspect().rows == len(stores)
