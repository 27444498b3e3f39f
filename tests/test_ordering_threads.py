"""Your ordering object is called one call at a time (issue 38): `order` and `on_result`
of one object never overlap, from 16 threads, one router or two sharing it."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from policy_router import Router
from policy_router.policies.candidate import Candidate
from policy_router.policies.order import OrderContext
from policy_router.testing import FakeProvider

from .conftest import MESSAGES, fake_route


class NotThreadSafe:
    """An ordering that would notice being called twice at once."""

    reads_health = False

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.calls = 0

    def _enter(self) -> None:
        self.inside += 1
        self.most = max(self.most, self.inside)
        time.sleep(0.002)  # wide enough for an overlap to happen if it can
        self.inside -= 1
        self.calls += 1

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
        self._enter()
        return list(reversed(candidates))

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        self._enter()


def test_one_ordering_object_is_never_called_twice_at_once(fake: FakeProvider) -> None:
    ordering = NotThreadSafe()
    routers = [Router([fake_route(fake, m) for m in "ab"], order=ordering) for _ in range(2)]
    errors: list[Any] = []

    def work(router: Router) -> None:
        try:
            for _ in range(5):
                routed = router.route(model="g", messages=MESSAGES)
                assert routed.route.name == "openai/b"  # the ordering's choice holds
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(routers[i % 2],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert ordering.calls == 16 * 5 * 2  # an order and a result per request
    assert ordering.most == 1
