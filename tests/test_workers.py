"""Sync calls under a deadline run on a pool of workers; when every worker is busy a call
waits in the pool's queue. A queued call whose deadline passes is never sent, and nothing it
held stays held."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from policy_router import Budget, DeadlineExceededError, Hedge, Router
from policy_router.drive import workers
from policy_router.testing import FakeProvider, Hang, Reply

from .conftest import MESSAGES, fake_route, prices


@pytest.fixture
def busy(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """A pool of one worker, kept busy until the test sets the event it yields."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="busy-test")
    monkeypatch.setattr(workers, "WORKERS", pool)
    done = threading.Event()
    pool.submit(done.wait, 30)
    yield done
    done.set()
    pool.shutdown(wait=True)


def _router(fake: FakeProvider, **policies: Any) -> Router:
    return Router(
        [fake_route(fake, "a", prices=prices(a="1"), rpm=100)],
        budget=Budget("1.00"),
        **policies,
    )


def _held(router: Router) -> tuple[int, int]:
    """What the router still holds: budget reserved (micros) and rate slots in flight."""
    usage = router.usage()["openai/a"]
    return router.spending().reserved.micros, usage.in_flight


@pytest.mark.parametrize("kind", ["sync", "stream"])
def test_a_call_queued_behind_busy_workers_is_never_sent_after_its_deadline(
    fake: FakeProvider, busy: threading.Event, kind: str
) -> None:
    """Every worker is busy: the call raises at its deadline, and once the workers are
    free again its request never reaches the provider; its reservation and rate slot are
    given back and the route is not rested for a request it never got."""
    router = _router(fake, deadline=0.3)
    with pytest.raises(DeadlineExceededError) as caught:
        if kind == "sync":
            router.completion(model="g", messages=MESSAGES, max_tokens=5)
        else:
            list(router.completion(model="g", messages=MESSAGES, max_tokens=5, stream=True))
    busy.set()
    workers.WORKERS.submit(time.sleep, 0).result()  # the queue has drained
    time.sleep(0.2)
    assert fake.requests() == 0
    assert _held(router) == (0, 0)
    assert not router.resting() and router.health()["openai/a"].failures == 0
    journey = caught.value.journey
    assert not journey.attempts and "waited for a free worker" in str(journey)


def test_a_hedged_call_queued_behind_busy_workers_sends_nothing_after_its_deadline(
    fake: FakeProvider, busy: threading.Event
) -> None:
    """The same under a hedge: neither the first attempt nor its hedge leaves the queue
    once the deadline has passed."""
    router = _router(fake, deadline=0.3, hedge=Hedge(after=0.05))
    with pytest.raises(DeadlineExceededError):
        router.completion(model="g", messages=MESSAGES, max_tokens=5)
    busy.set()
    workers.WORKERS.submit(time.sleep, 0).result()
    time.sleep(0.2)
    assert fake.requests() == 0 and _held(router) == (0, 0)


def test_a_call_that_gets_a_worker_in_time_is_sent_as_ever(fake: FakeProvider) -> None:
    """With a worker free the deadline bounds the call and it answers: the queue's check
    changes nothing for a call that started in time."""
    fake.script("a", Hang(0.05, Reply("hi")))
    router = _router(fake, deadline=5)
    response = router.completion(model="g", messages=MESSAGES, max_tokens=5)
    assert response.choices[0].message.content == "hi" and fake.requests("a") == 1
    assert _held(router) == (0, 0)
