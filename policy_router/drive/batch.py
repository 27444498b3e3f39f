"""Many requests as one batch (`Router.batch_completion`): results in input order, at most
`max_concurrency` in flight, a progress bar, and a stop when the budget is spent.

A request that fails leaves its exception object in its place, as LiteLLM's own
`batch_completion` does. The budget, the rate windows and the breaker are the router's, so
they hold across the batch as across any calls; `deadline=` is the whole batch's: each
request is given what is left of it, and one not started when it has passed is not sent.
When the budget refuses a request (`OverBudgetError`), the requests not yet started are not
sent either: each place holds an `OverBudgetError` that says the batch stopped, and the
requests already in flight finish.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.journey import Routed
from ..ground.clock import Clock
from ..ground.deadline import check_seconds
from ..ground.errors import ConfigError, DeadlineExceededError, OverBudgetError
from ..ground.money import Money

__all__ = ["Batch", "requests_of"]


def requests_of(messages: Any, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """One call's kwargs per request, from LiteLLM's `batch_completion` shape: `messages`
    a list with one list of messages per request, every other kwarg shared."""
    if kwargs.get("stream"):
        raise ConfigError(
            "batch_completion does not stream: drop stream=True, or call completion(..., "
            "stream=True) once per request"
        )
    if not isinstance(messages, list | tuple):
        raise ConfigError(
            "messages= must be a list with one list of messages per request, "
            f"got {type(messages).__name__}"
        )
    for i, one in enumerate(messages):
        if not isinstance(one, list | tuple):
            raise ConfigError(
                f"messages[{i}] must be a list of messages (one request), got "
                f"{type(one).__name__}; for a single request call completion(messages=[...])"
            )
    return [{**kwargs, "messages": list(one)} for one in messages]


def _workers(max_concurrency: Any) -> int:
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
        raise ConfigError(f"max_concurrency must be a whole number ≥ 1, got {max_concurrency!r}")
    if max_concurrency < 1:
        raise ConfigError(f"max_concurrency must be ≥ 1, got {max_concurrency}")
    return max_concurrency


class Batch:
    """The bookkeeping of one batch: which request starts next, what each one gave, the
    tallies the progress bar shows. Shared by the thread workers (under a lock) and the
    async workers (one loop)."""

    def __init__(
        self,
        requests: Sequence[dict[str, Any]],
        *,
        max_concurrency: Any,
        deadline: Any,
        clock: Clock,
        progress: bool,
        label: str,
    ) -> None:
        self._requests = list(requests)
        self.workers = min(_workers(max_concurrency), max(len(self._requests), 1))
        self._deadline = check_seconds(deadline, "deadline")
        self._clock = clock
        self._start = clock.now()
        self._until = None if self._deadline is None else self._start + self._deadline
        self._results: list[Any] = [None] * len(self._requests)
        self._next = 0
        self._stopped: OverBudgetError | None = None
        self._stopped_at = -1
        self._lock = threading.RLock()  # take() settles refusals under it
        self._done = self._failed = 0
        self._spent: dict[str, Money] = {}
        self._bar = _bar(len(self._requests), label) if progress and self._requests else None

    def take(self) -> tuple[int, dict[str, Any]] | None:
        """The next request to send, by index with its kwargs; None when every request has
        been handed out. A request that is not to be sent (the batch stopped, or its
        deadline passed) is settled here with its refusal, and the next one is looked at."""
        with self._lock:
            while self._next < len(self._requests):
                i, self._next = self._next, self._next + 1
                left = None if self._until is None else self._until - self._clock.now()
                refusal = self._refusal(left)
                if refusal is None:
                    kwargs = self._requests[i]
                    return i, kwargs if left is None else {**kwargs, "deadline": left}
                self.settle(i, refusal)
            return None

    def _refusal(self, left: float | None) -> BaseException | None:
        if self._stopped is not None:
            return OverBudgetError(
                f"not sent: the batch stopped when the budget refused request "
                f"{self._stopped_at}: {self._stopped}"
            )
        if left is not None and left <= 0:
            return DeadlineExceededError(
                f"not sent: the batch's deadline of {self._deadline:g} s passed "
                "before this request started",
                elapsed=self._clock.now() - self._start,
            )
        return None

    def settle(self, i: int, outcome: Routed[Any] | BaseException) -> None:
        """Record what request `i` gave (its routed answer or its exception)."""
        with self._lock:
            if isinstance(outcome, BaseException):
                self._results[i] = outcome
                self._failed += 1
                if isinstance(outcome, OverBudgetError) and self._stopped is None:
                    self._stopped, self._stopped_at = outcome, i
                journey = getattr(outcome, "journey", None)
            else:
                self._results[i] = outcome.response
                self._done += 1
                journey = outcome.journey
            cost = getattr(journey, "cost", None)
            if isinstance(cost, Money):
                held = self._spent.get(cost.currency)
                self._spent[cost.currency] = cost if held is None else held + cost
            if self._bar is not None:
                self._bar.set_postfix_str(self.tally(), refresh=False)
                self._bar.update(1)

    def tally(self) -> str:
        """`done=12 failed=1 spent=0.0042 USD`: what the progress bar shows."""
        spent = " + ".join(str(m) for m in self._spent.values()) or "0"
        return f"done={self._done} failed={self._failed} spent={spent}"

    def results(self) -> list[Any]:
        if self._bar is not None:
            self._bar.close()
        return self._results

    # -- the two ways to run it ------------------------------------------------------------
    def run(self, send: Callable[[dict[str, Any]], Routed[Any]]) -> list[Any]:
        """Send every request from `workers` threads; results in input order."""

        def work() -> None:
            while (job := self.take()) is not None:
                i, kwargs = job
                try:
                    self.settle(i, send(kwargs))
                except Exception as exc:  # the exception object takes the request's place
                    self.settle(i, exc)

        try:
            if self.workers == 1:
                work()
            else:
                with ThreadPoolExecutor(
                    self.workers, thread_name_prefix="policy-router-batch"
                ) as ex:
                    for f in [ex.submit(work) for _ in range(self.workers)]:
                        f.result()
        finally:
            done = self.results()
        return done

    async def arun(self, send: Callable[[dict[str, Any]], Awaitable[Routed[Any]]]) -> list[Any]:
        """The async twin of `run`: `workers` tasks on the running loop."""

        async def work() -> None:
            while (job := self.take()) is not None:
                i, kwargs = job
                try:
                    self.settle(i, await send(kwargs))
                except Exception as exc:
                    self.settle(i, exc)

        try:
            await asyncio.gather(*(work() for _ in range(self.workers)))
        finally:
            done = self.results()
        return done


def _bar(total: int, label: str) -> Any:
    # tqdm.auto: a widget in a notebook, a line in a terminal.
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit="req", dynamic_ncols=True)
