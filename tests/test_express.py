"""The express lane: the common call answered in few steps, with the plan's own records.

Every test here runs real calls through FakeProvider. The lane is compared with the plan
it stands in for: the same calls, with the lane switched off (`Planner.lane` answering
None), must give the same answers, journeys, health, records and requests received.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import re
from typing import Any

import litellm
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policy_router import Breaker, Budget, ManualClock, NoRouteError, Order, Route, Router
from policy_router.core.journey import Attempt
from policy_router.drive.express import Lane
from policy_router.drive.planning import Planner
from policy_router.endpoints import endpoint
from policy_router.ground.records import Skip
from policy_router.testing import Drop, Fail, FakeProvider, Refuse, Reply

from .conftest import MESSAGES, fake_route, prices

STEPS = {
    "ok": Reply("ok", usage=(7, 3)),
    "500": Fail(500, "upstream broke"),
    "429": Fail(429, "slow down", retry_after=30),
    "401": Fail(401, "bad key"),
    "400": Fail(400, "bad request"),
    "refuse": Refuse(),
    "drop": Drop(),
}


def fault_scripts(steps: int, routes: int) -> st.SearchStrategy[list[list[str]]]:
    """What the first 1 to `routes` routes answer: up to `steps` of `STEPS` each."""
    return st.lists(st.lists(st.sampled_from(sorted(STEPS)), max_size=steps), min_size=1, max_size=routes)


def _router(fake: FakeProvider, n: int, breaker: bool, priced: bool, **more: Any) -> Router:
    table = prices(**{f"x{i}": "1000" for i in range(n)}) if priced else None
    routes = [fake_route(fake, f"x{i}", prices=table) for i in range(n)]
    # A clock that stands still: rests and reasons read the same in both runs.
    return Router(
        routes,
        breaker=Breaker(failures=2, cooldown=60) if breaker else None,
        clock=ManualClock(),
        **more,
    )


def _step(step: Skip | Attempt | Any) -> tuple[Any, ...]:
    """A journey step without what differs between two runs (ids, times: the seconds a
    rest has left too, which a store keeping calendar time, SQLite, reads off the real
    clock, so a loaded machine moves them by a tenth between the runs)."""
    if isinstance(step, Attempt):
        return (
            "attempt", step.route, step.outcome, step.status, step.error, step.then,
            step.cost, step.usage, step.sent, step.rested, step.route_id, step.endpoint,
        )
    if isinstance(step, Skip):
        return ("skip", step.route, step.check, _REST_LEFT.sub("resting … s more", step.reason), step.route_id)
    return ("other", type(step).__name__)


_REST_LEFT = re.compile(r"resting \d+(?:\.\d+)? s more")


def _run(
    fake: FakeProvider,
    scripts: list[list[str]],
    calls: int,
    breaker: bool,
    priced: bool,
    use_async: bool,
    kwargs: dict[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """The calls' outcomes, journeys, health, records told, requests received and (for a
    router built with `more` holding budgets) every budget's account."""
    kwargs = kwargs or {}
    fake.reset()
    for i, script in enumerate(scripts):
        fake.script(f"x{i}", *(STEPS[s] for s in script))
    router = _router(fake, len(scripts), breaker, priced, **more)
    seen: list[Any] = []

    def told(journey: Any, outcome: Any) -> None:
        if journey is None:
            # Refused before planning (a bad argument), or an error that is no provider
            # outcome, re-raised as LiteLLM raised it (`metadata=1` breaks inside LiteLLM
            # before sending): received == attempts below still holds it to nothing sent.
            seen.append((outcome, None, []))
            return
        seen.append((outcome, journey.answered_by, [_step(s) for s in journey.steps]))

    def one() -> None:
        try:
            routed = router.route(model="g", messages=MESSAGES, **kwargs)
        except Exception as error:
            told(getattr(error, "journey", None), type(error).__name__)
            return
        assert routed.response._hidden_params["policy_router"] is routed.journey
        told(routed.journey, routed.response.choices[0].message.content)

    async def aone() -> None:
        try:
            routed = await router.aroute(model="g", messages=MESSAGES, **kwargs)
        except Exception as error:
            told(getattr(error, "journey", None), type(error).__name__)
            return
        assert routed.response._hidden_params["policy_router"] is routed.journey
        told(routed.journey, routed.response.choices[0].message.content)

    async def all_async() -> None:
        for _ in range(calls):
            await aone()

    if use_async:
        asyncio.run(all_async())
    else:
        for _ in range(calls):
            one()
    health = {
        name: (h.state, h.failures, h.probing, h.last_error) for name, h in router.health().items()
    }
    # What observers were told, in order (the router's own history of its records).
    records = [_step(r) for _, r in router._life.now.history._records]
    return {
        "seen": seen,
        "health": health,
        "told": records,
        "received": fake.requests(),
        "attempts": sum(len([s for s in j if s[0] == "attempt" and s[8]]) for _, _, j in seen),
        "budgets": router.budgets(),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fault_scripts(4, 3),
    st.integers(1, 4),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
@example([["500"], []], 2, True, False, False)  # a failure, then the lane's success resets it
@example([["500", "500"], ["ok"]], 3, True, True, True)  # the first route rests mid-run
@example([["drop", "ok"], []], 2, True, True, False)
@example([["401"], ["429"], []], 3, True, False, True)
@example([["400"], []], 2, False, True, False)  # about the request: it stops
@example([["refuse"], []], 1, True, False, True)
# A dropped connection, then a 500: the second error is not chained to the first (a chain
# would read the 500 as a connection failure).
@example([["drop"], ["500"]], 1, False, False, False)
def test_the_lane_gives_what_the_plan_gives(
    fake: FakeProvider,
    scripts: list[list[str]],
    calls: int,
    breaker: bool,
    priced: bool,
    use_async: bool,
) -> None:
    """Random fault scripts, breaker or not, priced or not, sync or async, several calls in
    a row (so a route rests, fails over, answers after failures): with the lane and without
    it, the same answers, journeys, health, records told, spend, and requests received."""
    taken: list[str] = []
    same_on_lane_and_plan(fake, scripts, calls, breaker, priced, use_async, taken=taken)
    assert len(taken) == calls  # every call took the lane (a rested first route is planned)


def same_on_lane_and_plan(
    fake: FakeProvider,
    scripts: list[list[str]],
    calls: int,
    breaker: bool,
    priced: bool,
    use_async: bool,
    kwargs: dict[str, Any] | None = None,
    *,
    taken: list[str] | None = None,
    more: Any = dict,
) -> dict[str, Any]:
    """`_run` with the lane and again with every call planned (`more()` gives each run's
    router its other arguments, made afresh): asserts the two equal and the requests
    received equal to the attempts counted, and returns the lane's run. `taken` collects
    the route of each call that entered the lane."""
    with pytest.MonkeyPatch.context() as patch:
        if taken is not None:
            for name in ("call", "acall"):
                patch.setattr(Lane, name, _spy(getattr(Lane, name), taken))
        fast = _run(fake, scripts, calls, breaker, priced, use_async, dict(kwargs or {}), **more())
    with pytest.MonkeyPatch.context() as patch:
        _no_lane(patch)
        planned = _run(fake, scripts, calls, breaker, priced, use_async, dict(kwargs or {}), **more())
    assert fast == planned
    assert fast["received"] == fast["attempts"]  # requests received == attempts counted
    return fast


# LiteLLM's whole keyword space (its `completion` signature and the keywords it reads from
# **kwargs that matter here), and keywords nobody listed. Left out: `stream` (a stream is
# never on the lane, `test_which_calls_take_the_lane`) and `mock_timeout` (it sleeps the
# call's whole timeout).
_KNOWN = sorted(
    {
        name
        for name in inspect.signature(litellm.completion).parameters
        if name not in ("model", "messages", "kwargs", "stream")
    }
    | {"mock_response", "caching", "metadata", "num_retries", "max_retries", "fallbacks",
       "on_device", "needs", "retry", "wait_for_capacity", "deadline", "base_url"}
)
KEYWORDS = st.dictionaries(
    st.one_of(st.sampled_from(_KNOWN), st.from_regex(r"x_[a-z]{1,8}", fullmatch=True)),
    st.one_of(
        st.none(), st.booleans(), st.integers(0, 3), st.text("abc", max_size=3),
        st.just({"type": "json_object"}),
    ),
    max_size=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    KEYWORDS,
    fault_scripts(2, 2),
    st.booleans(),
    st.booleans(),
)
def test_any_keyword_gives_on_the_lane_what_it_gives_in_the_plan(
    fake: FakeProvider,
    kwargs: dict[str, Any],
    scripts: list[list[str]],
    priced: bool,
    use_async: bool,
) -> None:
    """Random keywords from LiteLLM's whole space and keywords nobody listed, with random
    values (many LiteLLM refuses before sending, some make it answer without sending): the
    lane gives what the plan gives, requests received equal attempts, and a route rests only
    for a request it received."""
    fast = same_on_lane_and_plan(fake, scripts, 2, True, priced, use_async, kwargs)
    if fast["received"] == 0:
        assert all(state == "closed" and not failures for state, failures, _, _ in fast["health"].values())


def _no_lane(patch: pytest.MonkeyPatch) -> None:
    """Every call planned: no lane for a call read in full, nor for a plain one."""
    patch.setattr(Planner, "lane", lambda self, call: None)
    patch.setattr(Planner, "express", lambda self, *args: None)


def _spy(real: Any, taken: list[str]) -> Any:
    def spied(self: Lane, *args: Any) -> Any:
        taken.append(self.candidate.name)
        return real(self, *args)

    return spied


def _lane(router: Router, **kwargs: Any) -> Any:
    planner = router._life.now.planner
    call = planner.prepare(endpoint(kwargs.pop("endpoint", "chat")), "g", MESSAGES, kwargs)
    return planner.lane(call)


def test_which_calls_take_the_lane(fake: FakeProvider) -> None:
    """The common call takes it, budgeted or not; anything that rate-limits, orders,
    frames or bounds a request in time is planned, and so is a group whose first route a
    request skips."""
    routes = [fake_route(fake, "a"), fake_route(fake, "b")]
    plain = Router(routes, breaker=Breaker())
    assert _lane(plain) is not None
    assert _lane(plain, temperature=0.2, timeout=5) is not None
    assert _lane(plain, stream=True) is None
    assert _lane(plain, deadline=5.0) is None
    assert _lane(Router(routes, deadline=5.0)) is None
    # A budget's hold is taken on the lane (`tests/test_express_budget.py`).
    assert _lane(Router(routes, budget=Budget("1"))) is not None
    assert _lane(Router(routes, order=Order.CHEAPEST)) is None
    assert _lane(Router(routes, observers=[lambda record: None])) is None
    assert _lane(Router([fake_route(fake, "a", rpm=100), fake_route(fake, "b")])) is None
    # A route skipped for this request (it has no tools): the plan records why.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    no_tools = Route("openai/n", group="g", api_base=fake.base_url, api_key="sk-test-n",
                     capabilities={"tools": False})
    assert _lane(Router([no_tools, *routes]), tools=tools) is None


def test_a_resting_first_route_is_planned_and_skipped_with_its_reason(fake: FakeProvider) -> None:
    """The lane takes nothing from a route that is not closed: the plan skips it, says
    why, and the next route answers."""
    fake.script("a", Fail(500), Fail(500))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker(failures=2, cooldown=60)
    )
    router.completion(model="g", messages=MESSAGES)
    router.completion(model="g", messages=MESSAGES)  # a's second failure: it rests
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b"
    assert [type(s).__name__ for s in routed.journey.steps] == ["Skip", "Attempt"]
    assert "resting" in routed.journey.steps[0].reason
    assert fake.requests("a") == 2


def test_an_answer_litellm_made_itself_costs_nothing_on_the_lane(fake: FakeProvider) -> None:
    """`mock_response` is answered by LiteLLM without sending: handed to the plan, which
    bills nothing and tells the breaker nothing."""
    router = Router([fake_route(fake, "a", prices=prices(a="1000"))], breaker=Breaker())
    routed = router.route(model="g", messages=MESSAGES, mock_response="mocked")
    assert routed.response.choices[0].message.content == "mocked"
    assert routed.journey.attempts == ()
    assert routed.journey.steps[0].sent is False
    assert fake.requests() == 0


def test_a_cancelled_call_on_the_lane_is_recorded_and_holds_nothing(fake: FakeProvider) -> None:
    """A task cancelled while the lane's request is out: the plan records the cancelled
    attempt, the breaker learns nothing, and the route answers the next call."""
    from policy_router.testing import Hang

    fake.script("a", Hang(5))
    router = Router([fake_route(fake, "a")], breaker=Breaker(failures=1, cooldown=60))
    records: list[Any] = []

    async def main() -> None:
        task = asyncio.ensure_future(router.acompletion(model="g", messages=MESSAGES))
        while fake.requests("a") == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        records.extend(r for _, r in router._life.now.history._records)
        await router.acompletion(model="g", messages=MESSAGES)

    asyncio.run(main())
    assert [(r.route, r.outcome) for r in records] == [("openai/a", "cancelled")]
    assert router.resting() == {}
    assert router.health()["openai/a"].probing is False


def test_the_lane_charges_the_routes_price_and_the_journey_adds_up(fake: FakeProvider) -> None:
    """A priced route answered on the lane: the attempt's cost is its usage at the route's
    prices, and the journey's cost is that attempt's."""
    fake.script("a", Reply("ok", usage=(1000, 500)))
    router = Router([fake_route(fake, "a", prices=prices(a="1000"))], breaker=Breaker())
    routed = router.route(model="g", messages=MESSAGES)
    (attempt,) = routed.journey.attempts
    assert attempt.cost is not None and attempt.cost.micros == 1_500_000  # 1,500 tokens at 1,000 a million
    assert routed.cost == attempt.cost
    assert math.isfinite(routed.journey.elapsed)
    assert routed.journey.id and attempt.journey_id == routed.journey.id


def _kept_by_lane(patch: pytest.MonkeyPatch) -> list[bool]:
    """For each answer the lane is given, from now on: whether it kept it (else the plan)."""
    kept: list[bool] = []
    real = Lane._answered

    def spied(self: Lane, *args: Any) -> Any:
        routed = real(self, *args)
        kept.append(routed is not None)
        return routed

    patch.setattr(Lane, "_answered", spied)
    return kept


def test_the_lane_keeps_every_answer_but_the_ones_litellm_made_itself(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real requests over HTTP are answered on the lane, sync and async; an answer LiteLLM
    made without sending (a mock) is left to the plan, which bills and tells nothing."""
    kept = _kept_by_lane(monkeypatch)
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker())
    router.completion(model="g", messages=MESSAGES)
    asyncio.run(router.acompletion(model="g", messages=MESSAGES))
    router.completion(model="g", messages=MESSAGES, mock_response="mocked")
    assert kept == [True, True, False]
    assert fake.requests() == 2


def test_a_breaker_of_another_kind_is_asked_even_for_a_route_with_no_record(
    fake: FakeProvider,
) -> None:
    """The lane admits a route with no record without asking only `Breaker`'s own rule (a
    closed record is admitted as it is); a breaker that overrides it is asked, on the lane
    as on the plan, and a route it refuses receives nothing."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Shut(Breaker):
        def admit(self, h: Any, now: float) -> tuple[Any, str | None]:
            return h, "shut for maintenance"

    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Shut())
    for _ in range(2):  # the group's first plain call is read in full, the next in one pass
        with pytest.raises(NoRouteError, match="shut for maintenance"):
            router.completion(model="g", messages=MESSAGES)
    assert fake.requests("a") == fake.requests("b") == 0


@pytest.mark.parametrize("use_async", [False, True])
def test_an_embedding_is_answered_on_the_lane_with_the_plans_records(
    fake: FakeProvider, use_async: bool
) -> None:
    """LiteLLM's embedding path never says a request left (it takes `logger_fn` and does
    not call it): its answers are the provider's all the same, kept on the lane with the
    records the plan makes, one attempt per request received."""
    def routes() -> list[Route]:
        return [
            Route(f"openai/e{n}", group="e", api_base=fake.base_url, api_key=f"sk-test-{n}",
                  capabilities={"embedding": True}, prices=prices(**{f"e{n}": "2"}))
            for n in "ab"
        ]

    def embed(router: Router) -> Any:
        if use_async:
            return asyncio.run(router.aembedding(model="e", input=["hello there"]))
        return router.embedding(model="e", input=["hello there"])

    with pytest.MonkeyPatch.context() as patch:
        kept = _kept_by_lane(patch)
        fast = [embed(Router(routes(), breaker=Breaker())) for _ in range(2)]
    with pytest.MonkeyPatch.context() as patch:
        _no_lane(patch)
        planned = [embed(Router(routes(), breaker=Breaker())) for _ in range(2)]
    assert kept == [True, True]
    assert fake.requests("ea") == 4 and fake.requests("eb") == 0
    for one, other in zip(fast, planned, strict=True):
        a, b = one._hidden_params["policy_router"], other._hidden_params["policy_router"]
        assert len(a.attempts) == len(b.attempts) == 1
        assert a.attempts[0].cost == b.attempts[0].cost is not None
        assert a.attempts[0].usage == b.attempts[0].usage
        assert (a.attempts[0].sent, a.answered_by) == (b.attempts[0].sent, b.answered_by)


def test_an_embedding_the_provider_fails_is_counted_sent_and_rests_its_route(
    fake: FakeProvider,
) -> None:
    """With no word from LiteLLM that an embedding left (see above), a provider's 500 still
    counts as sent, as the error's own chain says: the route rests, the next one answers,
    and the journey's attempts are the requests received."""
    fake.script("ea", Fail(500))
    router = Router(
        [
            Route(f"openai/e{n}", group="e", api_base=fake.base_url, api_key=f"sk-test-{n}",
                  capabilities={"embedding": True})
            for n in "ab"
        ],
        breaker=Breaker(failures=1),
    )
    journey = router.embedding(model="e", input=["hello"])._hidden_params["policy_router"]
    assert [(a.route, a.outcome, a.sent) for a in journey.attempts] == [
        ("openai/ea", "server_error", True), ("openai/eb", "answered", True)
    ]
    assert fake.requests("ea") == fake.requests("eb") == 1
    assert router.health()["openai/ea"].state == "open"


def test_a_messages_call_after_a_chat_call_is_answered_by_the_messages_function(
    fake: FakeProvider,
) -> None:
    """A Messages call needs of its routes what a chat call needs (chat), but is sent by
    LiteLLM's Messages function and answered in Anthropic's shape: a chat call to the same
    group first does not hand it the chat call's lane (it was answered as a chat
    completion)."""
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker())

    async def main() -> list[Any]:
        chat = await router.acompletion(model="g", messages=MESSAGES)
        messages = [
            await router.aanthropic_messages(model="g", messages=MESSAGES, max_tokens=5)
            for _ in range(2)
        ]
        return [chat, *messages]

    chat, *answers = asyncio.run(main())
    assert chat.choices[0].message.content
    for answer in answers:
        assert isinstance(answer, dict) and answer["type"] == "message"
        assert answer["content"][0]["text"] == "Hello from FakeProvider."
    assert fake.requests("a") == 3
