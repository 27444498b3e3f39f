"""`batch_completion` / `abatch_completion`: LiteLLM's batch shape through the router, in
input order, with a progress bar, a budget that stops the batch and a deadline over it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from policy_router import (
    Budget,
    ConfigError,
    DeadlineExceededError,
    OverBudgetError,
    Router,
)
from policy_router.core.events import RequestEnded, RequestStarted
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from .conftest import fake_route, prices

PRICES = prices(a="1000")


class Echo:
    """Answers each request with its own prompt (after `hold` seconds); a prompt saying
    "bad" gets a 400."""

    def __init__(self, hold: float = 0.0) -> None:
        self.hold = hold

    def __call__(self, path: str, body: Mapping[str, Any]) -> Any:
        prompt = str(body["messages"][-1]["content"])
        if "bad" in prompt:
            return Fail(400, "the provider rejects this prompt")
        return Hang(self.hold, Reply(f"echo: {prompt}")) if self.hold else Reply(f"echo: {prompt}")


@pytest.fixture
def echo() -> Iterator[tuple[FakeProvider, Echo]]:
    responder = Echo()
    with FakeProvider(responder=responder) as fake:
        yield fake, responder


def asks(*prompts: str) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": p}] for p in prompts]


def text(response: Any) -> str:
    return str(response.choices[0].message.content)


def test_results_come_back_in_input_order_with_failures_in_place(
    echo: tuple[FakeProvider, Echo],
) -> None:
    fake, _ = echo
    router = Router([fake_route(fake, "a")])
    prompts = [f"question {i}" for i in range(12)]
    prompts[5] = "a bad one"
    results = router.batch_completion(
        model="g", messages=asks(*prompts), max_concurrency=4, progress=False
    )
    assert len(results) == 12 and fake.requests() == 12
    assert isinstance(results[5], Exception) and results[5].journey.attempts
    assert [text(r) for i, r in enumerate(results) if i != 5] == [
        f"echo: {p}" for i, p in enumerate(prompts) if i != 5
    ]


class InFlight:
    """An observer counting the requests open at once, from their start and end records."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __call__(self, record: object) -> None:
        with self.lock:
            if isinstance(record, RequestStarted):
                self.now += 1
                self.most = max(self.most, self.now)
            elif isinstance(record, RequestEnded):
                self.now -= 1


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_at_most_max_concurrency_requests_are_in_flight(fake: FakeProvider, twin: str) -> None:
    fake.script("a", *[Hang(0.05, Reply("ok"))] * 9)
    seen = InFlight()
    router = Router([fake_route(fake, "a")], observers=[seen])
    call = dict(model="g", messages=asks(*["q"] * 9), max_concurrency=3, progress=False)
    if twin == "sync":
        results = router.batch_completion(**call)  # type: ignore[arg-type]
    else:
        results = asyncio.run(router.abatch_completion(**call))  # type: ignore[arg-type]
    assert all(text(r) == "ok" for r in results) and fake.requests("a") == 9
    assert 1 <= seen.most <= 3 and seen.now == 0


def test_the_budget_stops_the_batch_and_nothing_more_is_sent(fake: FakeProvider) -> None:
    """Each call's worst case is reserved before it is sent; once one is refused, no request
    not yet started is sent, and what was spent stays within the cap."""
    fake.script("a", *[Reply("ok", usage=(10, 10))] * 20)
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("0.10"))
    results = router.batch_completion(
        model="g", messages=asks(*["q"] * 20), max_tokens=10, max_concurrency=2, progress=False
    )
    refused = [r for r in results if isinstance(r, OverBudgetError)]
    answered = [r for r in results if not isinstance(r, Exception)]
    assert refused and answered and len(refused) + len(answered) == 20
    assert fake.requests("a") == len(answered) < 20
    spent = router.spending()
    assert spent.spent <= spent.cap
    stopped = [r for r in refused if r.journey is None]
    assert stopped and all("the batch stopped" in str(r) for r in stopped)


def test_the_deadline_is_the_whole_batchs(echo: tuple[FakeProvider, Echo]) -> None:
    """One request at a time, each taking 0.3 s, within 0.5 s: the third and later cannot
    start in time, so they are not sent, whatever the machine's speed."""
    fake, responder = echo
    responder.hold = 0.3
    router = Router([fake_route(fake, "a")])
    results = router.batch_completion(
        model="g", messages=asks(*"abcde"), max_concurrency=1, deadline=0.5, progress=False
    )
    assert all(isinstance(r, DeadlineExceededError) for r in results[2:])
    assert all(r.journey is None and "not sent" in str(r) for r in results[2:])
    assert fake.requests() <= 2


def test_the_progress_bar_shows_done_failed_and_spent(
    echo: tuple[FakeProvider, Echo], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, _ = echo
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("100"))
    router.batch_completion(model="g", messages=asks("one", "two", "bad", "four"))
    bar = capsys.readouterr().err
    assert "4/4" in bar and f"done=3 failed=1 spent={router.spending().spent}" in bar
    router.batch_completion(model="g", messages=asks("one"), progress=False)
    assert capsys.readouterr().err == ""


def test_the_async_twin_keeps_order_and_failures(echo: tuple[FakeProvider, Echo]) -> None:
    fake, _ = echo
    router = Router([fake_route(fake, "a")])
    prompts = ["x", "bad y", "z"] * 4
    results = asyncio.run(
        router.abatch_completion(
            model="g", messages=asks(*prompts), max_concurrency=5, progress=False
        )
    )
    assert [isinstance(r, Exception) for r in results] == ["bad" in p for p in prompts]
    assert [text(r) for r in results if not isinstance(r, Exception)] == ["echo: x", "echo: z"] * 4


def test_litellms_max_workers_is_read_as_max_concurrency(echo: tuple[FakeProvider, Echo]) -> None:
    fake, _ = echo
    router = Router([fake_route(fake, "a")])
    results = router.batch_completion(
        model="g", messages=asks("p", "q"), max_workers=1, progress=False
    )
    assert [text(r) for r in results] == ["echo: p", "echo: q"]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        (
            {"messages": [{"role": "user", "content": "hi"}]},
            r"messages\[0\] must be a list of messages",
        ),
        ({"messages": "hi"}, "messages= must be a list"),
        ({"messages": asks("hi"), "max_concurrency": 0}, "max_concurrency must be ≥ 1"),
        (
            {"messages": asks("hi"), "max_concurrency": 2.5},
            "max_concurrency must be a whole number",
        ),
        ({"messages": asks("hi"), "stream": True}, "does not stream"),
        ({"messages": asks("hi"), "deadline": -1}, "deadline"),
    ],
)
def test_bad_batches_are_refused_before_anything_is_sent(
    fake: FakeProvider, kwargs: dict[str, Any], says: str
) -> None:
    router = Router([fake_route(fake, "a")])
    with pytest.raises(ConfigError, match=says):
        router.batch_completion(model="g", progress=False, **kwargs)
    assert fake.requests() == 0
