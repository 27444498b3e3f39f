"""What each worker process of the shared-store tests runs (imported by a forkserver)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from policy_router import (
    Breaker,
    Budget,
    DeadlineExceededError,
    OverBudgetError,
    PriceTable,
    RateLimitedError,
    RedisStore,
    Route,
    Router,
    StoreUnavailableError,
)

MESSAGES = [{"role": "user", "content": "Say hello."}]
# Output only, 1.00 per million tokens: a call of `max_tokens` that uses them all costs
# exactly its reservation, so a cap of K reservations fits K calls and not one more.
TABLE = {
    "currency": "USD",
    "as_of": "2026-11-01",
    "source": "tests",
    "models": {
        "openai/a": {"input": "0", "output": "1.00"},
        "openai/b": {"input": "0", "output": "1.00"},
    },
}


def shared_routes(base_url: str, **kw: Any) -> list[Route]:
    """Routes a and b of group g on the FakeProvider at `base_url`, priced by `TABLE`."""
    table = PriceTable.from_dict(TABLE, name="tests")
    return [
        Route(
            f"openai/{m}",
            name=m,
            group="g",
            api_base=base_url,
            api_key=f"sk-test-secret-{m}",
            prices=table,
            capabilities={"streaming": True},
            **kw,
        )
        for m in ("a", "b")
    ]


def shared_policy(base_url: str, name: str, store: dict[str, Any]) -> dict[str, Any]:
    """A policy file's contents: routes a and b of group g (key from $FAKE_KEY), a breaker
    that rests a route at its first failure, and `store`."""
    common = {"api_key": "os.environ/FAKE_KEY", "capabilities": {"streaming": True}}
    return {
        "name": name,
        "store": store,
        "breaker": {"failures": 1, "cooldown": 60},
        "groups": {
            "g": {
                "routes": [
                    {"model": f"openai/{m}", "api_base": base_url, **common} for m in ("a", "b")
                ]
            }
        },
    }


def router(
    redis_url: str, base_url: str, *, cluster: bool = False, timeout: float = 1.0, **policies: Any
) -> Router:
    store = RedisStore(redis_url, cluster=cluster, timeout=timeout)
    return Router(shared_routes(base_url), name="shared", store=store, **policies)


async def answered_or_refused(router: Router, max_tokens: int) -> str:
    """One async call to route a: "answered", or "refused" by the budget."""
    try:
        await router.acompletion(model="openai/a", messages=MESSAGES, max_tokens=max_tokens)
        return "answered"
    except OverBudgetError as error:
        # Refused by the cap, or because the store could not be reached (the budget fails
        # closed): the second is named, so a test counting refusals says which it saw.
        reasons = [s.reason for s in error.journey.skips] if error.journey else []
        if any("unreachable" in r or "could not be reached" in r for r in reasons):
            return f"refused, store unreachable: {reasons}"
        return "refused"
    except Exception as error:  # named in the test's failure, not lost to pickling
        import traceback

        return "".join(traceback.format_exception(error)[-6:])


def burst(
    redis_url: str,
    base_url: str,
    cap: str,
    calls: int,
    max_tokens: int,
    barrier: Any,
    cluster: bool = False,
    timeout: float = 1.0,
) -> Counter[str]:
    """`calls` concurrent async calls against one shared cap; how each ended (`timeout`:
    the store's, per command)."""
    r = router(redis_url, base_url, cluster=cluster, timeout=timeout, budget=Budget(cap))

    async def all_() -> list[str]:
        return await asyncio.gather(*(answered_or_refused(r, max_tokens) for _ in range(calls)))

    barrier.wait()
    return Counter(asyncio.run(all_()))


def one_call(redis_url: str, base_url: str, cooldown: float, start: Any, out: Any) -> None:
    """Wait for `start` (an Event or a Barrier), make one call, report its journey."""
    r = router(redis_url, base_url, breaker=Breaker(failures=1, cooldown=cooldown))
    start.wait()
    routed = r.route(model="g", messages=MESSAGES, max_tokens=5)
    out.put(
        {
            "answered": routed.route.name,
            "skipped": {s.route: s.reason for s in routed.journey.skips},
        }
    )


def limited_router(redis_url: str, base_url: str, rpm: int, **policies: Any) -> Router:
    """Routes a and b of group g, `rpm` requests a minute each, counted in Redis."""
    routes = [
        Route(
            f"openai/{m}",
            group="g",
            api_base=base_url,
            api_key=f"sk-test-secret-{m}",
            capabilities={"streaming": True},
            rpm=rpm,
        )
        for m in ("a", "b")
    ]
    return Router(routes, name="limits-burst", store=RedisStore(redis_url), **policies)


async def rate_limited_call(router: Router, **kwargs: Any) -> tuple[str, int]:
    """One async call: "answered", "refused" before sending (a full window, or one the
    store could not answer in time: the limit fails closed), or "deadline"; with the
    requests its journey says were sent."""
    try:
        routed = await router.aroute(model="g", messages=MESSAGES, **kwargs)
        return "answered", routed.attempts
    except (RateLimitedError, StoreUnavailableError) as refused:
        assert refused.journey is not None
        return "refused", len(refused.journey.attempts)
    except DeadlineExceededError as late:
        assert late.journey is not None
        return "deadline", len(late.journey.attempts)


def rate_burst(
    redis_url: str, base_url: str, rpm: int, calls: int, barrier: Any, kwargs: dict[str, Any]
) -> Counter[str]:
    """`calls` concurrent async calls through one process's router: how each ended, and
    under "sent" the requests the journeys record."""
    r = limited_router(redis_url, base_url, rpm)

    async def all_() -> list[tuple[str, int]]:
        return await asyncio.gather(*(rate_limited_call(r, **kwargs) for _ in range(calls)))

    barrier.wait()
    ended = asyncio.run(all_())
    return Counter(e for e, _ in ended) + Counter({"sent": sum(n for _, n in ended)})


def check_one_cap(results: list[Counter[str]], fits: int, received: int, state: Any, worst: int) -> None:
    """What `burst`s against one cap that fits `fits` calls of `worst` micro-dollars must
    show: every call answered or refused (nothing else escaped), every answer received and
    charged at its cost, nothing left reserved, never past the cap; and exactly `fits`
    answered whenever the store answered every call (a refusal naming the store unreachable
    is the budget failing closed, which a busy machine can cause: a timeout, not a bug)."""
    outcomes = sum(results, Counter())
    unreachable = sum(n for o, n in outcomes.items() if o.startswith("refused, store unreachable"))
    answered = outcomes["answered"]
    assert answered + outcomes["refused"] + unreachable == sum(outcomes.values()), outcomes
    assert received == answered
    assert state.spent == worst * answered and state.reserved == 0 and state.calls == answered
    assert answered <= fits
    if not unreachable:
        assert answered == fits, outcomes
