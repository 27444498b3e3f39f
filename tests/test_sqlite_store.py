"""The SQLite store keeps the in-memory store's promises, write for write: the same
reservations taken or refused, the same spending after any replay of a reserve, settle or
release; and its file does not grow with every request it has settled."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_router import InMemoryStore, SQLiteStore, StoreUnavailableError
from policy_router.state.admission import Admission, Settlement
from policy_router.state.windows import WINDOW

NAMES = ("all", "team:a", "user:u")

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


def test_a_commit_that_fails_leaves_the_store_usable(tmp_path: Path) -> None:
    """A COMMIT can fail (a full disk; here a deferred constraint): the operation raises
    `StoreUnavailableError`, changes nothing, and the next operation works, where a
    transaction left open would make every later one fail."""
    store = SQLiteStore(tmp_path / "state.sqlite")
    db = store._db.connection()
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    db.execute("CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(StoreUnavailableError, match="FOREIGN KEY"), store._tx() as tx:
        tx.execute("INSERT INTO budget (name, reserved) VALUES ('all', 5)")
        tx.execute("INSERT INTO child VALUES (1)")
    assert not db.in_transaction
    assert store.reserve("all", "h1", 7, 10)
    assert store.spend_state("all").reserved == 7
