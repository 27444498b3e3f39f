"""`server.leaving.unless_gone`: the router's work for a request is cancelled, and let
settle, when its client disconnects; the request's own task goes on unharmed (it still
answers, counts and logs), and nothing listens for the client once the work is done."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from policy_router.server.leaving import ClientGone, unless_gone


class _Client:
    """An ASGI `receive` whose body was read: it answers `http.disconnect` once `leave`."""

    def __init__(self) -> None:
        self.left = asyncio.Event()
        self.listening = 0

    async def receive(self) -> dict[str, Any]:
        self.listening += 1
        try:
            await self.left.wait()
        finally:
            self.listening -= 1
        return {"type": "http.disconnect"}


async def _slow_work(settled: list[str]) -> str:
    """The router's work on a slow provider: when cancelled, it settles (awaiting, as a
    store's write does) and says so in `settled`."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await asyncio.sleep(0.01)
        settled.append("settled")
        raise
    return "answer"


def test_a_client_that_leaves_cancels_the_work_lets_it_settle_and_leaves_the_request_unharmed() -> None:
    settled: list[str] = []

    async def request() -> tuple[str, int]:
        client = _Client()
        asyncio.get_running_loop().call_later(0.05, client.left.set)
        with pytest.raises(ClientGone):
            await unless_gone(client.receive, _slow_work(settled))
        await asyncio.sleep(0.01)  # the request's task still awaits: no cancellation left in it
        task = asyncio.current_task()
        assert task is not None
        return "went on", task.cancelling()

    assert asyncio.run(request()) == ("went on", 0)
    assert settled == ["settled"]


def test_work_done_first_is_the_answer_and_nothing_listens_after() -> None:
    async def request() -> tuple[str, int, int]:
        client = _Client()

        async def work() -> str:
            await asyncio.sleep(0.01)
            return "answer"

        found = await unless_gone(client.receive, work())
        await asyncio.sleep(0)  # the listener's cancellation lands
        client.left.set()  # a disconnect after the answer cancels nothing
        await asyncio.sleep(0.01)
        task = asyncio.current_task()
        assert task is not None
        return found, client.listening, task.cancelling()

    assert asyncio.run(request()) == ("answer", 0, 0)


def test_a_shutdown_cancelling_the_request_cancels_the_work_and_is_not_taken_for_a_client_leaving() -> None:
    settled: list[str] = []

    async def main() -> None:
        client = _Client()
        request = asyncio.ensure_future(unless_gone(client.receive, _slow_work(settled)))
        await asyncio.sleep(0.02)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.sleep(0)
        assert client.listening == 0

    asyncio.run(main())
    assert settled == ["settled"]


def test_work_that_turns_the_cancellation_into_its_own_error_still_reads_as_the_client_gone() -> None:
    async def work() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise TimeoutError("the router's own reading of the cancellation") from None

    async def request() -> int:
        client = _Client()
        asyncio.get_running_loop().call_later(0.02, client.left.set)
        with pytest.raises(ClientGone):
            await unless_gone(client.receive, work())
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0.01)
        return task.cancelling()

    assert asyncio.run(request()) == 0
