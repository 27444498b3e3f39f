"""A sync stream dropped unread gives its connection back off the thread that collects it,
also when the collector finds it in a reference cycle: there, closing the provider's
response on the collecting thread asks for the HTTP client's pool lock, which that thread
may be holding (it collects while it makes a request), and it waits for itself for good."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import httpcore
import pytest

from policy_router import Retry, Router
from policy_router.testing import Fail, FakeProvider, Reply

from .conftest import MESSAGES, fake_route


class _Watched:
    """A pool's lock that counts a thread asking again for the lock it holds (where
    httpcore's would wait for itself forever) and lets it through."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._depth = 0
        self.asked_again = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._owner == threading.get_ident():
            self.asked_again += 1
            self._depth += 1
            return True
        if not self._lock.acquire(blocking, timeout):
            return False
        self._owner, self._depth = threading.get_ident(), 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()


@pytest.fixture
def watched_pools() -> Iterator[list[_Watched]]:
    """Every HTTP connection pool of the process, its lock watched, until the test ends."""
    pools = [o for o in gc.get_objects() if isinstance(o, httpcore.ConnectionPool)]
    saved = [p._optional_thread_lock._lock for p in pools]
    watched = [_Watched() for _ in pools]
    for pool, lock in zip(pools, watched, strict=True):
        pool._optional_thread_lock._lock = lock  # type: ignore[assignment]
    try:
        yield watched
    finally:
        for pool, lock in zip(pools, saved, strict=True):
            pool._optional_thread_lock._lock = lock


def _collect_holding(locks: list[_Watched]) -> None:
    """Collect garbage while this thread holds every pool's lock, as httpcore does while
    it sends."""
    for lock in locks:
        lock.acquire()
    try:
        gc.collect()
    finally:
        for lock in locks:
            lock.release()


def _closed_soon(responses: list[Any], seconds: float = 10.0) -> bool:
    """Whether every one of the providers' `responses` is closed within `seconds` (the
    router closes a dropped stream on a thread of its own)."""
    deadline = time.monotonic() + seconds
    while not all(r.is_closed for r in responses) and time.monotonic() < deadline:
        time.sleep(0.01)
    return all(r.is_closed for r in responses)


def test_a_stream_dropped_in_a_reference_cycle_is_closed_off_the_collecting_thread(
    fake: FakeProvider, request: pytest.FixtureRequest
) -> None:
    """The first route fails, so the journey keeps its exception, whose traceback reaches
    the frames that made the stream: dropped, the stream is garbage only in a cycle. The
    collector runs while this thread holds every pool's lock, as httpcore does while it
    sends; nothing asks this thread for a lock it holds, the stream is collected, and its
    connection is given back (the next call on the route is answered)."""
    fake.script("a", Fail(503))
    fake.script("b", Reply(" ".join(f"w{i}" for i in range(40))))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=None)
    gc.collect()
    gc.disable()  # collected only where the test says
    try:
        stream = router.completion(model="g", messages=MESSAGES, stream=True)
        assert stream.journey.attempts[0].outcome != "answered"
        response = stream._it.completion_stream.response  # the provider's, as httpx holds it
        gone = weakref.ref(stream)
        locks: list[Any] = request.getfixturevalue("watched_pools")
        del stream
        _collect_holding(locks)
    finally:
        gc.enable()
    assert sum(lock.asked_again for lock in locks) == 0
    assert gone() is None
    assert _closed_soon([response])


@pytest.mark.parametrize("before", ["a failover", "a retry"])
def test_streams_read_in_part_and_dropped_after_a_failed_attempt_never_wait_on_a_held_lock(
    fake: FakeProvider, request: pytest.FixtureRequest, before: str
) -> None:
    """Three streams, each answered after a failed attempt (another route, or the same
    one after its Retry-After) and read to their first chunk, then dropped: each is
    garbage only in a cycle (the frames of the caller that read it are kept by the failed
    attempt's traceback), with the provider's stream inside it suspended mid-answer.
    The collector runs while this thread holds every pool's lock: no stream is closed on
    it (the router keeps each until it has closed it on its own thread), and every
    response is closed soon after."""
    words = Reply(" ".join(f"w{i}" for i in range(40)))
    if before == "a failover":
        fake.script("a", Fail(503), Fail(503), Fail(503))
        router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=None)
    else:
        fake.script("a", Fail(429, retry_after=0.05), words, Fail(429, retry_after=0.05), words,
                    Fail(429, retry_after=0.05), words)
        router = Router([fake_route(fake, "a", retry=Retry(attempts=2)), fake_route(fake, "b")], breaker=None)
    fake.script("b", words, words, words)

    def read_first() -> Any:
        # A caller's function: its frame (holding the stream) is one the failed attempt's
        # traceback keeps, through the router's frames it called.
        routed = router.route(model="g", messages=MESSAGES, stream=True)
        assert routed.journey.attempts[0].outcome != "answered"
        next(iter(routed.response))
        return routed.response._it.completion_stream.response

    gc.collect()
    gc.disable()  # collected only where the test says
    try:
        responses = [read_first() for _ in range(3)]
        locks: list[Any] = request.getfixturevalue("watched_pools")
        _collect_holding(locks)
    finally:
        gc.enable()
    assert sum(lock.asked_again for lock in locks) == 0
    assert _closed_soon(responses)
