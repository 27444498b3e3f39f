"""Property tests of the pure core: random routes, needs, prices, faults and clock steps."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from policy_router import (
    Breaker,
    Budget,
    InMemoryStore,
    ManualClock,
    Money,
    Price,
    Requirements,
    Route,
)
from policy_router.core.plan import Plan
from policy_router.ground.capability import Capability
from policy_router.ground.money import Usage
from policy_router.ground.outcome import Fault, FaultKind
from policy_router.policies.bounds import RequestFacts
from policy_router.policies.breaker import HealthBook
from policy_router.policies.budget import Ledger
from policy_router.policies.candidate import Candidate
from policy_router.policies.capabilities import resolve
from policy_router.policies.retry import Retry

from .conftest import Stepped

route_specs = st.lists(
    st.tuples(
        st.booleans(),  # on device
        st.frozensets(st.sampled_from(list(Capability))),  # capabilities
        st.one_of(st.none(), st.integers(0, 50)),  # price per million (None: unpriced)
    ),
    min_size=1,
    max_size=8,
)
needs_strategy = st.builds(
    Requirements,
    tools=st.booleans(),
    images=st.booleans(),
    streaming=st.booleans(),
    on_device=st.booleans(),
)
outcomes = st.lists(st.one_of(st.none(), st.sampled_from(list(FaultKind))), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    route_specs,
    needs_strategy,
    outcomes,
    # Caps near a few calls' worst case (at most 25,000 micros each) as well as roomy ones.
    st.one_of(st.integers(0, 60_000), st.integers(0, 2_000_000)),
    st.integers(1, 3),
    st.lists(st.floats(0, 100), max_size=30),
    st.lists(st.tuples(st.integers(0, 800), st.integers(0, 200)), max_size=30),
)
# One call admitted on its worst case (25,000 of a 30,000 cap) that reports twice its bound.
@example([(False, frozenset(), 50)], Requirements(), [None], 30_000, 1, [], [(800, 200)])
def test_the_core_keeps_its_promises(
    specs: list[tuple[bool, frozenset[Capability], int | None]],
    needs: Requirements,
    script: list[FaultKind | None],
    cap: int,
    attempts: int,
    steps: list[float],
    reported: list[tuple[int, int]],
) -> None:
    """Whatever happens: the floor, requirements, retries, stops and the cap all hold; a
    provider reporting more than the bound (400 prompt, 100 reply tokens here) may pass the
    cap, and the budget then says so."""
    clock = ManualClock()
    store = InMemoryStore()
    candidates = []
    for i, (local, caps, rate) in enumerate(specs):
        route = Route(
            f"openai/r{i}",
            group="g",
            reach="on_device" if local else "vendor",
            api_key="k",
            retry=Retry(attempts=attempts, backoff=0, jitter=False),
        )
        price = None if rate is None else Price(rate, rate)
        candidates.append(
            Candidate(
                route=route,
                capabilities=resolve(
                    route.model, None, False, {c: True for c in caps} or {Capability.TOOLS: False}
                ),
                price=price,
            )
        )
    ledger = Ledger(Budget(Money(cap, "USD"), unpriced="allow"), store)
    plan = Stepped(
        Plan(
            "g",
            candidates,
            needs,
            clock=clock,
            ledger=ledger,
            facts=RequestFacts(prompt_tokens=100, prompt_bound=400, reply_tokens=100),
            health=HealthBook(Breaker(failures=1), store, lambda _: None),
            retry=lambda r: r.retry,
        )
    )
    sent: list[str] = []
    outcome_iter = iter(script)
    step_iter = iter(steps)
    usage_iter = iter(reported)
    beyond = False
    while (send := plan.next()) is not None:
        sent.append(send.route.name)
        c = send.candidate
        assert not needs.on_device or c.route.reach.value == "on_device"
        assert not needs.unmet_by(c.capabilities)
        clock.advance(next(step_iter, 0.0))
        kind = next(outcome_iter, None)
        if kind is None:
            prompt, reply = next(usage_iter, (400, 100))
            beyond = beyond or (c.price is not None and (prompt > 400 or reply > 100))
            plan.answered(send, Usage(prompt=prompt, completion=reply))
        else:
            plan.failed(send, Fault(kind, 500, "x", retry_after=0.0))
            if not kind.falls_through:
                assert plan.next() is None
                break
    journey = plan.journey
    assert len(journey.attempts) == len(sent)
    assert all(sent.count(name) <= attempts for name in set(sent))
    spending = ledger.spending()
    assert spending.reserved == Money(0) and spending.left.micros >= 0
    # Within the bound (what a real provider can bill) the cap is never passed; beyond it,
    # only with the budget saying so.
    assert spending.spent.micros <= cap or (beyond and spending.overshoot_possible)


FAKE_STEPS = st.sampled_from(["ok", "503", "429", "401", "400", "refuse", "drop"])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[__import__("hypothesis").HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(st.tuples(st.booleans(), st.lists(FAKE_STEPS, max_size=3)), min_size=1, max_size=4),
    st.booleans(),
)
def test_end_to_end_the_same_promises_hold(
    fake: Any, routes: list[tuple[bool, list[str]]], on_device: bool
) -> None:
    """Random routes and fault scripts through FakeProvider: requests equal attempts, and
    under the floor no vendor route is ever sent a request."""
    from policy_router import PolicyRouterError, Router
    from policy_router.testing import Drop, Fail, Refuse, Reply

    from .conftest import MESSAGES, fake_route

    steps = {
        "ok": Reply("ok"),
        "503": Fail(503),
        "429": Fail(429),
        "401": Fail(401),
        "400": Fail(400),
        "refuse": Refuse(),
        "drop": Drop(),
    }
    fake.reset()
    built = []
    for i, (local, script) in enumerate(routes):
        fake.script(f"p{i}", *(steps[s] for s in script))
        built.append(fake_route(fake, f"p{i}", reach="on_device" if local else "vendor"))
    router = Router(built)
    try:
        journey = router.route(model="g", messages=MESSAGES, on_device=on_device).journey
    except Exception as error:  # the provider's own error, or ours when nothing was sent
        journey = error.journey  # type: ignore[attr-defined]
        assert journey is not None or isinstance(error, PolicyRouterError)
    assert fake.requests() == len(journey.attempts)
    if on_device:
        assert all(fake.requests(f"p{i}") == 0 for i, (local, _) in enumerate(routes) if not local)
