"""What routing history costs: the aggregate query `Order.SCORE` runs per ranking, and the
CPU a call spends recording its attempt.

Run: `make bench` (or `.venv/bin/python tests/bench/metrics.py [rows] [repeats]`).

Per backend (SQLite, DuckDB, PostgreSQL from the pgserver wheel): 100,000 rows over 10
routes, both kinds and two endpoints, spread over 14 days (so every route has 336 hours of
history in the hourly sums a ranking reads); the aggregate for the 10 routes (flat, and
with a half-life) is timed `repeats` times after one warm-up and the median is printed,
with SQLite's query plan (the key it seeks). Recording: `Recorder.__call__` (the
part a call pays: the row built and appended to the buffer) timed over 20,000 attempts, as
CPU per call; the background write of those rows is timed apart (it is off the request path).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from policy_router import Attempt, DuckDBMetrics, MetricRow, PostgresMetrics, SQLiteMetrics
from policy_router.ground.money import Money, Usage
from policy_router.observe.metrics import Recorder, SQLMetrics, schema
from policy_router.policies.score import HistoryQuery
from tests._postgres import PostgresServer

ROUTES = [f"route-{i}" for i in range(10)]
NOW = time.time()


def rows(n: int) -> list[MetricRow]:
    rng = random.Random(1)
    out = []
    for i in range(n):
        route = ROUTES[i % len(ROUTES)]
        ok = rng.random() < 0.9
        out.append(
            MetricRow(
                recorded_at=NOW - rng.random() * 14 * 86400, scope="app", route_id=route, model=f"openai/{route}",
                endpoint="chat" if i % 5 else "responses", streaming=bool(i % 3 == 0),
                outcome="success" if ok else rng.choice(["error", "rate_limited", "timeout"]),
                latency=rng.uniform(0.05, 3.0) if ok else None, tokens_in=100, tokens_out=40,
                cost_micros=120, currency="USD", journey_id=f"j{i}",
            )
        )
    return out


def timed(store: SQLMetrics, query: HistoryQuery, repeats: int) -> float:
    store.aggregate(query, "app", NOW)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        store.aggregate(query, "app", NOW)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def plan(store: SQLiteMetrics, query: HistoryQuery) -> str:
    sql, args = schema.aggregate_sql("sqlite", query, "app", NOW)
    found = store._run(lambda cur: cur.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall())
    steps = [str(r[-1]) for r in found if str(r[-1]).startswith("SEARCH")]
    return f"{steps[0]} (x{len(steps)})" if steps else "; ".join(str(r[-1]) for r in found)


def recording(n: int = 20_000) -> tuple[float, float]:
    """(CPU seconds per recorded attempt on the request path, seconds to write them all)."""

    class Held:
        target = "memory"
        written = 0

        def write(self, batch: list[MetricRow]) -> None:
            self.written += len(batch)

    attempt = Attempt(route="openai/a", outcome="answered", elapsed=0.2, usage=Usage(prompt=100, completion=40), cost=Money(120, "USD"),
                      group="g", journey_id="j", route_id="openai/a@h/v1", endpoint="chat")
    recorder = Recorder(Held(), "app", {"openai/a@h/v1": "openai/a"}, buffer=n + 1)  # type: ignore[arg-type]
    start = time.process_time()
    for _ in range(n):
        recorder(attempt)
    on_path = (time.process_time() - start) / n
    began = time.perf_counter()
    recorder.flush(60)
    return on_path, time.perf_counter() - began


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    made = rows(n)
    flat = HistoryQuery(routes=tuple((r, f"openai/{r}") for r in ROUTES), endpoint="chat", streaming=False, window=14 * 86400, half_life=None)
    decayed = HistoryQuery(routes=flat.routes, endpoint="chat", streaming=False, window=6 * 86400, half_life=86400.0)
    folder = Path(tempfile.mkdtemp())
    with PostgresServer() as pg:
        dsn = pg.database()
        PostgresMetrics(dsn).create()
        stores: list[tuple[str, SQLMetrics]] = [
            ("SQLite", SQLiteMetrics(folder / "m.sqlite")),
            ("DuckDB", DuckDBMetrics(folder / "m.duckdb")),
            ("PostgreSQL", PostgresMetrics(dsn)),
        ]
        print(f"{n:,} rows, 10 routes; aggregate for the 10 routes, median of {repeats} runs")
        for name, store in stores:
            for i in range(0, n, 5000):
                store.write(made[i : i + 5000])
            print(
                f"  {name:<10} flat {timed(store, flat, repeats) * 1000:7.2f} ms   "
                f"half-life {timed(store, decayed, repeats) * 1000:7.2f} ms"
            )
            if isinstance(store, SQLiteMetrics):
                print(f"             plan: {plan(store, flat)}")
            store.close()
    per_call, written = recording()
    print(f"recording: {per_call * 1e6:.1f} us of CPU per attempt on the request path; "
          f"20,000 rows handed to the writer in {written * 1000:.0f} ms off it")


if __name__ == "__main__":
    main()
