"""The SQLite store keeps the in-memory store's promises, write for write: the same
reservations taken or refused, the same spending after any replay of a reserve, settle or
release; and its file does not grow with every request it has settled."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_router import ConfigError, InMemoryStore, SQLiteStore, StoreUnavailableError
from policy_router.state.admission import Admission, Settlement
from policy_router.state.windows import WINDOW

NAMES = ("all", "team:a", "user:u")
ROOT = Path(__file__).resolve().parent.parent

step = st.one_of(
    st.tuples(
        st.just("reserve"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
        st.integers(0, 5), st.integers(0, 400),
    ),
    st.tuples(
        st.just("settle"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
        st.integers(0, 5), st.integers(0, 400), st.booleans(), st.booleans(),
    ),
    st.tuples(st.just("release"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True), st.integers(0, 5)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(caps=st.tuples(*(st.one_of(st.none(), st.integers(0, 1000)) for _ in NAMES)), steps=st.lists(step, max_size=25))
def test_every_budget_write_and_its_replays_end_as_in_memory(
    tmp_path_factory: pytest.TempPathFactory, caps: tuple[int | None, ...], steps: list[tuple[Any, ...]]
) -> None:
    """Holds named from a few ids, so that reserves, settles and releases are repeated in
    any order: each reserve is taken or refused (by the same account) as in memory, and
    every account's spent, reserved, calls and holds are the same after every write."""
    memory = InMemoryStore()
    disk = SQLiteStore(tmp_path_factory.mktemp("store") / "state.sqlite")
    cap_of = dict(zip(NAMES, caps, strict=True))
    try:
        for kind, names, hold, *rest in steps:
            if kind == "reserve":
                accounts = tuple((n, cap_of[n]) for n in names)
                assert disk.reserve_all(accounts, f"h{hold}", rest[0]) == memory.reserve_all(accounts, f"h{hold}", rest[0])
            elif kind == "settle":
                cost, measured, bounded = rest
                for store in (memory, disk):
                    store.settle_all(tuple(names), f"h{hold}", cost, measured=measured, bounded=bounded)
            else:
                for store in (memory, disk):
                    store.release_all(tuple(names), f"h{hold}")
            for name in NAMES:
                assert disk.spend_state(name) == memory.spend_state(name), name
    finally:
        disk.close()


def test_one_admission_and_its_settlement_leave_what_the_steps_would(tmp_path: Path) -> None:
    """`admit` and `conclude` (one transaction each) hold and charge every account, and a
    conclude repeated by its id charges nothing more."""
    store = SQLiteStore(tmp_path / "state.sqlite")
    accounts = (("all", 1000), ("user:u", 300))
    got = store.admit(Admission(route="r", token="t", health=True, budgets=accounts, hold="h", amount=200))
    assert got.reserved and store.spend_state("user:u").reserved == 200
    done = Settlement(route="r", token="t", budgets=("all", "user:u"), hold="h", cost=120)
    store.conclude(done)
    store.conclude(done)
    for name in ("all", "user:u"):
        state = store.spend_state(name)
        assert (state.spent, state.reserved, state.calls, state.holding) == (120, 0, 1, 0)
    refused = store.admit(Admission(route="r", token="t2", health=True, budgets=accounts, hold="h2", amount=200))
    assert not refused.reserved and refused.refused == 1 and store.spend_state("all").reserved == 0


def test_the_ids_of_settled_calls_are_forgotten_after_a_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A settled or released id is remembered a day (a replay of it changes nothing), then
    dropped: a store that only ever settles (no call released) keeps a day of ids, not every
    id it ever saw."""
    path = tmp_path / "state.sqlite"
    store = SQLiteStore(path)
    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start)
    for i in range(50):
        assert store.reserve_all((("all", None),), f"old{i}", 10) == -1
        store.settle_all(("all",), f"old{i}", 5, measured=True, bounded=True)
    monkeypatch.setattr(time, "time", lambda: start + 86400 + 120)
    assert store.reserve_all((("all", None),), "new", 10) == -1
    store.settle_all(("all",), "new", 5, measured=True, bounded=True)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM budget_done").fetchone()[0] == 1
    assert store.spend_state("all").spent == 51 * 5


def test_the_slots_of_finished_requests_are_forgotten_after_two_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rate slot's id is kept while a replay of its finish could come (two windows), then
    dropped: the file does not keep every slot a limited route ever gave."""
    path = tmp_path / "state.sqlite"
    store = SQLiteStore(path)
    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start)
    for i in range(30):
        assert store.take("r", f"old{i}", 10, 1000, None).taken
        store.finish("r", f"old{i}", 10)
    monkeypatch.setattr(time, "time", lambda: start + 2 * WINDOW + 1)
    assert store.take("r", "new", 10, 1000, None).taken
    store.finish("r", "new", 10)
    store.finish("r", "new", 99)  # a replay: the slot keeps what its first finish said
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM rate_done").fetchone()[0] == 1
        assert db.execute("SELECT tokens FROM rate_slots WHERE slot = 'new'").fetchone()[0] == 10
    assert store.windows(["r"])["r"].requests == 1


def test_a_recovered_route_reads_as_closed_on_every_clock_and_its_successes_write_nothing(tmp_path: Path) -> None:
    """A route that failed once and then answered is closed again: read by another process
    (another clock, so another offset to the calendar) it is the closed record, not one
    resting until a time a few seconds off zero, and a success on it changes nothing in the
    file: no write per request for the file's other processes to wait on."""
    from policy_router.ground.clock import ManualClock
    from policy_router.state.store import FRESH, Health

    path = tmp_path / "state.sqlite"
    here = SQLiteStore(path).bind("r", ManualClock(1000.0), lambda _: None)
    here.update_health("g/a", lambda h: Health(failures=1, last_error="timeout"))
    here.update_health("g/a", lambda h: FRESH)
    there = SQLiteStore(path).bind("r", ManualClock(5.0), lambda _: None)
    assert there.health("g/a") == FRESH and there.health("g/a").rest_until == 0.0
    with sqlite3.connect(path) as db:
        before = db.execute("SELECT record FROM health").fetchall()
    for _ in range(3):
        there.update_health("g/a", lambda h: FRESH if h == FRESH else Health(state="open", failures=9))
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT record FROM health").fetchall() == before
    assert there.health("g/a") == FRESH


def _commit_fails(store: SQLiteStore, *first: str) -> sqlite3.Connection:
    """A transaction of `store` whose COMMIT fails (a deferred constraint broken, as a full
    disk would fail it), after the statements `first`; the connection it used."""
    db = store._db.connection()
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("CREATE TABLE IF NOT EXISTS parent (id INTEGER PRIMARY KEY)")
    db.execute("CREATE TABLE IF NOT EXISTS child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(StoreUnavailableError, match="FOREIGN KEY"), store._tx() as tx:
        for sql in first:
            tx.execute(sql)
        tx.execute("INSERT INTO child VALUES (1)")
    return db


def test_a_commit_that_fails_leaves_the_store_usable(tmp_path: Path) -> None:
    """A COMMIT can fail (a full disk; here a deferred constraint): the operation raises
    `StoreUnavailableError`, changes nothing, and the next operation works, where a
    transaction left open would make every later one fail."""
    store = SQLiteStore(tmp_path / "state.sqlite")
    db = _commit_fails(store, "INSERT INTO budget (name, reserved) VALUES ('all', 5)")
    assert not db.in_transaction
    assert store.reserve("all", "h1", 7, 10)
    assert store.spend_state("all").reserved == 7


# -- settled with the next transaction (`settle_within`) -------------------------------------

def _states(store: SQLiteStore, *names: str) -> list[tuple[int, int, int, int]]:
    found = []
    for name in names:
        state = store.spend_state(name)
        found.append((state.spent, state.reserved, state.calls, state.holding))
    return found


deferred_step = st.one_of(
    st.tuples(
        st.just("call"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
        st.integers(0, 300), st.integers(0, 300),
    ),
    st.tuples(st.just("release"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True), st.integers(0, 300)),
    st.tuples(st.just("wait")),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    caps=st.tuples(*(st.one_of(st.none(), st.integers(0, 1000)) for _ in NAMES)),
    steps=st.lists(deferred_step, max_size=20),
)
def test_settlements_that_wait_never_show_less_held_than_was_spent(
    tmp_path_factory: pytest.TempPathFactory, caps: tuple[int | None, ...], steps: list[tuple[Any, ...]]
) -> None:
    """Calls admitted and concluded in an event loop on a store that settles later, with
    releases and waits past `settle_within` between them, beside the in-memory store: every
    admission is taken or refused as in memory; this store reads every account exactly as
    memory does after every step; another process's store on the file never reads less
    spent-and-held than was spent, nor more spent; and once the store is closed the file
    holds exactly memory's accounts."""
    path = tmp_path_factory.mktemp("store") / "state.sqlite"
    cap_of = dict(zip(NAMES, caps, strict=True))

    async def run() -> None:
        memory, here, there = InMemoryStore(), SQLiteStore(path, settle_within=0.05), SQLiteStore(path)
        try:
            for i, (kind, *rest) in enumerate(steps):
                if kind == "call":
                    names, amount, cost = rest
                    accounts = tuple((n, cap_of[n]) for n in names)
                    ask = Admission(route="r", token=f"t{i}", budgets=accounts, hold=f"h{i}", amount=amount)
                    taken = here.admit(ask).reserved
                    assert taken == memory.admit(ask).reserved
                    if taken:
                        done = Settlement(route="r", token=f"t{i}", budgets=tuple(names), hold=f"h{i}", cost=min(cost, amount))
                        here.conclude(done)
                        memory.conclude(done)
                elif kind == "release":
                    names, hold = rest
                    for store in (memory, here):
                        store.release_all(tuple(names), f"h{hold}")
                else:
                    await asyncio.sleep(0.08)
                for name in NAMES:
                    truth = memory.spend_state(name)
                    seen = there.spend_state(name)
                    assert seen.spent <= truth.spent and seen.spent + seen.reserved >= truth.spent + truth.reserved, name
                    assert here.spend_state(name) == truth, name
            waiting = [memory.spend_state(n) for n in NAMES]
        finally:
            here.close()
        assert [there.spend_state(n) for n in NAMES] == waiting
        there.close()

    asyncio.run(run())


async def _concluded(store: SQLiteStore, hold: str, amount: int = 200, cost: int = 120) -> None:
    ask = Admission(route="r", token=hold, health=True, budgets=(("all", 10_000),), hold=hold, amount=amount)
    assert store.admit(ask).reserved
    store.conclude(Settlement(route="r", token=hold, budgets=("all",), hold=hold, cost=cost))


def test_a_settlement_that_waits_reads_settled_here_held_elsewhere_until_its_time(tmp_path: Path) -> None:
    """Settled later: this process reads the call settled at once; another process reads
    its hold (the safe side) until `settle_within` has passed on the loop, then settled."""
    path = tmp_path / "state.sqlite"
    here, there = SQLiteStore(path, settle_within=0.3), SQLiteStore(path)

    async def run() -> None:
        await _concluded(here, "h1")
        assert _states(there, "all") == [(0, 200, 0, 1)]
        await asyncio.sleep(0.5)
        assert _states(there, "all") == [(120, 0, 1, 0)]
        await _concluded(here, "h2")
        assert _states(there, "all") == [(120, 200, 1, 1)]
        assert _states(here, "all") == [(240, 0, 2, 0)]  # this read wrote it
        assert _states(there, "all") == [(240, 0, 2, 0)]

    asyncio.run(run())
    here.close()


def test_under_traffic_a_call_costs_one_write_transaction(tmp_path: Path) -> None:
    """What `settle_within` is for: back-to-back calls write each one's settlement in the
    next one's reservation, one `BEGIN IMMEDIATE` a call, where settling at once takes two."""
    counts = {}
    for within in (0.0, 5.0):
        store = SQLiteStore(tmp_path / f"state-{within}.sqlite", settle_within=within)
        begun: list[str] = []
        store._db.connection().set_trace_callback(lambda sql, begun=begun: begun.append(sql) if sql.startswith("BEGIN") else None)

        async def run(store: SQLiteStore = store) -> None:
            for i in range(20):
                await _concluded(store, f"h{i}")

        asyncio.run(run())
        counts[within] = len(begun)
        assert _states(store, "all") == [(20 * 120, 0, 20, 0)]
        store.close()
    assert counts == {0.0: 40, 5.0: 20}


def test_settlements_that_wait_are_written_at_close_and_when_the_program_ends(tmp_path: Path) -> None:
    """Nothing is left held by a settlement that waited: `close()` writes it, and a script
    that ends right after its call (its loop, and the loop's timer, gone) writes it at
    exit."""
    path = tmp_path / "state.sqlite"
    store = SQLiteStore(path, settle_within=30)
    asyncio.run(_concluded(store, "h1"))
    store.close()
    assert _states(SQLiteStore(path), "all") == [(120, 0, 1, 0)]
    script = (
        "import asyncio\n"
        "from policy_router import SQLiteStore\n"
        "from tests.test_sqlite_store import _concluded\n"
        f"store = SQLiteStore({str(path)!r}, settle_within=30)\n"
        "asyncio.run(_concluded(store, 'h2', cost=50))\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert _states(SQLiteStore(path), "all") == [(170, 0, 2, 0)]


def test_a_transaction_that_fails_keeps_the_settlements_that_wait(tmp_path: Path) -> None:
    """A transaction that wrote waiting settlements and then rolled back (its own work
    raised, or its COMMIT failed) leaves them waiting: written once by the next one,
    neither lost nor charged twice."""
    path = tmp_path / "state.sqlite"
    store = SQLiteStore(path, settle_within=30)
    asyncio.run(_concluded(store, "h1"))
    with pytest.raises(RuntimeError), store._tx():
        raise RuntimeError("the operation's own failure")
    assert _states(SQLiteStore(path), "all") == [(0, 200, 0, 1)]
    _commit_fails(store)
    assert _states(SQLiteStore(path), "all") == [(0, 200, 0, 1)]
    assert _states(store, "all") == [(120, 0, 1, 0)]
    assert _states(SQLiteStore(path), "all") == [(120, 0, 1, 0)]
    store.close()


def test_a_probe_answered_on_a_store_that_settles_later_is_told(tmp_path: Path) -> None:
    """The breaker's `RestClosed` comes when a resting route's probe answers, also when
    the store writes the success after the call returned (at the next transaction)."""
    from policy_router import Breaker
    from policy_router.ground.clock import MonotonicClock
    from policy_router.ground.outcome import Fault, FaultKind
    from policy_router.policies.breaker import HealthBook, RestClosed

    from .conftest import Stepped

    events: list[object] = []
    clock = MonotonicClock()
    store = SQLiteStore(tmp_path / "state.sqlite", settle_within=30).bind("r", clock, events.append)
    health = Stepped(HealthBook(Breaker(failures=1, cooldown=0.2), store, events.append))
    health.failed("g/a", Fault(FaultKind.SERVER_ERROR, 503, "overloaded"), clock.now())
    time.sleep(0.3)
    assert health.admit("g/a", clock.now()) is True

    async def run() -> None:
        change, _, made = health._core.succeeding("g/a", "t")
        store.conclude(Settlement(route="g/a", token="t", change=change))
        made()
        assert not [e for e in events if isinstance(e, RestClosed)]  # not written yet
        assert store.health("g/a").state == "closed"

    asyncio.run(run())
    assert [e for e in events if isinstance(e, RestClosed)] == [RestClosed("g/a", 1)]
    store.close()


def test_settle_within_is_checked_naming_the_field(tmp_path: Path) -> None:
    for bad in (-1, 61, float("nan"), True, "0.05", 2000.0):
        with pytest.raises(ConfigError, match="settle_within"):
            SQLiteStore(tmp_path / "state.sqlite", settle_within=bad)
    with pytest.raises(ConfigError, match="settle_within"):
        SQLiteStore(tmp_path / "state.sqlite", lease=10, settle_within=6)
