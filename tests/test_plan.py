"""The decision core as pure code: hand-built candidates, a manual clock, no network."""

from __future__ import annotations

import pytest

from policy_router import Check, ManualClock, NoRouteError, RefusedError, Requirements, Route
from policy_router.core.journey import Attempt
from policy_router.core.plan import Plan
from policy_router.ground.capability import Capability
from policy_router.ground.outcome import Fault, FaultKind
from policy_router.ground.records import Skip
from policy_router.policies.candidate import Candidate
from policy_router.policies.capabilities import resolve

from .conftest import Stepped

ALL = {c: True for c in Capability}


def cand(
    name: str, reach: str = "on_device", caps: dict[Capability, bool] | None = None
) -> Candidate:
    route = Route(f"openai/{name}", group="g", reach=reach, api_key=f"key-of-{name}")
    return Candidate(route=route, capabilities=resolve(route.model, None, False, ALL if caps is None else caps))


def test_plan_records_every_skip_and_attempt_in_order() -> None:
    """Skips come first (static checks), then attempts in order, timed on the clock."""
    clock = ManualClock()
    plan = Stepped(
        Plan(
            "g",
            [cand("a"), cand("v", reach="vendor"), cand("n", caps={}), cand("b")],
            Requirements(tools=True, on_device=True),
            clock=clock,
        )
    )
    first = plan.next()
    assert first is not None and first.route.name == "openai/a"
    clock.advance(1.5)
    plan.failed(first, Fault(FaultKind.SERVER_ERROR, 503, "overloaded key-of-a"))
    second = plan.next()
    assert second is not None and second.route.name == "openai/b"
    clock.advance(0.25)
    plan.answered(second)
    assert plan.next() is None
    assert plan.journey.steps == (
        Skip(
            "openai/v",
            Check.FLOOR,
            "vendor route (declared); the request is on-device only",
            detail={"reach": "vendor"},
        ),
        Skip(
            "openai/n", Check.KNOWN, "unknown model", detail={"why": plan.journey.skips[1].detail["why"]}
        ),
        Attempt(route="openai/a", outcome="server_error", status=503, error="overloaded ***", elapsed=1.5, then="next route"),
        Attempt(route="openai/b", outcome="answered", elapsed=0.25),
    )
    assert plan.journey.answered_by == "openai/b"


@pytest.mark.parametrize("kind", [FaultKind.BAD_REQUEST, FaultKind.REFUSED])
def test_request_faults_and_refusals_stop(kind: FaultKind) -> None:
    """A fault about the request or the work ends the plan: no other route is asked."""
    plan = Stepped(Plan("g", [cand("a"), cand("b")], Requirements(), clock=ManualClock()))
    send = plan.next()
    assert send is not None
    plan.failed(send, Fault(kind, 400, "no"))
    assert plan.next() is None
    error = plan.error(ValueError("provider error"))
    if kind is FaultKind.REFUSED:
        assert isinstance(error, RefusedError) and isinstance(error.provider_error, ValueError)
    else:
        assert isinstance(error, ValueError) and error.journey.attempts[0].then.startswith(
            "stopped"
        )  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", [k for k in FaultKind if k.falls_through])
def test_provider_and_route_faults_fall_through(kind: FaultKind) -> None:
    """Faults about the provider or the route's configuration move on to the next route."""
    plan = Stepped(Plan("g", [cand("a"), cand("b")], Requirements(), clock=ManualClock()))
    send = plan.next()
    assert send is not None
    plan.failed(send, Fault(kind))
    nxt = plan.next()
    assert nxt is not None and nxt.route.name == "openai/b"


def test_nothing_sent_is_no_route_error_naming_each_route() -> None:
    """With no candidate left and nothing sent, the error says what each route lacked."""
    plan = Stepped(Plan("g", [cand("n", caps={})], Requirements(images=True), clock=ManualClock()))
    assert plan.next() is None
    error = plan.error(None)
    assert isinstance(error, NoRouteError)
    assert "openai/n: unknown model" in str(error)


def test_a_stream_failing_after_its_first_chunk_replaces_its_answer() -> None:
    """One request that answered then failed is one attempt, not two."""
    plan = Stepped(
        Plan("g", [cand("a"), cand("b")], Requirements(streaming=True), clock=ManualClock())
    )
    send = plan.next()
    assert send is not None
    plan.answered(send)
    plan.failed_after_answer(send, Fault(FaultKind.STREAM_CUT, None, "cut"))
    journey = plan.journey
    assert [a.outcome for a in journey.attempts] == ["stream_cut"]
    assert journey.answered_by is None
    assert plan.next() is None
